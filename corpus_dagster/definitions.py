"""The Definitions object that `dagster dev` (workspace.yaml) and the demo load."""

import dagster as dg

from corpus_dagster.defs.automation import automation_sensor, ingest_job, ledger_sensor, refresh_schedule
from corpus_dagster.defs.clean import clean_documents
from corpus_dagster.defs.dedup import dedup, minhash_signatures
from corpus_dagster.defs.ingest import raw_documents
from corpus_dagster.defs.publish import PUBLISH_CHECKS, shards_and_manifest
from corpus_dagster.defs.resources import default_corpus_config
from corpus_dagster.defs.scrub import scrubbed
from corpus_dagster.defs.tokens import TOKEN_ASSETS, TOKEN_CHECKS

ASSETS = [raw_documents, clean_documents, minhash_signatures, dedup, scrubbed, shards_and_manifest, *TOKEN_ASSETS]
CHECKS = [*PUBLISH_CHECKS, *TOKEN_CHECKS]

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[ingest_job],
    schedules=[refresh_schedule],
    sensors=[ledger_sensor, automation_sensor],
    resources={"corpus": default_corpus_config()},
    executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
)
