"""The dedup stage's driver: the global dedup step and the readers of its outputs.

It writes `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean and
signature keys (the signatures are the minhash stage's, read through `corpus_dagster.minhash.driver`),
the protected sets' content hashes and the `dedup` and `near_dup` settings (`dedup.key`), and the
near-duplicate graph's blocks under `stages/dedup/_graph-blocks/` (`dedup.blocks`: one per pair of sources,
reused by the next build while both sources are unchanged). The record also names the sources it covered:
the scrub and publish stages build exactly that source set.

The global dedup is split into units any executor can run on any process or machine that mounts the
artifacts root (`dedup.units`): `plan_dedup` (scan, decontaminate, exact dedup, the blocks to compute,
band hashes of the graph's documents; one unit per LSH band), `run_dedup_unit` (`lsh-band-NNN`: every pair
of a bucket of one band with a document of a source whose blocks are computed; `verify-NNNNN`: the shingle
counts of one chunk of pairs), `plan_verify` (merge the bands' pairs, keep those of blocks to compute, build
the shingle store, one unit per `near_dup.verify_chunk_pairs` pairs) and `finish_dedup` (write the computed
blocks, read the reused ones, dedup's clusters over the graph, tables, record).

`run_global_dedup` runs the same steps in one process (units through a pool of `workers`): one code path,
so the output bytes never depend on who ran the units, in what order or how many at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.core import records
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings, as_settings
from corpus_dagster.core.units import run_units
from corpus_dagster.dedup.key import DEDUP, dedup_key
from corpus_dagster.dedup.units import finish_dedup, plan_dedup, plan_verify, run_dedup_unit
from corpus_dagster.lib.near_graph import GraphSpec


@records.locked(lambda a: "dedup")
def run_global_dedup(
    layout: Layout, resolved: Settings | Mapping[str, Any], source_ids: list[str], log: Log | None = None
) -> dict[str, Any]:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    The plan, its units (through a pool of `workers` processes), the verification plan, its units and the
    finish, in this process: the same steps an executor spreads over processes or machines.
    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    settings = as_settings(resolved)
    source_ids = sorted(source_ids)
    key, _ = dedup_key(layout, settings, source_ids)
    done = records.cached(layout.stage(DEDUP), key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    n_docs = sum(clean_record(layout, sid).stats.get("kept", 0) for sid in source_ids)
    workers = settings.workers
    with heartbeat(log, "dedup", interval_of(settings.resolved), f"{n_docs:,} documents"):
        plan = plan_dedup(layout, settings, source_ids, log)
        if plan.cached is not None:
            return plan.cached
        run_units(run_dedup_unit, (layout, settings, plan.key), plan.units, workers)
        verify = plan_verify(layout, settings, plan.key, log)
        run_units(run_dedup_unit, (layout, settings, plan.key), verify.units, workers)
        return finish_dedup(layout, settings, plan.key, log)


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
        sources = list(record.stats["sources"])
        if resolved is not None and dedup_key(layout, resolved, sources)[0] == record.key:  # else: refused below
            run_global_dedup(layout, resolved, sources)

    return {p.stem: p for p in records.record_files(folder, record, "tables", None if resolved is None else rebuild)}
