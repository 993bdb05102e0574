"""Run the graph through named Dagster jobs: one `build_source` run per source partition, then `build_corpus`.

Two ways: `materialize_sources` / `materialize_global` run in this process, one after another (tests; one
result object each); `RunPool.run_sources` / `run_global` launch runs from a bounded pool of processes,
sources `workers` at a time, each `build_source` run's steps in that process (the CLI and demo).

A pool's runs are created as the UI's own launches are: with the remote origin of the code location that
workspace.yaml loads (the Overview timeline groups runs by that origin and leaves off runs without one), and
with the corpus resource's fields in the run config (a re-execution from the UI reads the same corpus config,
whatever CORPUS_CONFIG the UI was started with). Their job snapshot is the job definition's, which is the
location's when the UI was started on the same config file, so "Re-execute" finds the same version.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.execution.api import execute_run as execute_created_run
from dagster._core.remote_origin import CodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.workspace.load import location_origin_from_module_name, location_origins_from_yaml_paths
from dagster._serdes import deserialize_value, serialize_value
from dagster._utils.interrupts import capture_interrupts

from corpus_dagster.core.interrupts import on_repeated_signal
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.parallel import exit_with_parent, shutdown_pools
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CORPUS_JOB, SOURCE_JOB, CorpusConfig

GLOBAL_JOB = CORPUS_JOB
PARTITION_TAG = "dagster/partition"
# The console logger stays quiet: every event is still stored in the instance (the UI and the CLI's log
# file read it from there), only Dagster's DEBUG stream on stderr is switched off.
QUIET_CONSOLE: dict = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
DEFINITIONS_MODULE = "corpus_dagster.definitions"  # what workspace.yaml loads
# How long a stop waits for the interrupted runs to record themselves canceled (an interrupted step ends
# within a second or two: the time to unwind and remove its temp files) before it kills their processes.
STOP_GRACE_S = 10.0


def code_location_origin(workspace_file: str | os.PathLike | None = None) -> CodeLocationOrigin:
    """The origin of the code location that `dagster dev -w workspace_file` loads the definitions from.

    Read from the workspace file as dagster reads it (the location's name is what the UI matches a run's origin
    by); without the file, the origin `dagster dev -m corpus_dagster.definitions` would give.
    """
    if workspace_file is not None and os.path.isfile(workspace_file):
        origins = location_origins_from_yaml_paths([os.fspath(workspace_file)])
        for origin in origins:
            if getattr(getattr(origin, "loadable_target_origin", None), "module_name", None) == DEFINITIONS_MODULE:
                return origin
    return location_origin_from_module_name(DEFINITIONS_MODULE, None, None)


def repository_origin(workspace_file: str | os.PathLike | None = None) -> RemoteRepositoryOrigin:
    """The repository the definitions module makes (`dg.Definitions` load as the singleton repository)."""
    return RemoteRepositoryOrigin(code_location_origin(workspace_file), SINGLETON_REPOSITORY_NAME)


def run_config_for(corpus_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A pool run's run config: the quiet console logger and the corpus resource's fields, all of them, so a
    re-execution from the UI reads the same config even when the UI's location was built from another."""
    return {**QUIET_CONSOLE, "resources": {"corpus": {"config": dict(corpus_kwargs)}}}


def all_checks() -> list:
    from corpus_dagster.defs.catalog import CHECKS  # every stage: loaded when a run's checks are looked up

    return list(CHECKS)


def resolve_job(corpus: CorpusConfig, name: str) -> dg.JobDefinition:
    """A named job of the definitions built for this corpus config (`build_source`, `build_corpus`, ...)."""
    from corpus_dagster.defs.catalog import build_definitions

    return build_definitions(corpus).resolve_job_def(name)


def reconstruct_job(config_path: str, artifacts: str | None, workers: int | None, job_name: str) -> dg.JobDefinition:
    """Rebuild a named job in a step process of the multiprocess executor (arguments are JSON values)."""
    return resolve_job(CorpusConfig(config_path=config_path, artifacts=artifacts, workers=workers), job_name)


