"""The dedup stage's driver: the global dedup step and the readers of its outputs.

It writes `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean and
signature keys (the signatures are the minhash stage's, read through `corpus_dagster.minhash.outputs`),
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

Other stages read the dedup outputs through `dedup.outputs`, which imports this driver only to rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log, heartbeat, interval_of
from corpus_dagster.core.settings import Settings, as_settings
from corpus_dagster.core.units import run_units
from corpus_dagster.dedup.key import DEDUP, dedup_key
from corpus_dagster.dedup.units import finish_dedup, plan_dedup, plan_verify, run_dedup_unit


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
