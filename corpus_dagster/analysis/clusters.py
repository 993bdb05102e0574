"""Complete-linkage near-duplicate clusters by greedy assignment in id order.

Documents are rows numbered in id byte order. Exact duplicates are collapsed first: each exact group is
one node (its smallest row, the representative) weighted by the group size; its members have identical
shingle sets, so they link to exactly the same documents and always end up in the same cluster (the
greedy result over the collapsed graph equals the greedy result over every document).

Greedy rule, deterministic: visit nodes in ascending row order; an unassigned node seeds a cluster; its
unassigned neighbours (exact Jaccard >= threshold) are tried in ascending row order, and each joins only
when it is linked to every member already in the cluster. So every pair inside a cluster has an exact
Jaccard >= the threshold (complete linkage), and each cluster's first row is its smallest id. Greedy
assignment is not a minimum clique cover, so the removal counts it gives are lower bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.lib.lsh import pack_pairs


@dataclass
class ClusterSet:
    """Clusters of representatives at one threshold, in seed (smallest id) order."""

    threshold: float
    reps: list[np.ndarray]  # representative rows of each cluster, seed first
    docs: np.ndarray  # documents per cluster (sum of exact group sizes)
    min_jaccard: np.ndarray
    mean_jaccard: np.ndarray


class PairLookup:
    """Exact Jaccard of verified pairs by packed key (sorted array + binary search, vectorized)."""

    def __init__(self, pairs: np.ndarray, jaccard: np.ndarray) -> None:
        keys = pack_pairs(pairs[:, 0], pairs[:, 1]) if len(pairs) else np.zeros(0, np.uint64)
        order = np.argsort(keys, kind="stable")
        self.keys, self.jaccard = keys[order], np.asarray(jaccard, dtype=np.float64)[order]

    def get(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Jaccard of each pair (a[i], b[i]); -1 where the pair was not verified at or above the floor."""
        want = pack_pairs(np.asarray(a), np.asarray(b))
        if len(self.keys) == 0:
            return np.full(len(want), -1.0)
        slot = np.minimum(np.searchsorted(self.keys, want), len(self.keys) - 1)
        return np.where(self.keys[slot] == want, self.jaccard[slot], -1.0)


def complete_linkage(
    pairs: np.ndarray, jaccard: np.ndarray, threshold: float, group_size: np.ndarray, has_shingles: np.ndarray
) -> ClusterSet:
    """Greedy complete-linkage clusters of >= 2 documents at `threshold`.

    pairs: (m, 2) representative rows (a < b) with their exact Jaccard; group_size: exact group size per
    row (meaningful at representatives); has_shingles: per row. A representative whose exact group has
    >= 2 documents is a cluster even without near neighbours (its members are identical, Jaccard 1.0).
    """
    sel = np.asarray(jaccard) >= threshold
    a, b, j = pairs[sel, 0], pairs[sel, 1], np.asarray(jaccard)[sel]
    lookup = PairLookup(np.stack([a, b], 1) if len(a) else np.zeros((0, 2), np.int64), j)
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    reps = np.flatnonzero(has_shingles & (group_size >= 1))
    seeds = unique_sorted(np.concatenate([src, reps[group_size[reps] >= 2]]))
    lo = np.searchsorted(src, seeds, side="left")
    hi = np.searchsorted(src, seeds, side="right")
    assigned = np.zeros(len(group_size), dtype=bool)
    out_reps: list[np.ndarray] = []
    for seed, s_lo, s_hi in zip(seeds.tolist(), lo.tolist(), hi.tolist(), strict=True):
        if assigned[seed]:
            continue
        assigned[seed] = True
        members = [seed]
        nbrs = dst[s_lo:s_hi]
        for c in nbrs[~assigned[nbrs]].tolist():
            if len(members) > 1:
                others = np.array(members[1:], dtype=np.int64)
                if (lookup.get(others, np.full(len(others), c)) < 0).any():
                    continue
            members.append(c)
            assigned[c] = True
        if len(members) > 1 or group_size[seed] >= 2:
            out_reps.append(np.array(members, dtype=np.int64))
    docs, mins, means = _cluster_stats(out_reps, group_size, lookup)
    return ClusterSet(threshold, out_reps, docs, mins, means)


def _cluster_stats(
    clusters: list[np.ndarray], group_size: np.ndarray, lookup: PairLookup
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents, min and mean exact Jaccard over every document pair of each cluster."""
    docs = np.array([int(group_size[c].sum()) for c in clusters], dtype=np.int64)
    mins = np.ones(len(clusters))
    means = np.ones(len(clusters))
    for i, reps in enumerate(clusters):
        if len(reps) < 2:
            continue
        ia, ib = np.triu_indices(len(reps), 1)
        jac = lookup.get(reps[ia], reps[ib])
        w = group_size[reps[ia]].astype(np.float64) * group_size[reps[ib]]
        s = group_size[reps].astype(np.float64)
        within = float((s * (s - 1) / 2).sum())
        total = float(docs[i]) * (docs[i] - 1) / 2
        mins[i] = float(jac.min())
        means[i] = (float((w * jac).sum()) + within) / total
    return docs, mins, means
