"""core.parallel: results in job order for any worker count, and no crash where children are forbidden."""

import multiprocessing as mp

import pytest

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


def _die(_: int) -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_maps_share_one_pool_and_a_dead_worker_costs_only_its_own_map() -> None:
    import os
    from concurrent.futures.process import BrokenProcessPool

    import pytest

    from corpus_dagster.core import parallel

    first = set(parallel.ordered_map(os.getpid, [()] * 6, 2))
    assert os.getpid() not in first
    second = set(parallel.ordered_map(os.getpid, [()] * 6, 2))
    # one pool of at most 2 processes ran both maps (the first map may not have waited for its second
    # process to start, so the pool's own process list is the reference, not the first map's pids)
    pool = parallel.shared_pool(2)
    assert first | second <= set(pool._processes) and len(pool._processes) <= 2
    first = set(pool._processes)
    with pytest.raises(BrokenProcessPool):
        list(parallel.ordered_map(_die, [(1,), (2,)], 2))
    assert list(parallel.ordered_map(pow, [(2, 3), (3, 2)], 2)) == [8, 9]  # a new pool took over
    assert not set(parallel.ordered_map(os.getpid, [()] * 6, 2)) & first


def test_pool_workers_end_when_their_parent_is_killed(tmp_path) -> None:
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, time\nfrom corpus_dagster.core import parallel\n"
        "if __name__ == '__main__':\n"
        "    print(' '.join(map(str, sorted(set(parallel.ordered_map(os.getpid, [()] * 6, 2))))), flush=True)\n"
        "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert workers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in workers if _alive(p)]
    assert not alive, f"pool workers {alive} outlived their killed parent"


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def _map_in_a_pool_process(_: int) -> int:
    from corpus_dagster.core import parallel

    return sum(parallel.ordered_map(pow, [(2, 3), (3, 2)], 2))


@pytest.mark.timeout(120)
def test_a_pool_process_that_started_a_pool_of_its_own_ends() -> None:
    # a run-pool process maps through a shared pool of its own; at its end multiprocessing joins its
    # children, which must have been stopped first (this hung the CLI)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), max_tasks_per_child=1) as outer:
        assert outer.submit(_map_in_a_pool_process, 0).result(timeout=60) == 17
        assert outer.submit(_map_in_a_pool_process, 1).result(timeout=60) == 17  # the first child had to end


def _imported(name: str) -> bool:
    import sys

    return name in sys.modules


def test_prestart_starts_the_pool_whose_processes_import_the_modules_first() -> None:
    from corpus_dagster.core import parallel

    parallel.shutdown_pools()
    assert parallel.prestart_pool(1, ["colorsys"]) is False and 1 not in parallel._POOLS
    assert parallel.prestart_pool(2, ["colorsys"]) is True
    pool = parallel._POOLS[2]
    assert len(pool._processes) == 2  # spawned now, before any map
    # each process imported the module as it started, before any task
    assert all(parallel.ordered_map(_imported, [("colorsys",)] * 8, 2))
    assert parallel.prestart_pool(2, ["zipapp"]) is True  # a running pool is left as it is
    assert not any(parallel.ordered_map(_imported, [("zipapp",)] * 8, 2))
    assert parallel.shared_pool(2) is pool  # the maps used the prestarted pool
    parallel.shutdown_pools()