def reconstructable_job(corpus: CorpusConfig, name: str):
    """A job the multiprocess executor can rebuild in its step processes."""
    return dg.build_reconstructable_job(
        __name__, reconstruct_job.__name__,
        reconstructable_kwargs={"config_path": corpus.config_path, "artifacts": corpus.artifacts,
                                "workers": corpus.workers, "job_name": name},
    )


def add_partitions(instance: dg.DagsterInstance, source_ids: list[str]) -> None:
    """Add missing source partitions for a chosen subset of sources (the whole ledger goes through
    `defs.instance.reconcile_partitions`, which removes partitions too)."""
    existing = set(instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    new = [s for s in source_ids if s not in existing]
    if new:
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, new)


def materialize_sources(
    corpus: CorpusConfig, instance: dg.DagsterInstance, source_ids: list[str] | None = None,
    on_result: Callable[[str, dg.ExecuteInProcessResult], None] | None = None,
) -> dict[str, dg.ExecuteInProcessResult]:
    """Run `build_source` in this process for each source partition, one after another; raise on failure.

    Without `source_ids`: every ledger source, after the partitions are made the ledger's (removed rows lose theirs).
    """
    if source_ids is None:
        from corpus_dagster.defs.instance import reconcile_partitions

        ids = [s.source_id for s in load_ledger(corpus.ledger_layout().ledger)]
        reconcile_partitions(instance, ids)
    else:
        ids = list(source_ids)
        add_partitions(instance, ids)
    job = resolve_job(corpus, SOURCE_JOB)
    results = {}
    for sid in ids:
        res = job.execute_in_process(partition_key=sid, instance=instance, run_config=QUIET_CONSOLE, raise_on_error=True)
        results[sid] = res
        if on_result:
            on_result(sid, res)
    return results


