"""The dedup stage's driver: the global dedup step and the readers of its outputs.

It writes `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean and
signature keys (the signatures are the minhash stage's, read through `corpus_dagster.minhash.driver`),
the protected sets' content hashes and the `dedup` and `near_dup` settings (`dedup.key`), and the
near-duplicate graph's blocks under `stages/dedup/_graph-blocks/` (`dedup.blocks`: one per pair of sources,
reused by the next build while both sources are unchanged). The record also names the sources it covered:
the scrub and publish stages build exactly that source set.

The global dedup is a unit stage (`core.units.UnitStage`, `dedup.units.DedupStage`) whose units any
executor can run on any process or machine that mounts the artifacts root: the plan (scan, decontaminate,
exact dedup, the blocks to compute, band hashes of the graph's documents; one unit per LSH band), the units
(`lsh-band-NNN`: every pair of a bucket of one band with a document of a source whose blocks are computed;
`verify-NNNNN`: the shingle counts of one chunk of pairs), the verification plan (merge the bands' pairs,
keep those of blocks to compute, build the shingle store, one unit per `near_dup.verify_chunk_pairs` pairs)
and the finish (write the computed blocks, read the reused ones, dedup's clusters over the graph, tables,
record).

`run_global_dedup` runs the same steps in one process (units through a pool of `workers`): one code path,
so the output bytes never depend on who ran the units, in what order or how many at once. It returns a
`DedupResult`; the asset's report (`dedup_report`) is computed here too, so the Dagster layer only shapes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.core import records
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import run_stage
from corpus_dagster.dedup.key import DEDUP, dedup_key
from corpus_dagster.dedup.result import DedupResult
from corpus_dagster.dedup.tables import REASONS
from corpus_dagster.dedup.units import DEDUP_UNITS, DedupStage
from corpus_dagster.lib.near_graph import GraphSpec

__all__ = ["DEDUP_UNITS", "DedupResult", "DedupStage", "run_global_dedup"]


def run_global_dedup(layout: Layout, settings: Settings, source_ids: list[str], log: Log | None = None) -> DedupResult:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    The plan, its units (through a pool of `workers` processes), the verification plan, its units and the
    finish, in this process: the same steps an executor spreads over processes or machines.
    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    return run_stage(DedupStage(tuple(sorted(source_ids))), layout, settings, log)


# --- Reading dedup outputs (the only way the scrub and publish stages see them) ---------------------------

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
        sources = list(record.stats["sources"])
        if settings is not None and dedup_key(layout, settings, sources)[0] == record.key:  # else: refused below
            run_global_dedup(layout, settings, sources)

    return {p.stem: p for p in records.record_files(folder, record, "tables", None if settings is None else rebuild)}


# --- What the dedup asset reports (the Dagster layer shapes it into metadata) -------------------------------

DEDUP_REASONS = sorted(REASONS.values())


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
    dedup = [f"dedup: {r}" for r in DEDUP_REASONS]
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
