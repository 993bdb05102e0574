"""Ledger sensor (sources become partitions), refresh schedule, jobs, and the automation sensor for downstream."""

import hashlib
import json
import shutil

import dagster as dg

from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME, source_partitions
from corpus_dagster.defs.resources import CorpusConfig

GLOBAL_ASSETS = ["dedup", "scrubbed", "shards", "manifest", "token_streams", "corpus_analysis", "release"]

ingest_job = dg.define_asset_job(
    "ingest_sources",
    selection=dg.AssetSelection.assets("raw_documents"),
    description="Fetch one source partition into raw parts; downstream assets follow through automation.",
)
build_corpus_job = dg.define_asset_job(
    "build_corpus",
    selection=dg.AssetSelection.assets(*GLOBAL_ASSETS),
    description="The whole-corpus steps (dedup, scrub, shards, manifest, token streams, analysis, release) over every materialized source.",
)


def _row_digest(row: dict) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:16]


@dg.sensor(jobs=[ingest_job, build_corpus_job], minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def ledger_sensor(context: dg.SensorEvaluationContext, corpus: CorpusConfig) -> dg.SensorResult | dg.SkipReason:
    """Sync ledger rows into source partitions: add new ones (and fetch them), refetch a source whose row
    changed, and for a removed row delete its partition and its stage outputs and rebuild the corpus without it."""
    try:
        layout = corpus.layout()
        sources = load_ledger(layout.ledger)
    except CorpusError as exc:
        return dg.SkipReason(f"ledger invalid, nothing synced: {exc}")
    digests = {s.source_id: _row_digest(s.to_json()) for s in sources}
    known = json.loads(context.cursor) if context.cursor else {}
    existing = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    new = [sid for sid in digests if sid not in existing]
    removed = sorted(existing - set(digests))
    changed = [sid for sid in digests if sid in existing and known.get(sid) not in (None, digests[sid])]
    requests = []
    if new:
        requests.append(source_partitions.build_add_request(new))
    runs = [dg.RunRequest(job_name=ingest_job.name, partition_key=sid, run_key=f"{sid}:{digests[sid]}") for sid in new + changed]
    if removed:
        requests.append(source_partitions.build_delete_request(removed))
        for sid in removed:
            for folder in layout.source_outputs(sid):
                shutil.rmtree(folder, ignore_errors=True)
            context.log.info(f"source {sid!r} left the ledger: partition and stage outputs removed")
        runs.append(dg.RunRequest(job_name=build_corpus_job.name, run_key=f"removed:{','.join(removed)}:{_row_digest(digests)}"))
    if not requests and not runs and known == digests:
        return dg.SkipReason(f"ledger unchanged ({len(digests)} sources)")
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests, cursor=json.dumps(digests, sort_keys=True))


def refresh_schedule_for(cron: str, timezone: str) -> dg.ScheduleDefinition:
    """The refresh schedule on the cron of the loaded config (built when the definitions load, never at import)."""

    @dg.schedule(
        name="refresh_schedule", job=ingest_job, cron_schedule=cron, execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Refetch every source on the config's refresh cron; unchanged bytes rebuild nothing.",
    )
    def refresh_schedule(context: dg.ScheduleEvaluationContext):
        """Refetch every source; unchanged files are skipped by checksum, and downstream assets follow through
        their AutomationCondition."""
        keys = sorted(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
        if not keys:
            return dg.SkipReason("no source partitions yet; the ledger sensor adds them")
        stamp = context.scheduled_execution_time.strftime("%Y%m%dT%H%M")
        return [dg.RunRequest(partition_key=k, run_key=f"refresh:{k}:{stamp}") for k in keys]

    return refresh_schedule


automation_sensor = dg.AutomationConditionSensorDefinition(
    "corpus_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
    description="Materializes downstream assets when their upstream changed (eager automation conditions).",
)
