"""Ledger sensor (sources become partitions), refresh schedule, and the automation sensor for downstream."""


import hashlib
import json

import dagster as dg

from corpus_dagster.config import load_config
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME, source_partitions
from corpus_dagster.defs.resources import CorpusConfig, default_corpus_config
from corpus_dagster.errors import CorpusError
from corpus_dagster.ledger import load_ledger

ingest_job = dg.define_asset_job(
    "ingest_sources", selection=dg.AssetSelection.assets("raw_documents")
)


def _row_digest(row: dict) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:16]


@dg.sensor(job=ingest_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def ledger_sensor(context: dg.SensorEvaluationContext, corpus: CorpusConfig) -> dg.SensorResult | dg.SkipReason:
    """Sync ledger rows into source partitions: add new ones (and fetch them), drop removed ones,
    refetch a source whose ledger row changed. Never touches other sources."""
    try:
        sources = load_ledger(corpus.layout().ledger)
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
    if removed:
        requests.append(source_partitions.build_delete_request(removed))
    runs = [dg.RunRequest(partition_key=sid, run_key=f"{sid}:{digests[sid]}") for sid in new + changed]
    if not requests and not runs and known == digests:
        return dg.SkipReason(f"ledger unchanged ({len(digests)} sources)")
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests, cursor=json.dumps(digests, sort_keys=True))


def _refresh_settings() -> tuple[str, str]:
    try:
        resolved = load_config(default_corpus_config().config_path)
    except CorpusError:
        resolved = load_config(None)
    return resolved["refresh"]["cron"], resolved["refresh"]["timezone"]


_CRON, _TZ = _refresh_settings()


@dg.schedule(
    job=ingest_job, cron_schedule=_CRON, execution_timezone=_TZ, default_status=dg.DefaultScheduleStatus.RUNNING
)
def refresh_schedule(context: dg.ScheduleEvaluationContext):
    """Refetch every source on the config's cron; unchanged files are skipped by checksum, and downstream
    assets follow through their AutomationCondition."""
    keys = sorted(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    if not keys:
        return dg.SkipReason("no source partitions yet; the ledger sensor adds them")
    stamp = context.scheduled_execution_time.strftime("%Y%m%dT%H%M")
    return [dg.RunRequest(partition_key=k, run_key=f"refresh:{k}:{stamp}") for k in keys]


automation_sensor = dg.AutomationConditionSensorDefinition(
    "corpus_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING
)
