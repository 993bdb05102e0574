"""The Dagster instance the CLI, the demo and `make ui` share: set up under one lock, runs of dead CLIs failed.

Dagster's SQLite storages create their tables and stamp their schema revision on first open; two processes
doing that at once can leave two `alembic_version` heads, after which no run starts. Everything that may create,
migrate or reconcile the instance (its folder and `dagster.yaml`, the storages, the source partitions, stale
runs) happens under the file lock `DAGSTER_HOME/.locks/instance.lock`, so first runs started together wait for
each other for a moment instead.

A CLI session holds its own lock file for as long as it lives; a run tagged with a session whose lock nobody
holds belongs to a process that died (SIGKILL, OOM, a closed terminal) and is marked failed, with that reason,
by the next session, so the UI never shows a phantom run in progress.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from corpus_dagster.core.locks import hold_lock, lock_is_held, lock_path, read_holder
from corpus_dagster.core.reconcile import PartitionPlan, plan_partitions
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME

SESSION_TAG = "corpus/cli_session"
# The machine of the CLI session: a session lock is a file on that machine, so only a CLI on the same machine
# can tell that the session died (an instance on PostgreSQL is shared by CLIs on several machines).
SESSION_HOST_TAG = "corpus/cli_host"
INSTANCE_LOCK = "instance"
SETUP_TIMEOUT_S = 600.0
UNFINISHED = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
              dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.QUEUED]


INSTANCE_YAML = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
# What earlier versions wrote; such a file is upgraded in place (a file a person wrote is left alone).
_EARLIER_INSTANCE_YAML = ("telemetry:\n  enabled: false\n",)


def session_tags(session: str) -> dict[str, str]:
    """The tags of every run a CLI session starts: the session and this machine."""
    return {SESSION_TAG: session, SESSION_HOST_TAG: socket.gethostname()}


def ensure_dagster_home(home: Path) -> None:
    """A SQLite-backed instance folder with telemetry off (no network at run time) and the UI's onboarding
    dialogs off ("Join the Dagster community" would cover the first page `make ui` opens)."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists() or cfg.read_text(encoding="utf-8") in _EARLIER_INSTANCE_YAML:
        cfg.write_text(INSTANCE_YAML, encoding="utf-8")


@contextlib.contextmanager
def instance_setup(home: Path, what: str = "setting up the Dagster instance") -> Iterator[dg.DagsterInstance]:
    """Hold the instance lock, create the folder and every storage, and yield the open instance.

    The body runs under the lock too (partition sync, stale runs); the instance stays open after it only as
    long as the caller keeps it (see `open_instance`).
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    with hold_lock(home, INSTANCE_LOCK, what, timeout_s=SETUP_TIMEOUT_S):
        ensure_dagster_home(home)
        instance = dg.DagsterInstance.from_config(str(home))
        try:
            touch_storages(instance)
            yield instance
        except BaseException:
            instance.dispose()
            raise


def touch_storages(instance: dg.DagsterInstance) -> None:
    """One read of each storage, so every table exists (and is migrated) before the lock is let go."""
    instance.get_runs(limit=1)
    instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)
    if instance.schedule_storage is not None:
        instance.schedule_storage.all_instigator_state()


@contextlib.contextmanager
def open_instance(home: Path) -> Iterator[dg.DagsterInstance]:
    """The instance of `home`, set up under the lock, open (and the lock let go) for the body, then closed."""
    with instance_setup(home, "opening the Dagster instance") as instance:
        pass
    with instance:
        yield instance


def prepare_home(home: Path) -> list[str]:
    """Create (or migrate) the instance, fail the runs of CLIs that died, and close it again: `make ui` does
    this before `dagster dev` opens it, so the UI shows no phantom run in progress. Returns those run ids."""
    with instance_setup(home, "preparing the Dagster instance for the UI") as instance:
        failed = fail_orphaned_runs(instance, home)
        instance.dispose()
    return failed


def reconcile_partitions(instance: dg.DagsterInstance, ledger_ids: list[str], named_by_invalid: set[str] | None = None,
                         unnamed_invalid: int = 0) -> PartitionPlan:
    """Make the source partitions the ledger's: add new rows, delete removed ones (what the ledger sensor does)."""
    existing = instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)
    plan = plan_partitions(ledger_ids, existing, named_by_invalid or set(), unnamed_invalid)
    if plan.add:
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, plan.add)
    for sid in plan.remove:
        instance.delete_dynamic_partition(SOURCE_PARTITIONS_NAME, sid)
    if plan.remove:
        forget_automation_history(instance)
        forget_source_runs(instance, plan.remove)
    return plan


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


