"""Follow the runs of one CLI session in the Dagster instance: one console line per finished step, every event
(with tracebacks) in the log file, and the failures and check results the exit code is decided from.

It reads the instance's event log, the same record the UI shows, so it needs no print-scraping and works for
runs executing in other processes.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import dagster as dg
from dagster._core.events import DagsterEventType

from corpus_dagster.defs.instance import SESSION_TAG

__all__ = ["SESSION_TAG", "RunWatcher"]
# Counts worth a glance, in the order shown; the rest of the metadata is in the UI.
COUNT_KEYS = {
    "documents": "documents", "n_docs": "documents", "quarantined": "quarantined", "kept": "kept",
    "rejected": "rejected", "signatures": "signatures", "exact_dropped": "exact dups dropped",
    "near_dropped": "near dups dropped", "decontaminated": "decontaminated", "redactions": "PII redactions",
    "clean_documents_measured": "clean documents measured (before dedup)",
    "with_exact_duplicates": "with exact duplicates", "with_near_duplicates": "with near duplicates",
    "n_shards": "shards", "n_tokens": "tokens", "tokens": "tokens", "segments": "segments",
}
MAX_COUNTS = 4
MAX_REASONS = 3  # reject reasons named on a clean line
# Dagster's log line for a step it leaves out because an upstream step failed or was not executed
NOT_EXECUTING = re.compile(r"Dependencies for step \S+ .*Not executing\.$")
BAD_INPUT_ERRORS = ("ConfigError", "LedgerError")  # CorpusError classes that mean the input files are wrong
LEVELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING", logging.ERROR: "ERROR",
          logging.CRITICAL: "CRITICAL"}


@dataclass(frozen=True)
class StepFailure:
    """One failure a person can act on: where (source or corpus), which step, and the one-line message."""

    where: str
    step: str
    message: str
    kind: str  # "source": a per-source run; "step": a corpus-wide asset; "check": an asset check
    error_class: str = ""

    @property
    def said_by_check(self) -> bool:
        """A blocking check's failure: the check's own evaluation says what is wrong."""
        return self.error_class == "DagsterAssetCheckFailedError"

    @property
    def bad_input(self) -> bool:
        """A config or ledger error inside a step: the CLI exits 2 for it, as when it finds one before any run."""
        return self.error_class in BAD_INPUT_ERRORS


@dataclass(frozen=True)
class CheckOutcome:
    asset: str
    name: str
    passed: bool
    detail: str


def one_line(text: str | None) -> str:
    """Multi-line messages (lists of violations) joined on one line."""
    parts = [p.strip().removeprefix("- ") for p in (text or "").splitlines() if p.strip()]
    return "; ".join(parts).replace(":;", ":")


def top_reasons(metadata: dict[str, Any], n: int = MAX_REASONS) -> str:
    """The n largest reject reasons of a clean materialization's `counts` table (`dropped: <reason>` rows),
    e.g. `gopher_alpha_words 277, repetition_dup_5gram 9`, with `+k more` when it has more."""
    records = getattr(metadata.get("counts"), "records", None) or []
    dropped = []
    for record in records:
        data = getattr(record, "data", {})
        outcome, docs = data.get("outcome"), data.get("documents")
        if isinstance(outcome, str) and outcome.startswith("dropped: ") and isinstance(docs, int) and docs > 0:
            dropped.append((outcome.removeprefix("dropped: "), docs))
    dropped.sort(key=lambda r: (-r[1], r[0]))
    shown = ", ".join(f"{reason} {docs:,}" for reason, docs in dropped[:n])
    return shown + (f", +{len(dropped) - n} more" if len(dropped) > n else "")


def counts_summary(metadata: dict[str, Any]) -> str:
    """A few counts of a materialization, e.g. `40 documents, 0 quarantined` or `40 kept, 288 rejected:
    gopher_alpha_words 277, ...`; `(cached)` when nothing recomputed."""
    shown = []
    for key, label in COUNT_KEYS.items():
        value = getattr(metadata.get(key), "value", metadata.get(key))
        if isinstance(value, int | float) and not isinstance(value, bool) and not any(s.endswith(label) for s in shown):
            reasons = top_reasons(metadata) if key == "rejected" and value else ""
            shown.append(f"{value:,} {label}" + (f": {reasons}" if reasons else ""))
        if len(shown) == MAX_COUNTS:
            break
    if not shown:
        rows = getattr(metadata.get("dagster/row_count"), "value", None)
        if isinstance(rows, int):
            shown.append(f"{rows:,} rows")
    cached = getattr(metadata.get("cached"), "value", metadata.get("cached"))
    return ", ".join(shown) + (" (cached)" if cached is True else "")


def failure_message(data: Any) -> tuple[str, str]:
    """(one-line message, error class) of a step or run failure: the CorpusError text a Failure carries, with
    the CorpusError's class from the Failure's `error` metadata (corpus_failure sets it), else the exception's
    class and first line (a bug: the traceback is in the log file)."""
    user = getattr(data, "user_failure_data", None)
    if user is not None and user.description:
        error_class = (user.metadata or {}).get("error")
        error_class = getattr(error_class, "value", error_class)
        return one_line(user.description), str(error_class) if isinstance(error_class, str) and error_class else "Failure"
    error = getattr(data, "error", None)
    if error is None:
        return "failed (see the log file)", ""
    while error.cls_name in ("DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError") and error.cause:
        error = error.cause
    first = one_line(error.message).removeprefix(f"{error.cls_name}: ")
    return f"{error.cls_name}: {first}", error.cls_name


@dataclass
class _RunState:
    label: str
    cursor: str | None = None
    materializations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    checks: dict[str, list[CheckOutcome]] = field(default_factory=dict)
    failed_steps: set[str] = field(default_factory=set)
    last_info: dict[str, str] = field(default_factory=dict)
    graph_seconds: dict[str, float] = field(default_factory=dict)
    polls_since_finished: int = 0  # its event log is read once more after the run finished, then no more
    not_run: set[str] = field(default_factory=set)  # steps skipped or abandoned after a failure


class RunWatcher:
    """Polls the event log of every run tagged with this session; `poll()` is cheap enough for twice a second."""

    def __init__(self, instance: dg.DagsterInstance, session: str, log: TextIO, out: TextIO = sys.stdout,
                 prefix: str = "run", check_steps: set[str] | None = None):
        self.instance = instance
        self.session = session
        self.log = log
        self.out = out
        self.prefix = prefix
        self.check_steps = check_steps or set()
        self.runs: dict[str, _RunState] = {}
        self.failures: list[StepFailure] = []
        self.checks: list[CheckOutcome] = []
        self.steps_done = 0
        self._status_shown = False
        self._tty = bool(getattr(out, "isatty", lambda: False)())
        self.console = True  # off: events still go to the log file, nothing more to the console

    def drain_to_log(self) -> None:
        """Read the events the runs recorded since the last poll into the log file only (after a stop: the
        console gets its one line, the log the steps' interruption and the runs' cancellation)."""
        self.console = False
        self.poll()

    @property
    def ran_global(self) -> bool:
        """Whether a corpus-wide run was part of this session."""
        return any(state.label == "corpus" for state in self.runs.values())

    # -- reading -------------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Read the new events of every run of this session that is going or has just finished.

        A finished run is read on two polls, then left: reading every run of a 1,000-source session twice
        a second would cost more than the runs (each run's events are a SQLite file of their own)."""
        for run in self.instance.get_runs(filters=dg.RunsFilter(tags={SESSION_TAG: self.session})):
            state = self.runs.get(run.run_id)
            if state is None:
                partition = run.tags.get("dagster/partition")
                state = self.runs[run.run_id] = _RunState(label=partition or "corpus")
            if run.is_finished:
                if state.polls_since_finished >= 2:
                    continue
                state.polls_since_finished += 1
            while True:
                conn = self.instance.get_records_for_run(run.run_id, cursor=state.cursor, limit=500)
                for record in conn.records:
                    self._handle(run, state, record.event_log_entry)
                state.cursor = conn.cursor
                if not conn.has_more:
                    break
        self.log.flush()
        self._show_status()

    def _handle(self, run: dg.DagsterRun, state: _RunState, entry: Any) -> None:
        self._write_log(run, state, entry)
        event = entry.dagster_event
        step = entry.step_key or ""
        if event is None:
            if step and NOT_EXECUTING.match(one_line(entry.user_message)):
                state.not_run.add(step)  # Dagster's line per step left out after a failure: one count, at the end
                return
            if entry.level >= logging.INFO and step:
                state.last_info[step] = one_line(entry.user_message)
            if entry.level >= logging.WARNING and step:
                # what a stage warns of (a damaged cached output it rebuilds, sources left out) is worth a line
                self._line(f"{state.label:<16} {step:<50} warning: {one_line(entry.user_message)}")
            return
        kind = event.event_type
        if kind == DagsterEventType.ASSET_MATERIALIZATION:
            mat = event.event_specific_data.materialization
            state.materializations.setdefault(step, []).append(dict(mat.metadata))
        elif kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            ev = event.event_specific_data
            detail = self._check_detail(ev.metadata) if not ev.passed else ""
            outcome = CheckOutcome(ev.asset_key.to_user_string(), ev.check_name, ev.passed, detail)
            state.checks.setdefault(step, []).append(outcome)
            self.checks.append(outcome)
        elif kind == DagsterEventType.STEP_SUCCESS:
            self._step_line(state, step, event.event_specific_data.duration_ms / 1000)
        elif kind == DagsterEventType.STEP_FAILURE:
            message, cls = failure_message(event.event_specific_data)
            is_check = step in self.check_steps or cls == "DagsterAssetCheckFailedError"
            where = f"source {state.label}" if state.label != "corpus" else "corpus"
            what = "check" if is_check else ("source" if state.label != "corpus" else "step")
            state.failed_steps.add(step)
            self.failures.append(StepFailure(where, step, message, what, cls))
            self._line(f"{state.label:<16} {step:<50} FAILED: {message}")
        elif kind == DagsterEventType.STEP_SKIPPED:
            state.not_run.add(step)
        elif kind == DagsterEventType.RUN_FAILURE and not state.failed_steps:
            message, cls = failure_message(event.event_specific_data)
            where = f"source {state.label}" if state.label != "corpus" else "corpus"
            self.failures.append(StepFailure(where, run.job_name, message, "source" if state.label != "corpus" else "step",
                                             cls))
            self._line(f"{state.label:<16} {run.job_name:<50} FAILED: {message}")
        if kind in (DagsterEventType.RUN_FAILURE, DagsterEventType.RUN_SUCCESS) and state.not_run:
            n = len(state.not_run)
            self._line(f"{state.label:<16} {n} step{'s' if n != 1 else ''} not run (an upstream step failed; "
                       f"names in the log file)")
            state.not_run.clear()

    @staticmethod
    def _check_detail(metadata: dict[str, Any]) -> str:
        first = getattr(metadata.get("first_problem"), "value", None)  # the details are escaped markdown
        problems = getattr(metadata.get("problems"), "value", None)
        first = one_line(str(first)) if first else ""
        lead = f"{problems} problem(s)" if problems is not None else "failed"
        return f"{lead}: {first}" if first else lead

    # -- writing -------------------------------------------------------------------------------------------
    def _step_line(self, state: _RunState, step: str, seconds: float) -> None:
        self.steps_done += 1
        checks = state.checks.get(step)
        if checks:
            for c in checks:
                verdict = "passed" if c.passed else f"FAILED: {c.detail}"
                self._line(f"{state.label:<16} {'check ' + c.asset + '/' + c.name:<50} {seconds:>6.1f} s  {verdict}")
            return
        mats = state.materializations.get(step, [])
        graph, _, op = step.partition(".")
        if op:  # a step of a graph-backed asset (plan, unit groups, finish): one line for the asset, at its end
            state.graph_seconds[graph] = state.graph_seconds.get(graph, 0.0) + seconds
            if not mats:
                return
            step, seconds = graph, state.graph_seconds.pop(graph)
        summary = counts_summary(mats[0]) if mats else ""
        self._line(f"{state.label:<16} {step:<50} {seconds:>6.1f} s  {summary}")

    def _line(self, text: str) -> None:
        if not self.console:
            return
        self._clear_status()
        print(f"{self.prefix}: {text}".rstrip(), file=self.out, flush=True)

    def _show_status(self) -> None:
        """On a terminal only: one transient line with the latest progress message of the steps running now."""
        if not self._tty or not self.console:
            return
        latest = [msg for state in self.runs.values() for step, msg in state.last_info.items()
                  if step not in state.failed_steps and step not in state.materializations and step not in state.checks]
        self._clear_status()
        if latest:
            self.out.write(f"\r{self.prefix}: ... {latest[-1][:100]}")
            self.out.flush()
            self._status_shown = True

    def _clear_status(self) -> None:
        if self._status_shown:
            self.out.write("\r\033[K")
            self._status_shown = False

    def _write_log(self, run: dg.DagsterRun, state: _RunState, entry: Any) -> None:
        stamp = dt.datetime.fromtimestamp(entry.timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
        level = LEVELS.get(entry.level, str(entry.level))
        event = entry.dagster_event
        kind = event.event_type_value if event else "LOG"
        where = f"{run.job_name}[{state.label}]" if state.label != "corpus" else run.job_name
        if hasattr(self.log, "step"):  # a guarded log names the step it was writing when the disk refused
            self.log.step = f"{where} {entry.step_key}" if entry.step_key else where
        self.log.write(f"{stamp} {level:<7} {where} {entry.step_key or '-'} {kind}: {entry.user_message}\n")
        error = entry.error_info or (getattr(event.event_specific_data, "error", None) if event else None)
        if error is not None:
            self.log.write("    " + error.to_string().rstrip().replace("\n", "\n    ") + "\n")
