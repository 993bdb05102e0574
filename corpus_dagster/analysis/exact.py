"""Exact (byte-identical) duplicate groups from SHA-256 digests, vectorized."""

from __future__ import annotations

import numpy as np


def exact_representatives(digests: np.ndarray) -> np.ndarray:
    """Per document (rows in id order): the smallest row whose digest is equal (its own row when unique).

    digests: (n, 32) uint8 SHA-256 of the UTF-8 text bytes. One lexicographic sort of the four 64-bit
    words of each digest, ties broken by row, so the first row of a run is the group's smallest id.
    """
    n = len(digests)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    words = np.ascontiguousarray(digests).view(">u8").reshape(n, 4).astype(np.uint64)
    rows = np.arange(n, dtype=np.int64)
    order = np.lexsort((rows, words[:, 3], words[:, 2], words[:, 1], words[:, 0]))
    w = words[order]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (w[1:] != w[:-1]).any(axis=1)
    run_first = order[np.flatnonzero(new_run)]
    run_of = np.cumsum(new_run) - 1
    rep = np.empty(n, dtype=np.int64)
    rep[order] = run_first[run_of]
    return rep


def group_members(rep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members of every group as CSR over the representative rows: (starts, sizes, members).

    members lists every row sorted by (representative, row); starts/sizes are indexed by row and are only
    meaningful at representatives (rows where rep == row).
    """
    n = len(rep)
    order = np.lexsort((np.arange(n), rep))
    sizes = np.bincount(rep, minlength=n).astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    return starts, sizes, order.astype(np.int64)