def forget_source_runs(instance: dg.DagsterInstance, source_ids: list[str]) -> list[str]:
    """Delete the finished runs of removed source partitions, with their events; returns the run ids.

    Their materializations carry the source's text previews and counts, and the asset pages headline the
    newest materialization of any partition: a removed source would stay the face of every per-source asset,
    and its text would stay in the instance after a takedown. Runs still in progress are kept (the next
    reconcile deletes them). Runs of the whole corpus name no partition and stay.
    """
    deleted: list[str] = []
    for sid in source_ids:
        for record in instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": sid})):
            if record.dagster_run.is_finished:
                instance.delete_run(record.dagster_run.run_id)
                deleted.append(record.dagster_run.run_id)
    return deleted


def session_lock_path(home: Path, session: str) -> Path:
    return lock_path(home, f"session-{session}")


@contextlib.contextmanager
def hold_session(home: Path, session: str) -> Iterator[Path]:
    """Hold the session's lock for the life of this process; the kernel frees it however the process ends,
    and a clean end removes its file."""
    with hold_lock(home, f"session-{session}", f"CLI session {session}", timeout_s=0) as path:
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


def _session_alive(home: Path, session: str) -> tuple[bool, str]:
    """(whether a live process holds the session's lock, the pid its file names)."""
    path = session_lock_path(home, session)
    return lock_is_held(path), str(read_holder(path).get("pid", "?"))


def fail_orphaned_runs(instance: dg.DagsterInstance, home: Path) -> list[str]:
    """Mark failed every unfinished run of a CLI session of this machine whose process is gone; returns their
    run ids."""
    failed = []
    sessions: dict[str, tuple[bool, str]] = {}
    host = socket.gethostname()
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        session = run.tags.get(SESSION_TAG)
        if not session:
            continue  # a run of the UI or the daemon: Dagster's run monitoring owns those
        if run.tags.get(SESSION_HOST_TAG, host) != host:
            continue  # a CLI on another machine: its lock is not here to look at
        if session not in sessions:
            sessions[session] = _session_alive(home, session)
        alive, pid = sessions[session]
        if alive:
            continue
        instance.report_run_failed(
            run, message=f"the CLI process that ran this run (session {session}, pid {pid}) ended without finishing "
                         f"it (killed?); marked failed when the next run started")
        failed.append(run.run_id)
    for session, (alive, _pid) in sessions.items():
        if not alive:
            session_lock_path(home, session).unlink(missing_ok=True)
    return failed


# What a run can be in when a stop comes (CANCELING: already asked, by an earlier stop or the UI).
CANCELABLE = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
              dg.DagsterRunStatus.QUEUED]


def request_run_cancel(instance: dg.DagsterInstance, tags: dict[str, str], reason: str) -> list[str]:
    """Mark CANCELING every run with `tags` that is going (Dagster's termination request: a run process that
    is interrupted then records the run CANCELED, not failed); returns their ids."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags=tags, statuses=CANCELABLE))
    for run in runs:
        instance.report_run_canceling(run, message=reason)
    return [run.run_id for run in runs]


def cancel_unfinished_runs(instance: dg.DagsterInstance, tags: dict[str, str], reason: str) -> list[str]:
    """Mark CANCELED every unfinished run with `tags` (their processes are gone: nobody else will); returns
    their ids."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags=tags, statuses=UNFINISHED))
    for run in runs:
        instance.report_run_canceled(run, message=reason)
    return [run.run_id for run in runs]
