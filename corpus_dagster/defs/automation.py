"""Ledger sensor (sources become partitions), refresh schedule, jobs, and the automation sensor for downstream."""

import hashlib
import json

import dagster as dg

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.reconcile import read_ledger_rows
from corpus_dagster.defs.common import corpus_failure, table
from corpus_dagster.defs.instance import forget_automation_history, forget_source_runs
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME, source_partitions
from corpus_dagster.defs.resources import CORPUS_JOB, CorpusConfig

GLOBAL_ASSETS = ["dedup", "scrubbed", "shards", "manifest", "token_streams", "corpus_analysis", "release", "review_sample"]

ingest_job = dg.define_asset_job(
    "ingest_sources",
    selection=dg.AssetSelection.assets("raw_documents"),
    description="Fetch one source partition into raw parts; downstream assets follow through automation.",
)  # no executor of its own: the code location's (in-process, or dask with executor.kind dask)
build_corpus_job = dg.define_asset_job(
    CORPUS_JOB,
    selection=dg.AssetSelection.assets(*GLOBAL_ASSETS),
    description="The whole-corpus steps (dedup, scrub, shards, manifest, token streams, analysis, release) over every materialized source.",
)


def _row_digest(row: dict) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:16]


@dg.sensor(
    jobs=[ingest_job, build_corpus_job], minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps one source partition per ledger row: fetches new and changed rows, removes a deleted row's "
                "partition and rebuilds without it (its data is deleted once that corpus is published). An invalid row fails the tick (file, line, JSON path); "
                "valid rows keep syncing.",
)
def ledger_sensor(context: dg.SensorEvaluationContext, corpus: CorpusConfig) -> dg.SensorResult | dg.SkipReason:
    """Sync ledger rows into source partitions: add new ones (and fetch them), refetch a source whose row
    changed, and for a removed row delete its partition and rebuild the corpus without it; the publish step
    deletes the removed source's raw parts and stage outputs once the corpus without it is published.

    Rows are validated one by one: valid rows are synced even when others are broken. A tick that has nothing
    valid to do but sees invalid rows fails with every problem (file, line, JSON path), so a broken ledger shows
    as a failed tick in the UI instead of a quiet skip; a tick that syncs valid rows logs the problems as errors
    and the next tick fails.
    """
    layout = corpus.ledger_layout()
    rows = read_ledger_rows(layout.ledger)
    digests = {s.source_id: _row_digest(s.to_json()) for s in rows.sources}
    known = json.loads(context.cursor) if context.cursor else {}
    existing = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    plan = rows.plan(existing)
    if plan.held_back:
        context.log.warning(f"not removing {', '.join(plan.held_back)}: {rows.unnamed_invalid} invalid row(s) name no source_id")
    changed = [sid for sid in digests if sid in existing and known.get(sid) not in (None, digests[sid])]
    requests = []
    if plan.add:
        requests.append(source_partitions.build_add_request(plan.add))
    runs = [dg.RunRequest(job_name=ingest_job.name, partition_key=sid, run_key=f"{sid}:{digests[sid]}")
            for sid in plan.add + changed]
    if plan.remove:
        requests.append(source_partitions.build_delete_request(plan.remove))
        for sid in plan.remove:
            context.log.info(f"source {sid!r} left the ledger: partition removed; its data is deleted once the "
                             f"corpus is published without it")
        forget_automation_history(context.instance)
        forget_source_runs(context.instance, plan.remove)
        runs.append(dg.RunRequest(job_name=build_corpus_job.name,
                                  run_key=f"removed:{','.join(plan.remove)}:{_row_digest(digests)}"))
    cursor = {**{k: v for k, v in known.items() if k in rows.named_by_invalid}, **digests}
    if rows.problems:
        error = LedgerError(str(layout.ledger), rows.problems)
        if not requests and not runs:
            raise error  # a failed tick, shown red in the UI with every problem; valid rows were synced earlier
        context.log.error(f"synced the valid rows; invalid rows left as they were: {error}")
    elif not requests and not runs and known == cursor:
        return dg.SkipReason(f"ledger unchanged ({len(digests)} sources)")
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests, cursor=json.dumps(cursor, sort_keys=True))


def refresh_schedule_for(cron: str, timezone: str) -> dg.ScheduleDefinition:
    """The refresh schedule on the cron of the loaded config (built when the definitions load, never at import)."""

    @dg.schedule(
        name="refresh_schedule", job=ingest_job, cron_schedule=cron, execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Refetch every source on the config's refresh cron; unchanged bytes rebuild nothing.",
    )
    def refresh_schedule(context: dg.ScheduleEvaluationContext, corpus: CorpusConfig):
        """Refetch every source; unchanged files are skipped by checksum, and downstream assets follow through
        their AutomationCondition."""
        partitions = context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)
        keys = sorted(set(partitions) & set(read_ledger_rows(corpus.ledger_layout().ledger).ids))  # a removed row: no refetch
        if not keys:
            return dg.SkipReason("no source partitions in the ledger yet; the ledger sensor adds them")
        stamp = context.scheduled_execution_time.strftime("%Y%m%dT%H%M")
        return [dg.RunRequest(partition_key=k, run_key=f"refresh:{k}:{stamp}") for k in keys]

    return refresh_schedule


automation_sensor = dg.AutomationConditionSensorDefinition(
    "corpus_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
    description="Materializes downstream assets when their upstream changed (eager automation conditions).",
)


class ExplainConfig(dg.Config):
    """Which document to explain: its id (`<source_id>:<k>`) or its url; empty = the first published document,
    so the job launches from the Launchpad without any typing."""

    document: str = ""


@dg.op(description="Print one document's journey (ingest, clean, dedup, scrub, shards, token streams) from stage "
                   "outputs, up to the stage where it left the pipeline.")
def explain_document(context: dg.OpExecutionContext, config: ExplainConfig, corpus: CorpusConfig) -> dg.Output:
    from corpus_dagster.explain.journey import explain, first_published_id, render

    with corpus_failure("explain"):
        settings, layout = corpus.load()
        answer = explain(layout, settings, config.document or first_published_id(layout))
    context.log.info(render(answer))
    rows = [[name, step["status"], step["summary"]] for name, step in answer["steps"].items()]
    rows += [[name, "not reached" if answer["left_at"] else "not read", ""] for name in answer["not_reached"]]
    return dg.Output(None, metadata={"document": answer["id"], "left_at": answer["left_at"] or "",
                                     "journey": table(["stage", "status", "details"], rows)})


@dg.job(
    description="Explain this document: launch as is to explain the first published document, or set "
                "`ops: {explain_document: {config: {document: <id or url>}}}` (a link from corpus_dagster.defs.explain_link "
                "opens this Launchpad with it filled in); "
                "reads stage outputs only, nothing reruns. Same as `python -m corpus_dagster.explain <id or url>`.",
    executor_def=dg.in_process_executor,
)
def explain_document_job():
    explain_document()
