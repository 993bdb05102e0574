"""What a global dedup returns: the stats its record keeps, as attributes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DedupResult:
    """One global dedup, built now or reused (`cached`): its key and the counts a report shows.

    `stats` is the record's whole stats (every count, the graph's shape, the settings it reports); the
    attributes are the ones readers use.
    """

    key: str
    cached: bool
    sources: tuple[str, ...]
    docs: int
    exact_dropped: int
    near_dropped: int
    decontaminated: int
    no_signature: int
    n_clusters: int
    largest_clusters: tuple[Mapping[str, Any], ...] = ()
    example_pairs: tuple[Mapping[str, Any], ...] = ()
    #: seconds per step of the build (plan, lsh, verify, blocks, ...); a single figure in older records
    seconds: Mapping[str, float] | float = field(default_factory=dict)
    blocks: Mapping[str, int] = field(default_factory=dict)
    stats: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any], key: str, cached: bool) -> DedupResult:
        """The result of a dedup whose record holds `stats`."""
        return cls(
            key=key, cached=cached, sources=tuple(stats.get("sources", ())), docs=int(stats.get("docs", 0)),
            exact_dropped=int(stats["exact_dropped"]), near_dropped=int(stats["near_dropped"]),
            decontaminated=int(stats["decontaminated"]), no_signature=int(stats.get("no_signature", 0)),
            n_clusters=int(stats.get("n_clusters", 0)),
            largest_clusters=tuple(stats.get("largest_clusters", ())),
            example_pairs=tuple(stats.get("example_pairs", ())),
            seconds=stats.get("seconds", {}), blocks=dict(stats.get("blocks", {})), stats=dict(stats),
        )

    @property
    def built_seconds(self) -> float:
        """The build's time: the sum of its steps' seconds."""
        if isinstance(self.seconds, Mapping):
            return float(sum(self.seconds.values()))
        return float(self.seconds or 0.0)
