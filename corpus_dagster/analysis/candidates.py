"""LSH candidate pairs for the analysis: every pair that shares a bucket in any band (not a star).

The dedup stage links each bucket member to the bucket's smallest document, which is enough to build
connected components but not to list every near duplicate of every document. Here each bucket yields all
its pairs, so a pair of documents at Jaccard s becomes a candidate with probability
1 - (1 - s**rows)**bands, whatever else is in the bucket.
"""

from __future__ import annotations

import numpy as np

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.lib.lsh import band_hashes


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    """Probability that a pair with this Jaccard shares at least one band bucket."""
    return 1.0 - (1.0 - jaccard**rows) ** bands


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n, bands) uint64 band hashes from the first bands * rows values of each signature."""
    need = bands * rows
    if signatures.shape[1] < need:
        raise ValueError(f"signatures have {signatures.shape[1]} values, bands x rows needs {need}")
    return band_hashes(np.ascontiguousarray(signatures[:, :need]), bands)


def pair_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pack pairs of row numbers (< 2**32) as (min << 32) | max, one uint64 per unordered pair."""
    lo, hi = np.minimum(a, b).astype(np.uint64), np.maximum(a, b).astype(np.uint64)
    return (lo << np.uint64(32)) | hi


def unpack_pairs(keys: np.ndarray) -> np.ndarray:
    """(m, 2) int64 rows of packed pair keys."""
    keys = keys.astype(np.uint64)
    return np.stack([(keys >> np.uint64(32)).astype(np.int64), (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)], 1)


def bucket_pairs(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """All pairs of rows that share a key (one band), as sorted unique packed keys; and the largest bucket.

    Vectorized by distance within the sorted bucket: step k pairs each member with the k-th next one, on
    the members whose bucket still has one that far, so the work is the pair count plus one pass per
    member of the largest bucket.
    """
    if len(keys) < 2:
        return np.zeros(0, dtype=np.uint64), int(len(keys))
    order = np.lexsort((rows, keys))
    k_sorted, r_sorted = keys[order], rows[order]
    new_run = np.ones(len(keys), dtype=bool)
    new_run[1:] = k_sorted[1:] != k_sorted[:-1]
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.append(run_start, len(keys)))
    left = run_start[run_id] + run_len[run_id] - 1 - np.arange(len(keys))  # members after me in my bucket
    active = np.flatnonzero(left > 0)
    parts = []
    step = 1
    while len(active):
        parts.append(pair_keys(r_sorted[active], r_sorted[active + step]))
        step += 1
        active = active[left[active] >= step]
    largest = int(run_len.max())
    if not parts:
        return np.zeros(0, dtype=np.uint64), largest
    return unique_sorted(np.concatenate(parts)), largest
