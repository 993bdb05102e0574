"""Every asset, check and job of the graph in one place, and `build_definitions` over them.

Imported on first use of `corpus_dagster.defs.ASSETS` (and its siblings): importing it imports every stage.
"""

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
from corpus_dagster.defs.resources import CorpusConfig
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
    from corpus_dagster.defs.runner import dask_executor_for

    return dask_executor_for(settings) if settings.executor.kind == "dask" else dg.in_process_executor


def build_definitions(corpus: CorpusConfig) -> dg.Definitions:
    """Every definition for one corpus config; the refresh cron and executor come from the loaded config."""
    from corpus_dagster.defs.runner import source_job

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
