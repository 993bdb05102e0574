"""Reading the dedup stage's outputs: the only way the scrub, publish, analysis, review and release stages,
explain and the Dagster layer see them.

The dedup record (the sources it covered), its tables (dropped, clusters, pairs) and its near-duplicate graph.
Kept apart from the driver: a damaged table is rebuilt through the driver, imported when that happens (the
driver never imports this module). `REASONS` (the `reason` values of dropped.parquet) loads on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from corpus_dagster.core import records
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.dedup.key import DEDUP, DEDUP_CODE_VERSION, dedup_key
from corpus_dagster.lib.near_graph import GraphSpec

if TYPE_CHECKING:
    from corpus_dagster.dedup.tables import REASONS

__all__ = [
    "DEDUP", "DEDUP_CODE_VERSION", "REASONS", "clusters", "dedup_record", "dedup_sources", "dedup_stats",
    "dedup_tables", "dropped_ids", "near_graph",
]


def __getattr__(name: str) -> Any:
    if name == "REASONS":
        return import_module("corpus_dagster.dedup.tables").REASONS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dedup_record(layout: Layout) -> StageRecord:
    """The record of the last global dedup (UpstreamMissing when it never ran)."""
    return records.require_record(layout.stage(DEDUP), "dedup")


def dedup_sources(layout: Layout) -> list[str]:
    """The sources the last global dedup covered, sorted: the source set of everything downstream."""
    return list(dedup_record(layout).stats["sources"])


def dedup_stats(layout: Layout) -> dict[str, Any]:
    """The stats of the last global dedup."""
    return dedup_record(layout).stats


def _table(layout: Layout, name: str, resolved: Settings | Mapping[str, Any] | None = None) -> Path:
    return next(p for p in dedup_tables(layout, resolved).values() if p.name == name)


def dropped_ids(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> pl.DataFrame:
    """The id of every document the dedup step removed (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "dropped.parquet", resolved), columns=["id"])


def clusters(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "clusters.parquet", resolved), columns=["id", "cluster_min_id"])


def near_graph(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> tuple[Path, GraphSpec, list[str]]:
    """The last dedup's near-duplicate graph: its verified-pair table (pairs.parquet), the graph's shape and
    the sources it covers (`resolved`: see dedup_tables)."""
    record = dedup_record(layout)
    shape = record.stats.get("graph")
    if shape is None:
        raise UpstreamMissing(f"{layout.stage(DEDUP)}: the last dedup recorded no near-duplicate graph; run dedup")
    return dedup_tables(layout, resolved)["pairs"], GraphSpec.from_dict(shape), list(record.stats["sources"])


def dedup_tables(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Paths of the dedup tables by name (dropped, clusters, pairs), checked against the dedup record.

    With `resolved`, a damaged table is rebuilt here: the global dedup reruns over the sources it covered
    (deterministic, so under the same key it writes the same bytes)."""
    folder = layout.stage(DEDUP)
    record = dedup_record(layout)

    def rebuild() -> None:
        from corpus_dagster.dedup.driver import run_global_dedup  # the global dedup, only to rebuild

        sources = list(record.stats["sources"])
        if resolved is not None and dedup_key(layout, resolved, sources)[0] == record.key:  # else: refused below
            run_global_dedup(layout, resolved, sources)

    return {p.stem: p for p in records.record_files(folder, record, "tables", None if resolved is None else rebuild)}
