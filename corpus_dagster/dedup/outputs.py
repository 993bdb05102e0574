"""Reading the dedup stage's outputs: the only way the scrub, publish, analysis, review and release stages,
explain and the Dagster layer see them.

The dedup record (the sources it covered), its tables (dropped, clusters, pairs) and its near-duplicate graph.
Kept apart from the driver: a damaged table is rebuilt through the driver, imported when that happens (the
driver never imports this module). `REASONS` (the `reason` values of dropped.parquet) loads on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.core import records
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.lazy import lazy_names
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.dedup.key import DEDUP, DEDUP_CODE_VERSION, dedup_key
from corpus_dagster.lib.near_graph import GraphSpec

if TYPE_CHECKING:
    from corpus_dagster.dedup.tables import REASONS

__all__ = [
    "DEDUP", "DEDUP_CODE_VERSION", "REASONS", "clusters", "dedup_record", "dedup_sources", "dedup_stats",
    "dedup_tables", "dropped_ids", "near_graph", "DedupReport", "dedup_report", "drops_per_source",
    "per_source_outcomes",
]


__getattr__, _ = lazy_names(__name__, {"corpus_dagster.dedup.tables": "REASONS"})


def dedup_record(layout: Layout) -> StageRecord:
    """The record of the last global dedup (UpstreamMissing when it never ran)."""
    return records.require_record(layout.stage(DEDUP), "dedup")


def dedup_sources(layout: Layout) -> list[str]:
    """The sources the last global dedup covered, sorted: the source set of everything downstream."""
    return list(dedup_record(layout).stats["sources"])


def dedup_stats(layout: Layout) -> dict[str, Any]:
    """The stats of the last global dedup."""
    return dedup_record(layout).stats


def _table(layout: Layout, name: str, settings: Settings | None = None) -> Path:
    return next(p for p in dedup_tables(layout, settings).values() if p.name == name)


def dropped_ids(layout: Layout, settings: Settings | None = None) -> pl.DataFrame:
    """The id of every document the dedup step removed (`settings`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "dropped.parquet", settings), columns=["id"])


def clusters(layout: Layout, settings: Settings | None = None) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster (`settings`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "clusters.parquet", settings), columns=["id", "cluster_min_id"])


def near_graph(layout: Layout, settings: Settings | None = None) -> tuple[Path, GraphSpec, list[str]]:
    """The last dedup's near-duplicate graph: its verified-pair table (pairs.parquet), the graph's shape and
    the sources it covers (`settings`: see dedup_tables)."""
    record = dedup_record(layout)
    shape = record.stats.get("graph")
    if shape is None:
        raise UpstreamMissing(f"{layout.stage(DEDUP)}: the last dedup recorded no near-duplicate graph; run dedup")
    return dedup_tables(layout, settings)["pairs"], GraphSpec.from_dict(shape), list(record.stats["sources"])


def dedup_tables(layout: Layout, settings: Settings | None = None) -> dict[str, Path]:
    """Paths of the dedup tables by name (dropped, clusters, pairs), checked against the dedup record.

    With `settings`, a damaged table is rebuilt here: the global dedup reruns over the sources it covered
    (deterministic, so under the same key it writes the same bytes)."""
    folder = layout.stage(DEDUP)
    record = dedup_record(layout)

    def rebuild() -> None:
        from corpus_dagster.dedup.driver import run_global_dedup  # the global dedup, only to rebuild

        sources = list(record.stats["sources"])
        if settings is not None and dedup_key(layout, settings, sources)[0] == record.key:  # else: refused below
            run_global_dedup(layout, settings, sources)

    return {p.stem: p for p in records.record_files(folder, record, "tables", None if settings is None else rebuild)}
# --- What the dedup asset reports (the Dagster layer shapes it into metadata) -------------------------------

@dataclass(frozen=True)
class DedupReport:
    """What a dedup run shows beyond its result: per source the documents kept and dropped by each clean and
    dedup reason (`outcomes`), and the size of every near-duplicate cluster."""

    outcomes: dict[str, dict[str, int]]
    cluster_sizes: list[int]


def per_source_outcomes(layout: Layout, sources: list[str]) -> dict[str, dict[str, int]]:
    """Per source: documents kept after dedup, dropped by each clean reason (`clean: <reason>`), and by each
    dedup reason (`dedup: <reason>`)."""
    dropped = pl.read_parquet(dedup_tables(layout)["dropped"], columns=["id", "reason"])
    by = (dropped.with_columns(pl.col("id").str.replace(r":[^:]*$", "").alias("source"))
          .group_by("source", "reason").len().sort("source", "reason").rows())
    dedup_drops: dict[str, dict[str, int]] = {}
    for sid, reason, n in by:
        dedup_drops.setdefault(sid, {})[f"dedup: {reason}"] = n
    out = {}
    for sid in sources:
        stats = clean_record(layout, sid).stats
        gone = dedup_drops.get(sid, {})
        out[sid] = {"kept": stats["kept"] - sum(gone.values()),
                    **{f"clean: {k}": v for k, v in stats.get("reasons", {}).items()}, **gone}
    return out


def drops_per_source(outcomes: dict[str, dict[str, int]]) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) of the drops per source pivoted to what a person compares: the source, what dedup
    dropped (every reason, zeros too, so the columns stay put), what was kept, what clean dropped (all its
    reasons summed)."""
    dedup = [f"dedup: {r}" for r in sorted(import_module("corpus_dagster.dedup.tables").REASONS.values())]
    dedup += sorted({r for o in outcomes.values() for r in o if r.startswith("dedup: ")} - set(dedup))
    rows = []
    for sid, o in outcomes.items():
        clean = sum(v for r, v in o.items() if r.startswith("clean: "))
        rows.append([sid, *[o.get(r, 0) for r in dedup], o["kept"], clean])
    return ["source", *dedup, "kept", "clean: dropped"], rows


def dedup_report(layout: Layout, sources: list[str]) -> DedupReport:
    """The per-source outcomes and the cluster sizes of the last dedup over `sources`."""
    sizes = clusters(layout).group_by("cluster_min_id").len()["len"].to_list()
    return DedupReport(per_source_outcomes(layout, sources), sizes)
