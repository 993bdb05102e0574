"""`python -m corpus_dagster.run CONFIG [--keep-going] [--log-file PATH]`: build the corpus through Dagster.

One `build_source` run per ledger source (`workers` at a time, each run's steps in its process), then
one `build_corpus` run over the sources that are materialized, against the instance in DAGSTER_HOME, so the
runs appear in the UI afterwards. The console shows one line per finished step; Dagster's event stream and
every traceback go to the log file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from corpus_dagster.cli.run_log import GuardedLog, disk_full_message
from corpus_dagster.core.interrupts import (
    Interrupted,
    ignore_stop_signals,
    on_repeated_signal,
    signals_raise_interrupted,
)

if TYPE_CHECKING:  # the settings module is imported when a run starts, not when the CLI parses arguments
    from corpus_dagster.core.settings import Settings

CHECKOUT = Path(__file__).resolve().parents[2]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_SOURCE_FAILED = 3
EXIT_CHECK_FAILED = 4
EXIT_SIGINT = 128 + signal.SIGINT  # 130, the shell's code for a process ended by Ctrl-C
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143
EXIT_CODES = f"""exit codes:
  {EXIT_OK}  every source and step succeeded and every check passed
  {EXIT_BAD_INPUT}  bad config or ledger (the message names the file, line and JSON path), bad usage, or a missing
     extra (an s3:// artifacts root needs `pip install 'corpus-dagster[deploy]'`)
  {EXIT_SOURCE_FAILED}  a source failed (or a corpus-wide step did), or the artifacts store did (unreachable, bucket
     missing, credentials refused, another writer's object): one line each says where and what to do
  {EXIT_CHECK_FAILED}  every step ran but an asset check failed
  {EXIT_INTERNAL}  an unexpected error (a bug): the traceback is in the log file
  {EXIT_SIGINT}  interrupted (Ctrl-C, SIGINT) / {EXIT_SIGTERM} terminated (SIGTERM): the runs going were stopped and
       marked canceled, finished steps are kept; rerun to resume (a second Ctrl-C stops at once)
"""


STORE_HINT = "rerun when the store is back: finished steps are kept"

HINTS = {
    "source": "fix the source or its ledger row and rerun; --keep-going builds the others meanwhile",
    "step": "fix what the message names and rerun; sources already built are not redone",
    "check": "a published output is wrong: see the check in the UI or the log file",
}


def default_dagster_home() -> Path:
    """`.dagster_home` of the checkout when running from one (make demo, make ui), else of the working folder."""
    base = CHECKOUT if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "corpus_dagster").is_dir() else Path.cwd()
    return base / ".dagster_home"


def default_workspace_file() -> Path:
    """The workspace.yaml `make ui` loads: the checkout's when running from one, else the working folder's (the
    runs take the origin of its code location, so the UI files them under it)."""
    base = CHECKOUT if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "corpus_dagster").is_dir() else Path.cwd()
    return base / "workspace.yaml"


def default_log_file(artifacts_root: Path) -> Path:
    """`logs/run-<UTC time>-<pid>.log` under the artifacts root (a log may carry a time; data outputs never do)."""
    # The pid too: two runs started in the same second must not append to one file.
    return artifacts_root / "logs" / f"run-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}.log"


def parse_args(argv: list[str], prog: str = "python -m corpus_dagster.run") -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog, description="Fetch, clean, deduplicate, scrub, publish and tokenize a corpus through Dagster.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", help="corpus config (YAML or JSON)")
    parser.add_argument("--keep-going", action="store_true",
                        help="process every source it can, build the corpus over the ones that succeeded, "
                             "and report every failure at the end (default: stop at the first failing source)")
    parser.add_argument("--log-file", type=Path, default=None,
                        help="where Dagster's event stream and tracebacks go (default: ARTIFACTS/logs/run-<time>.log)")
    return parser.parse_args(argv)


def _error(prefix: str, message: str) -> None:
    print(f"{prefix}: error: {message}", file=sys.stderr, flush=True)


def _load_config_saying_what_moved(config_path: str, prefix: str) -> Settings:
    """The config's settings; each key that moved (`core.deprecated`) is said once, on one `warning:` line."""
    import warnings

    from corpus_dagster.core.config import load_settings
    from corpus_dagster.core.deprecated import DeprecatedKeyWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecatedKeyWarning)
        settings = load_settings(config_path)
    for warning in caught:
        if issubclass(warning.category, DeprecatedKeyWarning):
            print(f"{prefix}: warning: {warning.message}", file=sys.stderr, flush=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return settings


@contextmanager
def _logging_to(log: TextIO) -> Iterator[None]:
    """This process's Python logging and warnings go to the log file (never the console) while the run lasts."""
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.handlers[:], level = saved
        root.setLevel(level)


def run_pipeline(config_path: str, prefix: str = "run", keep_going: bool = False, log_file: Path | None = None) -> int:
    """Run everything for a config with a compact progress display; returns the exit code (see EXIT_CODES).

    SIGINT and SIGTERM stop it wherever it is: the runs going are stopped and marked canceled, one line says
    which, and the exit code is 128 + the signal's number."""
    with signals_raise_interrupted():
        try:
            return _run_pipeline(config_path, prefix, keep_going, log_file)
        except Interrupted as stop:
            ignore_stop_signals()  # handled: nothing may cut the one line short
            print(f"{prefix}: {interrupted_line(stop)}", file=sys.stderr, flush=True)
            return stop.exit_code


def interrupted_line(stop: Interrupted) -> str:
    """The one line a stop signal ends with: which runs were canceled, and that a rerun resumes."""
    runs = stop.canceled_runs
    what = (f"run {runs[0]} canceled" if len(runs) == 1 else f"runs {', '.join(runs)} canceled" if runs
            else "no run was going")
    return f"interrupted by {stop.signal_name}: {what}; finished steps are kept, rerun to resume"


def _run_pipeline(config_path: str, prefix: str, keep_going: bool, log_file: Path | None) -> int:
    from corpus_dagster.core.errors import ConfigError, LedgerError
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.storage import StorageError, StoreExtraMissing, StoreUnavailable

    start = time.monotonic()
    config_path = str(Path(config_path).resolve())
    try:
        settings = _load_config_saying_what_moved(config_path, prefix)
    except ConfigError as exc:
        _error(prefix, one_line_error(exc))
        return EXIT_BAD_INPUT
    layout = Layout.from_config(settings.resolved)
    log_path = (log_file or default_log_file(layout.root)).resolve()
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = GuardedLog(log_path)
    except OSError as exc:
        disk = disk_full_message(exc, os.environ.get("DAGSTER_HOME"))
        if disk is None:
            raise
        _error(prefix, f"log file: {disk}")
        return EXIT_SOURCE_FAILED
    print(f"{prefix}: log {log_path}", flush=True)
    try:
        with _logging_to(log):
            code = _run(config_path, settings, layout, prefix, keep_going, log, log_path, start)
    except Interrupted:
        log.write(traceback.format_exc())  # where the stop found the CLI, for the curious
        raise
    except (ConfigError, LedgerError) as exc:
        log.write(traceback.format_exc())
        _error(prefix, one_line_error(exc))
        code = EXIT_BAD_INPUT
    except StoreExtraMissing as exc:
        log.write(traceback.format_exc())
        _error(prefix, one_line_error(exc))
        code = EXIT_BAD_INPUT
    except StoreUnavailable as exc:  # before any run: the first sync
        log.write(traceback.format_exc())
        _error(prefix, store_fault_line(str(exc), []))
        code = EXIT_SOURCE_FAILED
    except StorageError as exc:  # the artifacts store (a conflict with another writer): not a bug
        log.write(traceback.format_exc())
        _error(prefix, one_line_error(exc))
        code = EXIT_SOURCE_FAILED
    except Exception as exc:  # noqa: BLE001 - a bug: one line here, the traceback in the log
        log.write(traceback.format_exc())
        disk = disk_full_message(exc, os.environ.get("DAGSTER_HOME"))
        if disk is not None:
            _error(prefix, f"{log.step}: {disk}")
            code = EXIT_SOURCE_FAILED
        else:
            _error(prefix, f"{type(exc).__name__}: {one_line_error(exc)} (traceback in {log_path})")
            code = EXIT_INTERNAL
    finally:
        log.close()
    if log.failure is not None:
        _error(prefix, log.message())
        if code != EXIT_BAD_INPUT:
            code = EXIT_SOURCE_FAILED
    return code


def store_fault_line(fault: str, failed: list) -> str:
    """The one line of a store fault: the store (its URL, never a secret) and what failed, the steps that failed
    (`StepFailure`s; none when the first sync failed), and that a rerun resumes."""
    from corpus_dagster.cli.progress_display import one_line

    steps = ", ".join(f"{f.where}: {f.step}" for f in failed) or "none (no step had started)"
    return f"{one_line(fault)}; failed steps: {steps}; {STORE_HINT}"


def one_line_error(exc: BaseException) -> str:
    from corpus_dagster.cli.progress_display import one_line

    return one_line(str(exc))


def _run(config_path: str, settings: Settings, layout, prefix: str, keep_going: bool, log: GuardedLog, log_path: Path,
         start: float) -> int:
    from corpus_dagster.cli.preflight import preflight
    from corpus_dagster.cli.progress_display import RunWatcher
    from corpus_dagster.core.allowed_locations import check_allowed_locations
    from corpus_dagster.core.ledger import check_config_against_ledger, load_ledger
    from corpus_dagster.core.storage import StoreUnavailable, refused_line, sync
    from corpus_dagster.defs.instance import (
        fail_orphaned_runs,
        hold_session,
        instance_setup,
        reconcile_partitions,
        session_tags,
    )
    from corpus_dagster.defs.resources import CorpusConfig
    from corpus_dagster.defs.runner import GLOBAL_JOB, SOURCE_JOB, repository_origin, source_pool
    from corpus_dagster.ingest.estimate import largest_first

    store = layout.store()
    if store is not None:
        store.forget_warnings()  # each run names the store's refused keys once, here (its steps then do not)
    _, pulled = sync(store)  # an artifacts store: this machine's mirror brought up to it (core.storage)
    if pulled is not None and pulled.refused:
        print(f"{prefix}: warning: {refused_line(store.url, pulled.refused)}", file=sys.stderr, flush=True)
    ledger = load_ledger(layout.ledger)  # LedgerError names file, line and JSON path
    # before anything lists or reads a source: every ledger URL inside ingest.allowed_prefixes (exit 2)
    check_allowed_locations(settings.ingest.allowed_prefixes, ledger, layout.ledger)
    # rule sources and pins against the ledger: exit 2 before any run (ingest is imported only for pins)
    check_config_against_ledger(settings, ledger, config_path)
    preflight(settings, config_path)  # tokenizer files and special tokens, buckets: exit 2 now, not minutes in
    if any(s.sha256 for s in ledger):
        from corpus_dagster.ingest.pins import check_pins

        check_pins(settings, ledger)
    sources = [s.source_id for s in ledger]
    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    home = Path(os.environ["DAGSTER_HOME"])
    corpus = CorpusConfig(config_path=config_path)
    session = uuid.uuid4().hex[:12]
    tags = session_tags(session)
    workers = max(1, settings.workers)
    print(f"{prefix}: {len(sources)} source(s), {min(workers, len(sources))} at a time ({SOURCE_JOB} runs), "
          f"then {GLOBAL_JOB}; DAGSTER_HOME={home}", flush=True)
    log.step = "instance set-up"
    with hold_session(home, session):  # held while this process lives: its runs are never taken for orphans
        with instance_setup(home, f"{prefix} session {session}: instance set-up") as instance:
            # under the instance lock: storages created, stale runs failed, partitions made the ledger's
            orphaned = fail_orphaned_runs(instance, home)
            if orphaned:
                print(f"{prefix}: marked {len(orphaned)} run(s) failed whose CLI process had died: {', '.join(orphaned)}",
                      flush=True)
            plan = reconcile_partitions(instance, sources)
            if plan.remove:
                print(f"{prefix}: removed from the ledger, so left out of the corpus: {', '.join(plan.remove)} "
                      f"(their data is deleted once the corpus without them is published)", flush=True)
        with instance:
            log.step = f"{SOURCE_JOB} runs"
            with source_pool(corpus, instance, sources, output=str(log_path),
                             origin=repository_origin(default_workspace_file())) as pool, on_repeated_signal(pool.kill):
                # from here a second signal kills the run processes at once, and never skips the stop below
                watcher = None
                try:
                    watcher = RunWatcher(instance, session, log, prefix=prefix, check_steps=pool.check_step_keys())
                    # largest first, so that a large source does not run alone at the end
                    outcomes = pool.run_sources(largest_first(layout, ledger), keep_going=keep_going, tags=tags,
                                                poll=watcher.poll)
                    ok = [o.partition for o in outcomes if o.success]
                    not_run = sorted((o.partition for o in outcomes if o.run_id is None), key=sources.index)
                    if not_run:  # in ledger order
                        print(f"{prefix}: not run after the first failure (use --keep-going to try them): "
                              f"{', '.join(not_run)}")
                    if len(ok) == len(sources) or (keep_going and ok):
                        if len(ok) < len(sources):
                            print(f"{prefix}: building the corpus over the {len(ok)} source(s) that succeeded",
                                  flush=True)
                        log.step = f"{GLOBAL_JOB} run"
                        pool.run_global(tags=tags, poll=watcher.poll)
                except Interrupted as stop:
                    stop.canceled_runs = pool.stop(
                        instance, tags, reason=f"the CLI (pid {os.getpid()}) got {stop.signal_name}: run stopped")
                    if watcher is not None:
                        watcher.drain_to_log()
                    raise
            log.step = "retention"
            _apply_retention(layout, settings, instance, log, log_path)
    log.step = "the summary"
    failures = watcher.failures
    store_failures = [f for f in failures if f.error_class == StoreUnavailable.__name__]
    fault = store_failures[0].message.partition(": ")[2] if store_failures else None
    try:
        sync(store)  # what the runs pushed, for the summary
    except StoreUnavailable as exc:
        fault = str(exc)
    if fault is not None:  # one line for every step the store failed, and no summary it cannot give
        _error(prefix, store_fault_line(fault, store_failures))
        failures = [f for f in failures if f not in store_failures]
    failed_checks = [c for c in watcher.checks if not c.passed]
    if not failures and fault is None:
        _print_outputs(layout, settings, prefix)
    for f in failures:
        if not f.said_by_check:
            _error(prefix, f"{f.message}  [{HINTS[f.kind]}]")
    for c in failed_checks:
        _error(prefix, f"check {c.asset}/{c.name} failed: {c.detail}  [{HINTS['check']}]")
    n_checks = len(watcher.checks)
    built = f"{n_checks - len(failed_checks)}/{n_checks} checks passed" if watcher.ran_global else "corpus not built"
    print(f"{prefix}: done in {time.monotonic() - start:.1f} s; {len(ok)}/{len(sources)} sources; {built}; "
          f"log {log_path}; open the UI with `make ui`", flush=True)
    if any(f.bad_input for f in failures):
        return EXIT_BAD_INPUT
    if fault is not None or any(f.kind in ("source", "step") for f in failures) or len(ok) < len(sources):
        return EXIT_SOURCE_FAILED
    if failed_checks or failures:
        return EXIT_CHECK_FAILED
    return EXIT_OK


def _apply_retention(layout, settings, instance, log: GuardedLog, log_path: Path) -> None:
    """Step values of finished runs but the newest `paths.keep_step_values`, and run logs under the artifacts
    root but the newest `paths.keep_run_logs`, are removed (from the store too, by the summary's push)."""
    from corpus_dagster.cli.run_log import prune_run_logs
    from corpus_dagster.core.step_values import StepValues
    from corpus_dagster.core.storage import redact, store_fault
    from corpus_dagster.defs.store_io import prune_step_values

    try:
        runs = prune_step_values(StepValues.of(layout), instance, settings.paths.keep_step_values)
    except Exception as exc:  # noqa: BLE001 - a store that is gone: the summary's sync names it in its one line
        if store_fault(exc) is None:
            raise
        log.write(f"retention: step values left for the next run (the store failed: {redact(str(exc))})\n")
        runs = []
    logs = prune_run_logs(layout.root / "logs", settings.paths.keep_run_logs, log_path)
    if runs or logs:
        log.write(f"retention: removed the step values of {len(runs)} finished run(s) "
                  f"(paths.keep_step_values {settings.paths.keep_step_values}) and {len(logs)} run log(s) "
                  f"(paths.keep_run_logs {settings.paths.keep_run_logs})\n")


def _print_outputs(layout, settings, prefix: str) -> None:
    """Where the outputs are, in a few lines (with an artifacts store: its URL, and this machine's mirror)."""
    if layout.store_url is not None:
        from corpus_dagster.core.storage import redact

        print(f"{prefix}: store    {redact(layout.store_url)}  (this machine's mirror: {layout.root}; paths below are in it)")
    if layout.manifest.exists():
        manifest = json.loads(layout.manifest.read_text())
        print(f"{prefix}: shards   {layout.shards}  ({manifest['n_docs']:,} documents in {manifest['n_shards']} shards)")
    tokens = layout.tokens / "_TOKENS.json"
    if tokens.exists():
        info = json.loads(tokens.read_text())
        per_split = ", ".join(f"{k}: {v['n_tokens']:,} tokens" for k, v in info["splits"].items())
        print(f"{prefix}: tokens   {layout.tokens}  ({per_split}; {info['tokenizer']['name']})")
    report = layout.analysis / "REPORT.md"
    if report.exists():
        print(f"{prefix}: analysis {report}")
    card = layout.release(settings.release.name or settings.dataset) / "README.md"
    if card.exists():
        print(f"{prefix}: release  {card.parent}  (dataset card {card})")
    review = layout.review / "index.html"
    if review.exists():
        print(f"{prefix}: review   {review}")


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv if argv is not None else sys.argv[1:])
    except SystemExit as exc:  # argparse: --help exits 0, a usage error 2
        return int(exc.code or 0)
    return run_pipeline(args.config, keep_going=args.keep_going, log_file=args.log_file)


if __name__ == "__main__":
    sys.exit(main())
