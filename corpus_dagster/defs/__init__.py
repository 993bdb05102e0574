"""The thin Dagster layer: assets per stage, checks, partitions, resources, jobs, schedules and sensors.

Assets call stage drivers only. `build_definitions` is called when a code location loads (never at import),
so an invalid config is a load error naming the file and JSON path.
"""

import dagster as dg

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
from corpus_dagster.defs.dedup import dedup, minhash_signatures
from corpus_dagster.defs.ingest import raw_documents
from corpus_dagster.defs.publish import PUBLISH_CHECKS, shards_and_manifest
from corpus_dagster.defs.release import RELEASE_ASSETS, RELEASE_CHECKS
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.review import REVIEW_ASSETS
from corpus_dagster.defs.scrub import scrubbed
from corpus_dagster.defs.tokens import TOKEN_ASSETS, TOKEN_CHECKS

ASSETS = [raw_documents, clean_documents, minhash_signatures, dedup, scrubbed, shards_and_manifest, *TOKEN_ASSETS,
          *ANALYSIS_ASSETS, *RELEASE_ASSETS, *REVIEW_ASSETS]
CHECKS = [*PUBLISH_CHECKS, *TOKEN_CHECKS, *ANALYSIS_CHECKS, *RELEASE_CHECKS]


def build_definitions(corpus: CorpusConfig) -> dg.Definitions:
    """Every definition for one corpus config; the refresh cron and executor come from the loaded config."""
    from corpus_dagster.defs.runner import source_job

    resolved = corpus.resolved()  # raises ConfigError naming the file and JSON path of every violation
    refresh = resolved["refresh"]
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=CHECKS,
        jobs=[ingest_job, build_corpus_job, explain_document_job, source_job(int(resolved["workers"]))],
        schedules=[refresh_schedule_for(refresh["cron"], refresh["timezone"])],
        sensors=[ledger_sensor, automation_sensor],
        resources={"corpus": corpus},
        # One process per run: steps are light wrappers around drivers that parallelize inside (`workers`), and a
        # process per step (each of the checks included) made UI runs several times slower than the CLI.
        executor=dg.in_process_executor,
    )
