"""The near-duplicate graph's shape: which pairs it keeps and how candidates are banded.

One graph serves dedup and the analysis: its threshold is the lowest either needs, its banding is chosen
for that threshold (`lsh.choose_banding`) unless the config fixes it, and every candidate pair is scored
once by exact Jaccard. Dedup then drops by its own threshold over the graph, the analysis reads its views
from it.

Banding for a high candidate probability at the threshold lets many dissimilar pairs share a bucket; before
any text is read, a candidate whose two signatures agree on far fewer values than a pair at the threshold
would (`agreement_floor`) is set aside. Its cost is one comparison of two rows of values per pair, against
shingling both texts and a merge walk over their sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from corpus_dagster.core.settings import NearDupSettings, Settings
from corpus_dagster.lib.lsh import candidate_probability, choose_banding


@dataclass(frozen=True)
class GraphSpec:
    """The lowest Jaccard the graph keeps, its banding and its shingling."""

    threshold: float
    bands: int
    rows: int
    num_perm: int
    shingle_size: int

    @property
    def width(self) -> int:
        """Signature values the banding reads (the first ones of each signature)."""
        return self.bands * self.rows

    def probability(self, jaccard: float) -> float:
        """Chance that a pair at this Jaccard becomes a candidate."""
        return candidate_probability(jaccard, self.bands, self.rows)

    @classmethod
    def from_dict(cls, shape: dict[str, Any]) -> GraphSpec:
        """The spec an `as_dict` recorded (a stage's stats), its derived entries left out."""
        return cls(float(shape["threshold"]), int(shape["bands"]), int(shape["rows"]), int(shape["num_perm"]),
                   int(shape["shingle_size"]))

    def as_dict(self) -> dict[str, float | int]:
        """For stats and reports."""
        return {"threshold": self.threshold, "bands": self.bands, "rows": self.rows, "num_perm": self.num_perm,
                "shingle_size": self.shingle_size,
                "p_candidate_at_threshold": round(self.probability(self.threshold), 4)}


def graph_spec(near: NearDupSettings, dedup_threshold: float) -> GraphSpec:
    """The graph the config asks for: threshold = the smaller of near_dup.threshold and the dedup threshold."""
    threshold = min(float(near.threshold), float(dedup_threshold))
    if near.bands is not None and near.rows is not None:
        bands, rows = int(near.bands), int(near.rows)
    else:
        bands, rows = choose_banding(int(near.num_perm), threshold, float(near.candidate_probability))
    return GraphSpec(threshold, bands, rows, int(near.num_perm), int(near.shingle_size))


def dedup_graph_spec(settings: Settings) -> GraphSpec:
    """The near-duplicate graph a corpus build's dedup computes (and its manifest and stats describe): the
    `near_dup` section at the smaller of its threshold and `dedup.jaccard_threshold`. A function here, not a
    property of the settings, because the banding is lib's (core's generated settings import no lib)."""
    return graph_spec(settings.near_dup, settings.dedup.jaccard_threshold)


# The chance that a pair exactly at the threshold is set aside by the agreement filter: 1e-6, 150 times below
# the chance that the default banding misses it in LSH (1.5e-4 at 0.7 with 32 x 4).
AGREEMENT_MISS = 1e-6


def agreement_floor(num_values: int, threshold: float, miss: float | None = None) -> int:
    """The fewest equal signature values a candidate needs to be scored: the largest k with
    P(X < k) <= `miss` (default AGREEMENT_MISS) for X ~ Binomial(num_values, threshold), the number of equal
    values of two MinHash signatures of a pair at the threshold (exact tail, in log space). A pair above
    the threshold falls under the floor less often still."""
    miss = AGREEMENT_MISS if miss is None else miss
    if threshold <= 0.0 or miss <= 0.0:
        return 0
    if threshold >= 1.0:
        return num_values
    log_t, log_f = math.log(threshold), math.log1p(-threshold)
    below = 0.0  # P(X < k)
    for k in range(num_values + 1):
        below += math.exp(math.lgamma(num_values + 1) - math.lgamma(k + 1) - math.lgamma(num_values - k + 1)
                          + k * log_t + (num_values - k) * log_f)
        if below > miss:  # P(X < k + 1) > miss: k is the floor
            return k
    return num_values


def agreeing(pairs: np.ndarray, signatures: np.ndarray, row_of_gid: np.ndarray, floor: int,
             chunk: int = 1 << 14) -> np.ndarray:
    """Per candidate pair (gid, gid): whether its two signatures agree on at least `floor` values.

    signatures: one row per graph document (a memory map is fine: chunk pairs at a time are read);
    row_of_gid: the signature row of each gid. Memory: 2 x chunk x num_perm values."""
    keep = np.zeros(len(pairs), dtype=bool)
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        a = np.asarray(signatures[row_of_gid[part[:, 0]]])
        b = np.asarray(signatures[row_of_gid[part[:, 1]]])
        keep[start : start + len(part)] = np.count_nonzero(a == b, axis=1) >= floor
    return keep