def materialize_global(corpus: CorpusConfig, instance: dg.DagsterInstance, raise_on_error: bool = True,
                       tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    """Run `build_corpus` (the whole-corpus assets and their checks) in this process, over the materialized sources."""
    job = resolve_job(corpus, GLOBAL_JOB)
    return job.execute_in_process(instance=instance, run_config=QUIET_CONSOLE, raise_on_error=raise_on_error, tags=tags)


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended; run_id is None when it was never started (stopped after an earlier failure)."""

    job: str
    partition: str | None
    run_id: str | None
    success: bool


def _start_run_process(path: str | None, stopping: Any) -> None:
    """Pool-process initializer: its own process group, stop signals left to the CLI, output to the log file.

    A Ctrl-C at the terminal goes to the foreground process group: in the CLI's, it would reach every run
    process at the same instant as the CLI, before the CLI has marked the runs canceling, and Dagster would
    record "interrupted unexpectedly" failures. In a group of its own (with the step pools it starts), only
    the CLI decides: it marks the runs, then signals each group (`RunPool.stop`). Between runs SIGINT is
    ignored; during one, Dagster's handler takes it. `stopping` is the pool's stop event (no run starts once
    it is set). stdout and stderr (also of the processes it starts) append to the log file; the process ends
    when the CLI that started it was killed."""
    os.setpgrp()
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _STOPPING[:] = [stopping]
    exit_with_parent()
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the CLI dies. Out of the CLI's process group, a SIGKILL of
    that group (a closed terminal, `kill -9 -<pgid>`) no longer reaches it, and `exit_with_parent` notices
    only within a second, time enough for a run to write more. Elsewhere that watch is all there is."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_STOPPING: list[Any] = []  # this pool process's stop event (a multiprocessing Event of its RunPool)


def _start_resource_tracker_writing_to(path: str) -> None:
    """Start multiprocessing's resource tracker (one per process tree: the run processes and their step pools
    use it too) with its stderr on the log file. It warns of the semaphores of processes that were killed (a
    second Ctrl-C) as it cleans them up, which belongs in the log, not under the CLI's one line. No-op when
    it is running already."""
    from multiprocessing import resource_tracker

    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _stop_requested() -> bool:
    return bool(_STOPPING) and _STOPPING[0].is_set()


def execute_run(instance_ref: Any, corpus_kwargs: dict[str, Any], job_name: str, partition: str | None,
                tags: dict[str, str], origin: str | None = None, run_workers: int | None = None) -> RunOutcome:
    """Execute one named run in this pool process on the job's own executor; events go to the instance only.

    `origin`: the serialized RemoteRepositoryOrigin the run is created under. Otherwise this is what
    `dg.execute_job` does; the job snapshot is the job definition's, the one a code location built from the
    same corpus config gives for the job. `run_workers` overrides `workers` in the run's config only, so
    the snapshot stays the workspace job's and the run's config says what it ran with.

    A stop (`RunPool.stop`) sets the pool's event before it lists the runs to cancel: a run created after
    that sees the event and is canceled here, never started; one created before is on the CLI's list. A
    SIGINT that comes before Dagster's own handler is in place is held (`capture_interrupts`, as Dagster
    advises for a process that executes runs) and raised at the run's first step.
    """
    try:
        with capture_interrupts():
            if _stop_requested():
                return RunOutcome(job_name, partition, None, False)
            instance = _pool_instance(instance_ref)
            corpus = CorpusConfig(**corpus_kwargs)
            recon = reconstructable_job(corpus, job_name)
            job_def = recon.get_definition()
            run = instance.create_run_for_job(
                job_def=job_def,
                run_config=run_config_for(corpus_kwargs if run_workers is None else
                                          {**corpus_kwargs, "workers": run_workers}),
                tags={**job_def.run_tags, **tags, **({PARTITION_TAG: partition} if partition else {})},
                job_code_origin=recon.get_python_origin(),
                remote_job_origin=(RemoteJobOrigin(deserialize_value(origin, RemoteRepositoryOrigin), job_name)
                                   if origin else None),
            )
            if _stop_requested():
                instance.report_run_canceled(run, message="the CLI was stopping when this run was created: not started")
                return RunOutcome(job_name, partition, run.run_id, False)
            with execute_created_run(recon, run, instance) as result:
                return RunOutcome(job_name, partition, result.run_id, result.success)
    finally:
        if _stop_requested():  # the step pools' interrupted tasks end (and clean up) before the CLI hears back
            shutdown_pools()
        # Dagster's handlers map SIGTERM to SIGINT's and restore both as SIGINT's (ignored here) afterwards
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


_INSTANCE: list[tuple[Any, dg.DagsterInstance]] = []  # this pool process's instance, opened on its first run


def _pool_instance(instance_ref: Any) -> dg.DagsterInstance:
    """The instance of `instance_ref`, opened once per pool process: opening one checks the schema revision
    of each SQLite storage, about 0.35 s that every run paid again."""
    if _INSTANCE and _INSTANCE[0][0] == instance_ref:
        return _INSTANCE[0][1]
    if _INSTANCE:
        _INSTANCE.pop()[1].dispose()
    instance = dg.DagsterInstance.from_ref(instance_ref)
    _INSTANCE.append((instance_ref, instance))
    return instance


def _release_held_conditions(futures: Iterable[Future]) -> None:
    """Release the futures' condition locks this thread still holds. A stop signal raised in the main thread
    inside `concurrent.futures.wait` (which acquires every future's condition in a loop) or `Future.result`
    can leave one acquired; the pool's manager thread then blocks on it for good when it sets the result, and
    the pool's shutdown, which joins that thread, with it. The locks are RLocks owned by this thread."""
    for fut in list(futures):
        condition = fut._condition  # noqa: SLF001 - no public way to see a lock the unwinding left held
        while condition._is_owned():  # noqa: SLF001
            condition.release()


class RunPool:
    """A bounded pool of run processes, each executing whole runs: a failing source costs only its own run.

    Runs are handed out one at a time as processes come free, so a stop after a failure starts nothing more;
    `poll` is called about every `poll_seconds` while runs go, so the caller can show progress (each poll
    reads the session's runs and their new events from SQLite: at 0.5 s that was about 3% of a run's CPU).
    """

    def __init__(self, corpus: CorpusConfig, instance: dg.DagsterInstance, processes: int, output: str | None = None,
                 origin: RemoteRepositoryOrigin | None = None):
        self.corpus_kwargs = {"config_path": corpus.config_path, "artifacts": corpus.artifacts, "workers": corpus.workers}
        self.origin = serialize_value(origin or repository_origin())
        self.instance_ref = instance.get_ref()
        self.processes = processes
        self.workers = max(1, corpus.workers if corpus.workers is not None else corpus.settings().workers)
        context = multiprocessing.get_context("spawn")
        if output:
            _start_resource_tracker_writing_to(output)
        self.stopping = context.Event()
        self.running: dict[Future, int] = {}  # the runs going now (futures of execute_run)
        self.pool = ProcessPoolExecutor(max_workers=processes, mp_context=context,
                                        initializer=_start_run_process, initargs=(output, self.stopping))

    def run_all(self, job_name: str, partitions: list[str | None], tags: dict[str, str], keep_going: bool = True,
                poll: Callable[[], None] | None = None, poll_seconds: float = 1.0,
                run_workers: int | None = None) -> list[RunOutcome]:
        """Run every partition, `processes` at a time; without keep_going the first failure starts no more runs.

        `run_workers`: the `workers` each run's steps use (default: the config's)."""
        outcomes: dict[int, RunOutcome] = {}
        running = self.running = {}
        queue = list(enumerate(partitions))
        stopped = False
        while queue or running:
            while queue and len(running) < self.processes and not stopped:
                i, part = queue.pop(0)
                running[self.pool.submit(execute_run, self.instance_ref, self.corpus_kwargs, job_name, part, tags,
                                         self.origin, run_workers)] = i
            if stopped and not running:
                break
            done, _ = wait(running, timeout=poll_seconds, return_when=FIRST_COMPLETED)
            for fut in done:
                outcome = outcomes[running.pop(fut)] = fut.result()  # a crash of the run process is a bug: raise
                stopped = stopped or (not outcome.success and not keep_going)
            if poll:
                poll()
        if poll:
            poll()
        return [outcomes.get(i, RunOutcome(job_name, part, None, False)) for i, part in enumerate(partitions)]

    def check_step_keys(self) -> set[str]:
        """The asset checks' step keys, read in the pool processes: they import every stage for their first
        run anyway, and this process (which only launches and watches runs) need not import them too.

        One request per process: the pool starts a process per request it cannot give to an idle one, so
        every process starts (and imports) now, together, as the first runs would have started them."""
        futures = [self.pool.submit(check_step_keys) for _ in range(self.processes)]
        return set().union(*(f.result() for f in futures))

    def close(self) -> None:
        _release_held_conditions(self.running)
        self.pool.shutdown(wait=True, cancel_futures=True)

    def kill(self) -> None:
        """Kill every pool process and the step pools it started, now (a second Ctrl-C: `on_repeated_signal`);
        `stop` then finds the runs ended and marks them CANCELED."""
        _signal_groups(dict(self.pool._processes or {}), signal.SIGKILL)

    def stop(self, instance: dg.DagsterInstance, tags: dict[str, str], reason: str,
             grace_s: float = STOP_GRACE_S) -> list[str]:
        """Stop every run of this pool now, as Dagster terminates a launched run: mark it CANCELING, interrupt
        its process, and it records itself CANCELED. Returns the ids of the runs canceled.

        Each pool process leads a process group with the step pools it started; every group gets one SIGINT,
        which interrupts the step in the run process (Dagster's handler) and the tasks in the step pools
        (KeyboardInterrupt: their temp files are removed on the way out). Once the runs have answered, or
        after `grace_s`, or at once when another stop signal comes (`on_repeated_signal`), the groups are
        killed, and runs still unfinished then are marked CANCELED here. `tags` select the runs (a CLI
        session's).
        """
        from corpus_dagster.defs.instance import cancel_unfinished_runs, request_run_cancel

        processes = dict(self.pool._processes or {})  # pid -> Process; none once the pool is shut down

        def kill() -> None:
            _signal_groups(processes, signal.SIGKILL)

        with on_repeated_signal(kill):
            self.stopping.set()  # before the runs are listed: a run created later cancels itself
            requested = request_run_cancel(instance, tags, reason)
            _signal_groups(processes, signal.SIGINT)
            # A run process answers once its run is recorded and its step pools have ended (`execute_run`):
            # what is left of it then is an idle process, and its interpreter's exit took seconds.
            wait(list(self.running), timeout=grace_s)
            kill()
            swept = cancel_unfinished_runs(instance, tags, reason)
        ids = list(dict.fromkeys([*requested, *swept]))
        return [run_id for run_id in ids if _status(instance, run_id) == dg.DagsterRunStatus.CANCELED]

    def __enter__(self) -> RunPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_sources(self, source_ids: list[str], keep_going: bool = False, tags: dict[str, str] | None = None,
                    poll: Callable[[], None] | None = None) -> list[RunOutcome]:
        """One `build_source` run per source (in the order given); the pool's size bounds how many run at once.

        The config's `workers` are shared out among the runs that go at once (`source_run_workers`), so `workers`
        runs of `workers` processes each never put workers x workers processes on `workers` cores."""
        return self.run_all(SOURCE_JOB, list(source_ids), tags or {}, keep_going=keep_going, poll=poll,
                            run_workers=source_run_workers(self.workers, self.processes))

    def run_global(self, tags: dict[str, str] | None = None, poll: Callable[[], None] | None = None) -> RunOutcome:
        """One `build_corpus` run over the materialized sources (in-process executor: light steps around
        drivers that parallelize inside)."""
        return self.run_all(GLOBAL_JOB, [None], tags or {}, poll=poll)[0]


def _signal_groups(processes: dict[int, Any], signum: int) -> None:
    """Send `signum` to the process group each pool process leads (`_start_run_process`); gone ones are skipped."""
    for pid in processes:
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus | None:
    run = instance.get_run_by_id(run_id)
    return run.status if run is not None else None


def source_run_workers(workers: int, concurrent_runs: int) -> int:
    """The `workers` of each of `concurrent_runs` source runs going at once: their share of the config's
    `workers` (at least 1), so the runs' processes together stay within it. The share never changes a byte."""
    return max(1, workers // max(1, concurrent_runs))


def source_pool(corpus: CorpusConfig, instance: dg.DagsterInstance, source_ids: list[str],
                output: str | None = None, origin: RemoteRepositoryOrigin | None = None) -> RunPool:
    """A run pool of `workers` processes (at most one per source), with the source partitions added (the CLI
    has made them the ledger's before).

    Needs a persistent instance: the run processes write their events to it. `output`: a file that takes the
    run processes' stdout and stderr (warnings of libraries), else they share this process's. `origin`: the
    repository the runs are created under (default: the definitions module's, as `dagster dev -m` loads it).
    """
    add_partitions(instance, source_ids)
    workers = max(1, corpus.settings().workers)
    return RunPool(corpus, instance, min(workers, max(1, len(source_ids))), output, origin)


def check_results(result: dg.ExecuteInProcessResult) -> list[tuple[str, str, bool, dict]]:
    """(asset, check name, passed, metadata) for every check evaluated in a run."""
    out = []
    for ev in result.get_asset_check_evaluations():
        meta = {k: getattr(v, "value", v) for k, v in ev.metadata.items()}
        out.append((ev.asset_key.to_user_string(), ev.check_name, ev.passed, meta))
    return out


def check_step_keys() -> set[str]:
    """Step keys of the asset checks (a failing one is a failed check, not a failed step)."""
    return {c.node_def.name for c in all_checks()}
