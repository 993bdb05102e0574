"""Every asset, check and job of the graph in one place, and `build_definitions` over them.

Imported on first use of `corpus_dagster.defs.ASSETS` (and its siblings): importing it imports every stage.
"""

from __future__ import annotations

import dagster as dg

from corpus_dagster.core.settings import Settings
from corpus_dagster.defs.analysis import ANALYSIS_ASSETS, ANALYSIS_CHECKS
from corpus_dagster.defs.automation import (
    automation_sensor,
    build_corpus_job,
    explain_document_job,
    ingest_job,
    ledger_sensor,
    refresh_schedule_for,
)
from corpus_dagster.defs.clean import clean_documents
from corpus_dagster.defs.dedup import dedup, dedup_asset
from corpus_dagster.defs.ingest import raw_documents
from corpus_dagster.defs.minhash import minhash_signatures
from corpus_dagster.defs.publish import PUBLISH_CHECKS, shards_and_manifest, shards_asset
from corpus_dagster.defs.release import RELEASE_ASSETS, RELEASE_CHECKS
from corpus_dagster.defs.resources import SOURCE_JOB, CorpusConfig
from corpus_dagster.defs.review import REVIEW_ASSETS
from corpus_dagster.defs.scrub import scrubbed
from corpus_dagster.defs.store_io import step_value_io_manager
from corpus_dagster.defs.tokenize import TOKEN_ASSETS, TOKEN_CHECKS, token_streams_asset
from corpus_dagster.defs.units import fan_out_of

ASSETS = [raw_documents, clean_documents, minhash_signatures, dedup, scrubbed, shards_and_manifest, *TOKEN_ASSETS,
          *ANALYSIS_ASSETS, *RELEASE_ASSETS, *REVIEW_ASSETS]
CHECKS = [*PUBLISH_CHECKS, *TOKEN_CHECKS, *ANALYSIS_CHECKS, *RELEASE_CHECKS]


def assets_for(fan_out: int) -> list[dg.AssetsDefinition]:
    """Every asset, the global fan-outs (dedup, shards, token streams) spread over `fan_out` steps each."""
    if fan_out == 1:
        return ASSETS
    graphs = {"dedup": dedup_asset(fan_out), "shards_and_manifest": shards_asset(fan_out),
              "token_streams": token_streams_asset(fan_out)}
    return [graphs.get(a.node_def.name, a) for a in ASSETS]


def executor_for(settings: Settings) -> dg.ExecutorDefinition:
    """The executor of every job but `build_source` on the local kind: in-process, or the dask cluster."""
    return dask_executor_for(settings) if settings.executor.kind == "dask" else dg.in_process_executor


def build_definitions(corpus: CorpusConfig) -> dg.Definitions:
    """Every definition for one corpus config; the refresh cron and executor come from the loaded config."""
    settings = corpus.settings()  # raises ConfigError naming the file and JSON path of every violation
    refresh = settings.refresh
    return dg.Definitions(
        assets=assets_for(fan_out_of(settings)),
        asset_checks=CHECKS,
        jobs=[ingest_job, build_corpus_job, explain_document_job, source_job(settings)],
        schedules=[refresh_schedule_for(refresh.cron, refresh.timezone)],
        sensors=[ledger_sensor, automation_sensor],
        # the IO manager has no config of its own: it reads the store and its credentials from `corpus` at run time
        resources={"corpus": corpus, "io_manager": step_value_io_manager},
        # Local kind: one process per run; steps are light wrappers around drivers that parallelize inside
        # (`workers`), and a process per step (each of the checks included) made UI runs several times slower.
        executor=executor_for(settings),
    )


def per_source_assets() -> list[dg.AssetsDefinition]:
    """Assets partitioned by source, in graph order."""
    return [a for a in ASSETS if a.partitions_def is not None]


def dask_executor_for(settings: Settings) -> dg.ExecutorDefinition:
    """Dagster's dask executor on the configured scheduler, else a LocalCluster of `workers` processes."""
    try:
        from corpus_dagster.defs.dask_executor import corpus_dask_executor as dask_executor
    except ImportError as exc:  # the optional extra
        from corpus_dagster.core.errors import ConfigError

        raise ConfigError("executor.kind is dask but dagster-dask is not installed: "
                          "pip install 'corpus-dagster[dask]' (dagster-dask, distributed)") from exc
    address = settings.executor.dask_address
    cluster = ({"existing": {"address": address}} if address else
               {"local": {"n_workers": max(1, settings.workers), "threads_per_worker": 1, "processes": True,
                          "dashboard_address": None}})
    return dask_executor.configured({"cluster": cluster}, name="dask")


def source_job(settings: Settings) -> dg.UnresolvedAssetJobDefinition:
    """Every per-source asset of one source partition (fetch, clean, sign) and their checks.

    Local kind: the steps run in the run's own process, one after another (they are a chain anyway, and
    each parallelizes inside through `workers`). A process per step cost about 0.5 s of wall each, most of
    a small source's run. Dask kind: the steps go to the cluster like every other run's.
    """
    executor = dask_executor_for(settings) if settings.executor.kind == "dask" else dg.in_process_executor
    return dg.define_asset_job(
        SOURCE_JOB,
        selection=dg.AssetSelection.assets(*[k for a in per_source_assets() for k in a.keys]),
        description="Fetch, clean and sign one source partition (raw_documents, clean_documents, minhash_signatures); "
                    "the CLI runs one per source, `workers` at a time.",
        executor_def=executor,
    )
