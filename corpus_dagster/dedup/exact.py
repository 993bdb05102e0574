"""Exact dedup: of each group of documents with the same SHA-256 of the cleaned text, keep the member of the
smallest rank (its stable key's place in byte order, `core.doc_keys`; by default the gid, the id's)."""

from __future__ import annotations

import numpy as np


def exact_duplicates(
    sha256: np.ndarray, eligible: np.ndarray, within: np.ndarray | None = None, rank: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(dropped gids, the gid each one duplicates) among the `eligible` gids.

    sha256: (n_docs, 32) uint8 digests indexed by gid (gids are ranks in id byte order, so the smallest
    gid of a group is its smallest id). `within` (an int per gid, e.g. its source): group only documents
    with the same value. `rank` (an int per gid, unique): the keeper of a group is its member of the smallest
    rank (None: of the smallest gid). Vectorized: one sort by (value, digest, rank).
    """
    keys = np.ascontiguousarray(sha256[eligible]).view(np.uint64).reshape(-1, 4)
    if within is not None:
        keys = np.column_stack([np.asarray(within)[eligible].astype(np.uint64), keys])
    order = np.lexsort((eligible if rank is None else np.asarray(rank)[eligible], *keys.T[::-1]))
    sorted_keys, sorted_gids = keys[order], eligible[order]
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (sorted_keys[1:] != sorted_keys[:-1]).any(axis=1)
    group_first = sorted_gids[np.flatnonzero(new_group)][np.cumsum(new_group) - 1]
    dup = sorted_gids != group_first
    dropped, kept_as = sorted_gids[dup], group_first[dup]
    by_gid = np.argsort(dropped, kind="stable")
    return dropped[by_gid], kept_as[by_gid]
