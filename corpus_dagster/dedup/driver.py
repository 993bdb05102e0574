"""The dedup stage's driver: the global dedup step (its outputs are read through `dedup.outputs`).

It writes `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean and
signature keys (the signatures are the minhash stage's, read through `corpus_dagster.minhash.outputs`),
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
`DedupResult`; the report of the asset (`dedup.outputs.dedup_report`) is read from the outputs, so the Dagster
layer only shapes it. Other stages read the dedup outputs through `dedup.outputs`, which imports this driver
only to rebuild.
"""

from __future__ import annotations

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import run_stage
from corpus_dagster.dedup.result import DedupResult
from corpus_dagster.dedup.units import DEDUP_UNITS, DedupStage

__all__ = ["DEDUP_UNITS", "DedupResult", "DedupStage", "run_global_dedup"]


def run_global_dedup(layout: Layout, settings: Settings, source_ids: list[str], log: Log | None = None) -> DedupResult:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    The plan, its units (through a pool of `workers` processes), the verification plan, its units and the
    finish, in this process: the same steps an executor spreads over processes or machines.
    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    return run_stage(DedupStage(tuple(sorted(source_ids))), layout, settings, log)
