"""core.parallel: results in job order for any worker count, and no crash where children are forbidden."""

import multiprocessing as mp

from corpus_dagster.core.parallel import can_start_processes, ordered_map


def square(x: int) -> int:
    return x * x


def test_results_come_back_in_job_order_for_any_worker_count():
    jobs = [(i,) for i in range(7)]
    assert list(ordered_map(square, jobs, 1)) == list(ordered_map(square, jobs, 3)) == [i * i for i in range(7)]


def _in_daemon(queue) -> None:
    try:
        queue.put((can_start_processes(), list(ordered_map(square, [(i,) for i in range(5)], 2))))
    except Exception as exc:  # noqa: BLE001 - the parent asserts on it
        queue.put(("failed", repr(exc)))


def test_a_daemonic_process_runs_the_jobs_inline_instead_of_failing():
    """A dask worker is daemonic by default, and Python forbids a daemon to have children: a step there
    must still give its results (inline), not `daemonic processes are not allowed to have children`."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_in_daemon, args=(queue,), daemon=True)
    proc.start()
    result = queue.get(timeout=120)
    proc.join(timeout=60)
    assert result == (False, [0, 1, 4, 9, 16])
    assert can_start_processes()
