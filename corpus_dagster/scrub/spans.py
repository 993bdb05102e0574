"""Region matches of a batch as numpy arrays, so that filtering and grouping them costs no Python per match.

A batch yields hundreds of thousands of region matches (a changelog has a date and an address per entry);
the detectors need Python tuples only for the few that survive the filters and the re-check radius.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Regions = list[tuple[int, int]]

FILTER_BEFORE, FILTER_AFTER = 1, 8
"""Byte filters read from FILTER_BEFORE bytes before a match's first byte to less than FILTER_AFTER bytes
after it (so within as many characters): a match farther than this from replaced text keeps its filter
verdict (carry.py)."""


@dataclass(frozen=True)
class Utf8:
    """The UTF-8 bytes of a batch's texts, one buffer: text i is data[offsets[i]:offsets[i + 1]]."""

    data: np.ndarray
    offsets: np.ndarray

    def continuation_bytes(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Sorted positions in data[lo:hi] of UTF-8 continuation bytes (the bytes that start no character)."""
        def continuation(part: np.ndarray) -> np.ndarray:
            high = np.flatnonzero(part >= 0x80)
            return high[(part[high] & 0xC0) == 0x80]

        return self.scan(continuation, lo, hi)

    def positions_of(self, needles: str) -> np.ndarray:
        """Sorted positions in data of any of the given ASCII bytes, over every text of the batch."""
        codes = np.frombuffer(needles.encode("ascii"), np.uint8)
        return self.scan(lambda part: np.flatnonzero(np.isin(part, codes)),
                         int(self.offsets[0]), int(self.offsets[-1]))

    def scan(self, select: Callable[[np.ndarray], np.ndarray], lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Sorted positions in data[lo:hi] that `select` picks in each slice (positions relative to the slice).

        In slices of _CHUNK bytes: a temporary the size of the batch would be fresh memory each time, and
        first touches of memory cost more than the comparison."""
        hi = len(self.data) if hi is None else hi
        found = [np.zeros(0, np.int64)]
        for a in range(lo, hi, _CHUNK):
            found.append(select(self.data[a : min(a + _CHUNK, hi)]) + a)
        return np.concatenate(found)


_CHUNK = 1 << 20


@dataclass(frozen=True)
class Bytes:
    """What a byte filter reads: the batch's bytes around the first byte of each match of one pattern.

    `reach`: the relative positions it may read, [before, after) (a filter's verdict is carried over a
    replacement only that far from it; prescreen.Anchored reads wider, once, before any replacement)."""

    utf8: Utf8
    doc: np.ndarray
    byte: np.ndarray
    reach: tuple[int, int] = (-FILTER_BEFORE, FILTER_AFTER)

    def __len__(self) -> int:
        return len(self.doc)

    def at(self, rel: int) -> np.ndarray:
        """The byte `rel` bytes after each match's first byte (negative: before it), -1 outside its text."""
        if not self.reach[0] <= rel < self.reach[1]:
            raise ValueError(f"reads {rel} bytes from a match, outside {self.reach}")
        data = self.utf8.data
        if not len(data):
            return np.full(len(self.doc), -1, np.int16)
        pos = self.byte + rel
        # a match's first byte is inside its text: only the side being read can be crossed
        inside = pos >= self.utf8.offsets[self.doc] if rel < 0 else pos < self.utf8.offsets[self.doc + 1]
        return np.where(inside, data.take(pos, mode="clip").astype(np.int16), np.int16(-1))

    def take(self, keep: np.ndarray) -> Bytes:
        """The matches where `keep` is true."""
        return Bytes(self.utf8, self.doc[keep], self.byte[keep], self.reach)

    def spell(self, word: bytes, rel: int = 0, fold: bool = False) -> np.ndarray:
        """Whether the bytes from `rel` on spell the ASCII `word`; with `fold`, its lowercase letters match
        either case."""
        ok = np.ones(len(self), bool)
        for i, ch in enumerate(word):
            b = self.at(rel + i)
            ok &= ((b == ch) | (b == ch - 32)) if fold and 97 <= ch <= 122 else b == ch
        return ok


RegionFilter = Callable[[Bytes], np.ndarray]
"""A byte test of one pattern's matches: True where its detector must look (api._Plan.filters)."""


@dataclass(frozen=True)
class Matches:
    """Every match of one region pattern in a batch, sorted by text, then start (character offsets).

    `look` says which matches the detectors look at (the pattern's byte filter; None: all of them). The
    re-check decision reads every match.
    """

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    look: np.ndarray | None = None

    @classmethod
    def empty(cls) -> Matches:
        """No matches."""
        none = np.zeros(0, np.int64)
        return cls(none, none, none)

    def __len__(self) -> int:
        return len(self.doc)

    def take(self, keep: np.ndarray) -> Matches:
        """The matches where the boolean mask `keep` is true (order kept)."""
        look = None if self.look is None else self.look[keep]
        return Matches(self.doc[keep], self.start[keep], self.end[keep], look)

    def by_doc(self) -> dict[int, Regions]:
        """{text index: [(start, end), ...]} for the texts with a match."""
        if not len(self):
            return {}
        spans = list(zip(self.start.tolist(), self.end.tolist(), strict=True))
        cuts = (np.flatnonzero(np.diff(self.doc)) + 1).tolist()
        bounds = [0, *cuts, len(spans)]
        docs = self.doc[bounds[:-1]].tolist()
        return {d: spans[a:b] for d, a, b in zip(docs, bounds[:-1], bounds[1:], strict=True)}


def merged_windows(parts: list[tuple[Matches, int | None]], before: int, after: int, sizes: np.ndarray) -> Matches:
    """prescreen.windows for every text at once: the matches of all parts (a part's (matches, length):
    with a length, each match counts as that long from its start) widened by `before`/`after` characters,
    clipped to their text (`sizes`: each text's length), overlapping or touching ones merged."""
    doc = np.concatenate([m.doc for m, _ in parts])
    start = np.concatenate([m.start for m, _ in parts])
    end = np.concatenate([m.end if n is None else m.start + n for m, n in parts])
    if not len(doc):
        return Matches.empty()
    order = np.lexsort((end, start, doc))
    doc, start, end = doc[order], start[order], end[order]
    lo = np.maximum(start - before, 0)
    base = doc * _STRIDE
    hi = np.minimum(end + after, sizes[doc]) + base
    reach = np.maximum.accumulate(hi)  # texts' keys never interleave, so this runs within each text
    first = np.ones(len(doc), bool)
    first[1:] = lo[1:] + base[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    tails = np.append(heads[1:] - 1, len(doc) - 1)
    return Matches(doc[heads], lo[heads], reach[tails] - base[heads])


_STRIDE = 1 << 40  # (text index, offset) as one sortable key


def merge(parts: list[Matches]) -> Matches:
    """The matches of every part, sorted by text, then start."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Matches.empty()
    if len(parts) == 1:
        return parts[0]
    doc = np.concatenate([p.doc for p in parts])
    start = np.concatenate([p.start for p in parts])
    order = np.lexsort((start, doc))
    look = None
    if any(p.look is not None for p in parts):
        look = np.concatenate([np.ones(len(p), bool) if p.look is None else p.look for p in parts])[order]
    return Matches(doc[order], start[order], np.concatenate([p.end for p in parts])[order], look)
