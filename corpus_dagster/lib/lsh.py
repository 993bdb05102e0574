"""LSH banding: every pair of documents that share a bucket in any band, and the banding to use.

Each band of `rows` signature values is folded into one 64-bit band hash. Documents with equal band
hashes share a bucket, and every pair of a bucket is a candidate: a pair at Jaccard s is a candidate with
probability 1 - (1 - s**rows)**bands, whatever else is in its buckets. (Linking each member to its
bucket's smallest document only, as a star, gives connected components but loses pairs: two members
similar to each other and not to the smallest one were never compared.)

The candidates of a pair depend on that pair's band hashes only, so the candidate set of a corpus is the
union of the candidate sets of any partition of its band columns (one unit per band) and of its documents.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.lib.shingle_hashing import fmix64

BAND_MUL = np.uint64(0x9FB21C651E98DF25)
BAND_SEED = 0x243F6A8885A308D3
CANDIDATE_PROBABILITY = 0.995  # default chance that a pair at the lowest threshold becomes a candidate
_LOW = np.uint64(0xFFFFFFFF)


def band_hashes(signatures: np.ndarray, bands: int) -> np.ndarray:
    """(n_docs, bands) uint64 band hashes of (n_docs, bands * rows) signatures."""
    n_docs, num_perm = signatures.shape
    if bands < 1 or num_perm % bands:
        raise ValueError(f"signature width ({num_perm}) must be a positive multiple of bands ({bands})")
    rows = num_perm // bands
    out = np.empty((n_docs, bands), dtype=np.uint64)
    for band in range(bands):
        h = np.full(n_docs, BAND_SEED ^ band, dtype=np.uint64)
        for col in range(band * rows, (band + 1) * rows):
            h *= BAND_MUL
            h += signatures[:, col].astype(np.uint64)
            h = fmix64(h)
        out[:, band] = h
    return out


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    """Probability that a pair with this Jaccard shares at least one band bucket."""
    return 1.0 - (1.0 - jaccard**rows) ** bands


def choose_banding(num_perm: int, threshold: float, probability: float = CANDIDATE_PROBABILITY) -> tuple[int, int]:
    """(bands, rows) for signatures of `num_perm` values: the most rows per band (the fewest false candidates)
    that still make a pair at `threshold` a candidate with at least `probability`; one row per band when
    none does. Uses bands * rows <= num_perm values of each signature (the first ones)."""
    if num_perm < 1:
        raise ValueError(f"num_perm must be positive, got {num_perm}")
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if candidate_probability(threshold, bands, rows) >= probability:
            return bands, rows
    return num_perm, 1


def pack_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Unordered pairs of indices (< 2**32) as one uint64 each: (min << 32) | max."""
    lo = np.minimum(a, b).astype(np.uint64)
    hi = np.maximum(a, b).astype(np.uint64)
    return (lo << np.uint64(32)) | hi


def unpack_pairs(keys: np.ndarray) -> np.ndarray:
    """(m, 2) int64 index pairs of packed pair keys."""
    keys = np.asarray(keys).astype(np.uint64)
    return np.stack([(keys >> np.uint64(32)).astype(np.int64), (keys & _LOW).astype(np.int64)], axis=1)


def band_pairs(band_keys: np.ndarray, gids: np.ndarray, dirty: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """All pairs of `gids` that share a band hash (one band), packed (`pack_pairs`), sorted and unique; and
    the size of the largest bucket. With `dirty` (a bool per document), only the pairs with at least one
    dirty document: the others are neither generated nor counted.

    Vectorized by distance within the sorted bucket: step k pairs each member with the k-th next one, on
    the members whose bucket still has one that far, so the work is the pair count plus one pass per
    member of the largest bucket. Dirty members sort first in their bucket, so pairing each dirty member
    with every later one gives each pair that involves a dirty document exactly once.
    """
    keys = np.asarray(band_keys, dtype=np.uint64)
    gids = np.asarray(gids, dtype=np.int64)
    if len(keys) < 2:
        return np.zeros(0, dtype=np.uint64), int(len(keys))
    clean = None if dirty is None else ~np.asarray(dirty, dtype=bool)
    order = np.lexsort((gids, keys)) if clean is None else np.lexsort((gids, clean, keys))
    k_sorted, g_sorted = keys[order], gids[order]
    new_run = np.ones(len(keys), dtype=bool)
    new_run[1:] = k_sorted[1:] != k_sorted[:-1]
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.append(run_start, len(keys)))
    left = run_start[run_id] + run_len[run_id] - 1 - np.arange(len(keys))  # members after me in my bucket
    active = np.flatnonzero(left > 0)
    if clean is not None:
        active = active[~clean[order][active]]
    parts = []
    step = 1
    while len(active):
        parts.append(pack_pairs(g_sorted[active], g_sorted[active + step]))
        step += 1
        active = active[left[active] >= step]
    largest = int(run_len.max())
    if not parts:
        return np.zeros(0, dtype=np.uint64), largest
    return unique_sorted(np.concatenate(parts)), largest


def merge_pairs(parts: Iterable[np.ndarray]) -> np.ndarray:
    """The union of packed pair sets (each band's), sorted and unique, merging pending parts once they hold
    as many pairs as the running set: with parts produced one at a time, memory stays within about twice
    the result."""
    merged, pending = np.zeros(0, np.uint64), []
    for part in parts:
        pending.append(np.asarray(part, dtype=np.uint64))
        if sum(map(len, pending)) >= max(len(merged), 1 << 20):
            merged, pending = unique_sorted(np.concatenate([merged, *pending])), []
    return unique_sorted(np.concatenate([merged, *pending])).astype(np.uint64, copy=False)


def candidate_pairs(band_keys: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Candidate pairs (smaller gid, larger gid), int64, unique and sorted, from a (n_docs, bands) key matrix:
    the same pairs as one `band_pairs` per band anywhere, merged."""
    packed = merge_pairs([band_pairs(band_keys[:, band], gids)[0] for band in range(band_keys.shape[1])])
    return unpack_pairs(packed)

