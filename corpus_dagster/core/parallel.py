"""Process pools whose results come back in submission order, so worker count never changes output."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Tokenizers/rayon and BLAS start a thread pool per process: N workers x all cores thrashes the machine.
# Each worker process gets one thread for those libraries; parallelism comes from the processes.
WORKER_ENV = {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "POLARS_MAX_THREADS": "1"}


def _init_worker() -> None:
    for key, value in WORKER_ENV.items():
        os.environ[key] = value


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
    """Apply fn(*job) to every job; results in job order. workers == 1 runs inline (no pool)."""
    jobs = list(jobs)
    workers = effective_workers(workers)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(*job)
        return
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker) as pool:
        futures = [pool.submit(fn, *job) for job in jobs]
        for fut in futures:
            yield fut.result()
