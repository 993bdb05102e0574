"""Ledger sensor (sources become partitions), refresh schedule, jobs, and the automation sensor for downstream."""

import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.ledger import Source, load_ledger, parse_ledger_lines
from corpus_dagster.defs.common import corpus_failure, table
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME, source_partitions
from corpus_dagster.defs.resources import CorpusConfig

GLOBAL_ASSETS = ["dedup", "scrubbed", "shards", "manifest", "token_streams", "corpus_analysis", "release", "review_sample"]

ingest_job = dg.define_asset_job(
    "ingest_sources",
    selection=dg.AssetSelection.assets("raw_documents"),
    description="Fetch one source partition into raw parts; downstream assets follow through automation.",
)  # no executor of its own: the code location's (in-process, or dask with executor.kind dask)
build_corpus_job = dg.define_asset_job(
    "build_corpus",
    selection=dg.AssetSelection.assets(*GLOBAL_ASSETS),
    description="The whole-corpus steps (dedup, scrub, shards, manifest, token streams, analysis, release) over every materialized source.",
)


def _row_digest(row: dict) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class LedgerRows:
    """The ledger read row by row: valid sources, problems (file, line, JSON path), ids named by bad rows."""

    sources: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    named_by_invalid: set[str] = field(default_factory=set)
    unnamed_invalid: int = 0


def read_ledger_rows(path: Path) -> LedgerRows:
    """Validate each line on its own, so one bad row blocks only itself (a missing file raises LedgerError)."""
    if not path.exists():
        load_ledger(path)  # raises the one error that says where the ledger was expected
    out = LedgerRows()
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            (source,) = parse_ledger_lines([line], str(path))
        except LedgerError as exc:
            out.problems.extend(re.sub(r"^line 1:", f"line {lineno}:", v) for v in exc.violations)
            sid = _raw_source_id(line)
            if sid is None:
                out.unnamed_invalid += 1
            else:
                out.named_by_invalid.add(sid)
            continue
        if source.source_id in first_line:
            out.problems.append(f"line {lineno}: $.source_id: duplicate source_id {source.source_id!r} "
                                f"(first on line {first_line[source.source_id]})")
            continue
        first_line[source.source_id] = lineno
        out.sources.append(source)
    return out


def _raw_source_id(line: str) -> str | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    sid = row.get("source_id") if isinstance(row, dict) else None
    return sid if isinstance(sid, str) else None


@dg.sensor(
    jobs=[ingest_job, build_corpus_job], minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps one source partition per ledger row: fetches new and changed rows, removes a deleted row's "
                "partition and outputs and rebuilds without it. An invalid row fails the tick (file, line, JSON path); "
                "valid rows keep syncing.",
)
def ledger_sensor(context: dg.SensorEvaluationContext, corpus: CorpusConfig) -> dg.SensorResult | dg.SkipReason:
    """Sync ledger rows into source partitions: add new ones (and fetch them), refetch a source whose row
    changed, and for a removed row delete its partition and its stage outputs and rebuild the corpus without it.

    Rows are validated one by one: valid rows are synced even when others are broken. A tick that has nothing
    valid to do but sees invalid rows fails with every problem (file, line, JSON path), so a broken ledger shows
    as a failed tick in the UI instead of a quiet skip; a tick that syncs valid rows logs the problems as errors
    and the next tick fails.
    """
    layout = corpus.layout()
    rows = read_ledger_rows(layout.ledger)
    digests = {s.source_id: _row_digest(s.to_json()) for s in rows.sources}
    known = json.loads(context.cursor) if context.cursor else {}
    existing = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    new = [sid for sid in digests if sid not in existing]
    removed = sorted(existing - set(digests) - rows.named_by_invalid)
    if removed and rows.unnamed_invalid:
        context.log.warning(f"not removing {', '.join(removed)}: {rows.unnamed_invalid} invalid row(s) name no source_id")
        removed = []
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
        forget_automation_history(context.instance)
        runs.append(dg.RunRequest(job_name=build_corpus_job.name, run_key=f"removed:{','.join(removed)}:{_row_digest(digests)}"))
    cursor = {**{k: v for k, v in known.items() if k in rows.named_by_invalid}, **digests}
    if rows.problems:
        error = LedgerError(str(layout.ledger), rows.problems)
        if not requests and not runs:
            raise error  # a failed tick, shown red in the UI with every problem; valid rows were synced earlier
        context.log.error(f"synced the valid rows; invalid rows left as they were: {error}")
    elif not requests and not runs and known == cursor:
        return dg.SkipReason(f"ledger unchanged ({len(digests)} sources)")
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests, cursor=json.dumps(cursor, sort_keys=True))


def forget_automation_history(instance: dg.DagsterInstance) -> None:
    """Drop the stored automation evaluations once a source partition is deleted.

    Stored evaluations keep the partition keys they evaluated; after a dynamic partition is deleted the UI's
    Automation tab fails on them (HTTP 500, "Partition range ... is not a valid range. Nonexistent partition
    keys", dagster-io/dagster#33910, open for Dagster 1.11-1.13). Until Dagster skips deleted keys, the history
    of evaluations is the price of a healthy tab; the automation cursor itself handles deleted keys.
    """
    storage = instance.schedule_storage
    if storage is not None:
        storage.purge_asset_evaluations(before=time.time() + 1)


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


class ExplainConfig(dg.Config):
    """Which document to explain: its id (`<source_id>:<k>`) or its url."""

    document: str


@dg.op(description="Print one document's journey (ingest, clean, dedup, scrub, shards, token streams) from stage outputs.")
def explain_document(context: dg.OpExecutionContext, config: ExplainConfig, corpus: CorpusConfig) -> dg.Output:
    from corpus_dagster.explain import explain, render

    with corpus_failure("explain"):
        resolved, layout = corpus.load()
        answer = explain(layout, resolved, config.document)
    context.log.info(render(answer))
    rows = [[name, step["status"], ", ".join(f"{k}={v}" for k, v in step.items() if k != "status")]
            for name, step in answer["steps"].items()]
    return dg.Output(None, metadata={"document": answer["id"], "journey": table(["stage", "status", "details"], rows)})


@dg.job(
    description="Explain this document: run with config `ops: {explain_document: {config: {document: <id or url>}}}`; "
                "reads stage outputs only, nothing reruns. Same as `python -m corpus_dagster.explain <id or url>`.",
    executor_def=dg.in_process_executor,
)
def explain_document_job():
    explain_document()
