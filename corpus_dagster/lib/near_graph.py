"""The near-duplicate graph's shape: which pairs it keeps and how candidates are banded.

One graph serves dedup and the analysis: its threshold is the lowest either needs, its banding is chosen
for that threshold (`lsh.choose_banding`) unless the config fixes it, and every candidate pair is scored
once by exact Jaccard. Dedup then drops by its own threshold over the graph, the analysis reads its views
from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from corpus_dagster.core.settings import NearDupSettings
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
