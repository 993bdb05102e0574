"""LSH banding: candidate pairs from equal band hashes, linear in bucket size.

Each band of `rows` signature values is folded into one 64-bit band hash. Documents with equal band
hashes share a bucket; every member is linked to the bucket's smallest global index only, so a bucket
of m members yields m - 1 candidate pairs, never m * (m - 1) / 2.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.lib.shingle_hashing import fmix64

BAND_MUL = np.uint64(0x9FB21C651E98DF25)
BAND_SEED = 0x243F6A8885A308D3


def band_hashes(signatures: np.ndarray, bands: int) -> np.ndarray:
    """(n_docs, bands) uint64 band hashes of (n_docs, num_perm) signatures; num_perm % bands == 0."""
    n_docs, num_perm = signatures.shape
    if bands < 1 or num_perm % bands:
        raise ValueError(f"num_perm ({num_perm}) must be a positive multiple of bands ({bands})")
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


def band_edges(band_keys: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """One band's candidate pairs packed as (smaller gid << 32) | larger gid, int64, sorted and unique.

    band_keys: the band hash of each row; gids: int64 global index of each row. Each member of a bucket is
    paired with the bucket's smallest gid (grouped with polars), so the pair count is linear in bucket size.
    """
    df = pl.DataFrame({"h": np.asarray(band_keys, dtype=np.uint64), "g": np.asarray(gids, dtype=np.int64)})
    edges = df.with_columns(pl.col("g").min().over("h").alias("m")).filter(pl.col("g") != pl.col("m"))
    return unique_sorted((edges["m"].to_numpy().astype(np.int64) << 32) | edges["g"].to_numpy().astype(np.int64))


def merge_band_edges(parts: list[np.ndarray]) -> np.ndarray:
    """Candidate pairs (smaller gid, larger gid), unique and sorted, from the packed edges of every band."""
    if not parts:
        return np.zeros((0, 2), dtype=np.int64)
    keys = unique_sorted(np.concatenate(parts))
    return np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)


def candidate_pairs(bucket_keys: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Candidate pairs (smaller gid, larger gid), unique and sorted, from a (n_docs, bands) key matrix.

    The same pairs whether the bands are banded here at once or one by one (`band_edges`) anywhere and
    merged (`merge_band_edges`): a band's pairs depend on that band's column only.
    """
    return merge_band_edges([band_edges(bucket_keys[:, band], gids) for band in range(bucket_keys.shape[1])])
