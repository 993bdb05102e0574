"""Process pools whose results come back in submission order, so worker count never changes output."""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.util as mp_util
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

# Tokenizers/rayon and BLAS start a thread pool per process: N workers x all cores thrashes the machine.
# Each worker process gets one thread for those libraries; parallelism comes from the processes.
WORKER_ENV = {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "POLARS_MAX_THREADS": "1"}


def _init_worker(modules: tuple[str, ...] = ()) -> None:
    for key, value in WORKER_ENV.items():
        os.environ[key] = value
    exit_with_parent()
    import_modules(modules)


def exit_with_parent() -> None:
    """End this pool process soon after its parent died (killed, out of memory): an idle pool process waits
    on its queue forever otherwise, holding its memory. Call it in the pool's initializer."""
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="exit-with-parent", daemon=True).start()


def _watch_parent(parent: int, every_s: float = 1.0) -> None:
    while True:
        time.sleep(every_s)
        if os.getppid() != parent:
            os._exit(0)


def can_start_processes() -> bool:
    """False in a daemonic process (a dask worker started with its default `daemon: True`), which Python
    forbids to have children: a pool there would fail, so the work runs inline instead (the same bytes,
    by the determinism rule, at one core). Dask workers that should use `workers` processes per step
    are started with DASK_DISTRIBUTED__WORKER__DAEMON=False."""
    return not mp.current_process().daemon


def effective_workers(workers: int) -> int:
    """`workers`, or 1 where no child process may be started (see can_start_processes), said once."""
    if workers > 1 and not can_start_processes():
        global _WARNED
        if not _WARNED:
            _WARNED = True
            logging.getLogger(__name__).warning(
                "this step runs in a daemonic process (a dask worker started with daemon=True): its %d worker "
                "processes run inline instead; start the dask workers with DASK_DISTRIBUTED__WORKER__DAEMON=False "
                "to use them", workers)
        return 1
    return workers


_WARNED = False


def ordered_map(fn: Callable[..., T], jobs: Iterable[tuple[Any, ...]], workers: int) -> Iterator[T]:
    """Apply fn(*job) to every job; results in job order. workers == 1 runs inline (no pool).

    The worker processes are this process's shared pool (see `shared_pool`): a stage that maps many times
    (analysis, release) starts its workers once, not once per map."""
    jobs = list(jobs)
    workers = effective_workers(workers)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(*job)
        return
    pool = shared_pool(workers)
    futures = [pool.submit(fn, *job) for job in jobs]
    try:
        for fut in futures:
            yield fut.result()
    except BrokenProcessPool:
        _discard_pool(workers)  # a worker died (killed, out of memory): the next map starts a new pool
        raise
    finally:
        for fut in futures:  # the caller stopped early or a job failed: queued jobs are dropped
            fut.cancel()


_POOLS: dict[int, ProcessPoolExecutor] = {}
_OWNER: list[int | None] = [None]  # the pid the pools in _POOLS belong to
_POOLS_LOCK = threading.Lock()


def shared_pool(workers: int) -> ProcessPoolExecutor:
    """This process's pool of `workers` spawned processes, started on first use and kept until exit.

    Spawned (not forked): the parent holds threads (polars, Dagster) that a fork would copy mid-state.
    Starting a process costs an interpreter and this project's imports (about a second of CPU), which a
    pool per map paid again for every map."""
    with _POOLS_LOCK:  # steps on threads of one process (a dask worker with threads) share the pools
        return _shared_pool(workers)


def _shared_pool(workers: int, modules: tuple[str, ...] = ()) -> ProcessPoolExecutor:
    if _OWNER[0] != os.getpid():  # first use here; in a forked child the pools it inherited are its parent's
        _POOLS.clear()
        _OWNER[0] = os.getpid()
        # Stop the pools before multiprocessing's exit handler joins this process's children (at exit, and
        # in a pool process at the end of its own task, before atexit): idle workers would wait forever.
        mp_util.Finalize(None, shutdown_pools, exitpriority=100)
    pool = _POOLS.get(workers)
    if pool is not None and getattr(pool, "_broken", False):  # a worker died since the last map
        _discard_pool(workers)
        pool = None
    if pool is None:
        pool = _POOLS[workers] = ProcessPoolExecutor(
            max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_init_worker, initargs=(modules,))
    return pool


def prestart_pool(workers: int, modules: Iterable[str] = ()) -> bool:
    """Start this process's pool of `workers` now, each process importing `modules` as it starts; no wait.

    A pool process costs about a second of interpreter start and imports on its first task, and more on the
    first task of each stage whose modules it has not imported yet; a run that knows it will map (a corpus
    run) has that done while its first step reads its inputs, not inside its first maps. A pool that is
    already running is left as it is. Returns False where no pool is started (one worker, or a process that
    may not have children)."""
    workers = effective_workers(workers)
    if workers <= 1:
        return False
    with _POOLS_LOCK:
        if workers in _POOLS and _OWNER[0] == os.getpid():
            return True
        pool = _shared_pool(workers, tuple(modules))
    for _ in range(workers):  # the pool spawns a process for each task no idle process can take
        pool.submit(int)
    return True


def import_modules(modules: tuple[str, ...]) -> None:
    """Import every named module (a pool process's warm-up task)."""
    import importlib

    for name in modules:
        importlib.import_module(name)


def _discard_pool(workers: int) -> None:
    pool = _POOLS.pop(workers, None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def shutdown_pools() -> None:
    """Stop every shared pool's processes (at exit, or where a caller must not leave processes behind)."""
    if _OWNER[0] != os.getpid():
        _POOLS.clear()
        return
    for workers in list(_POOLS):
        pool = _POOLS.pop(workers)
        pool.shutdown(wait=True, cancel_futures=True)
