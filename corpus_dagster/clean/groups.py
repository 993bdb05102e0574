"""Group equal items inside each document with one numpy sort (no Python loop, no hash table).

Items are identified by a 64-bit hash; each item's index is packed into the low bits of its hash so a
plain `np.sort` of uint64 values (much faster than an argsort) orders items by (hash, index). Equal
hashes in the same document are then adjacent and in index order. The top 64 - log2(n) bits of the
hash decide equality, so two different items of one document collide with probability ~2**-40.
"""

from __future__ import annotations

import numpy as np


class Groups:
    """Items (index 0..m-1, in document order) grouped by (document, hash)."""

    def __init__(self, hashes: np.ndarray, doc: np.ndarray):
        m = len(hashes)
        self.m = m
        bits = max(1, int(m).bit_length())
        mask = np.uint64((1 << bits) - 1)
        packed = ((hashes.astype(np.uint64) >> np.uint64(bits)) << np.uint64(bits)) | np.arange(m, dtype=np.uint64)
        packed.sort()
        self.order = (packed & mask).astype(np.int64)  # item indices, grouped, ascending inside a group
        key = packed >> np.uint64(bits)
        d = doc[self.order]
        self.same = (key[1:] == key[:-1]) & (d[1:] == d[:-1])  # order[i+1] is in order[i]'s group

    def first(self) -> np.ndarray:
        """True where an item is the first of its group (its value did not occur earlier in its document)."""
        out = np.ones(self.m, dtype=bool)
        out[self.order[1:][self.same]] = False
        return out

    def previous(self) -> np.ndarray:
        """Index of the previous item of the same group, or -1."""
        out = np.full(self.m, -1, dtype=np.int64)
        out[self.order[1:][self.same]] = self.order[:-1][self.same]
        return out

    def sizes(self) -> np.ndarray:
        """Size of each item's group."""
        starts = np.ones(self.m, dtype=bool)
        starts[1:] = ~self.same
        run = np.cumsum(starts) - 1
        out = np.empty(self.m, dtype=np.int64)
        out[self.order] = np.bincount(run)[run]
        return out

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(first item index, size) of every group."""
        starts = np.ones(self.m, dtype=bool)
        starts[1:] = ~self.same
        run = np.cumsum(starts) - 1
        return self.order[starts], np.bincount(run)
