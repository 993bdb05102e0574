"""core.interrupts: the first stop signal raises Interrupted once, later ones run the registered actions at once."""

import os
import signal

import pytest

from corpus_dagster.core.interrupts import (
    Interrupted,
    ignore_stop_signals,
    on_repeated_signal,
    signals_raise_interrupted,
)


def _send(signum: int) -> None:
    os.kill(os.getpid(), signum)  # delivered to the main thread before the next bytecode


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_first_signal_raises_interrupted_with_the_shells_exit_code(signum, code):
    with pytest.raises(Interrupted) as caught, signals_raise_interrupted():
        _send(signum)
    assert caught.value.exit_code == code and caught.value.signal_name == signal.Signals(signum).name
    assert not caught.value.repeated


def test_a_second_signal_runs_the_registered_action_and_raises_nothing():
    ran = []
    with pytest.raises(Interrupted) as caught, signals_raise_interrupted():
        try:
            _send(signal.SIGINT)
        except Interrupted:
            with on_repeated_signal(lambda: ran.append("kill")):
                _send(signal.SIGINT)  # the stop in progress: its action, no second exception
                _send(signal.SIGTERM)
            raise
    assert ran == ["kill", "kill"] and caught.value.signum == signal.SIGINT


def test_a_second_signal_without_an_action_raises_the_first_interrupted_again():
    with pytest.raises(Interrupted) as caught, signals_raise_interrupted():
        try:
            _send(signal.SIGINT)
        except Interrupted as first:
            first.canceled_runs = ["r1"]
            _send(signal.SIGINT)  # stuck on the way up: stop at once, keeping what the first one learnt
    assert caught.value.repeated and caught.value.canceled_runs == ["r1"]


def test_handlers_are_restored_and_ignore_holds_until_then():
    before = signal.getsignal(signal.SIGTERM)
    with signals_raise_interrupted():
        ignore_stop_signals()
        _send(signal.SIGTERM)  # ignored: would end this process otherwise
        _send(signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_condition_left_held_by_an_unwound_wait_is_released_so_the_pool_can_shut_down():
    """An interrupt inside concurrent.futures.wait can leave a future's condition held by the main thread; the
    pool's manager thread would block on it when it sets the result, and the shutdown would wait forever."""
    import threading
    import time
    from concurrent.futures import ProcessPoolExecutor

    from corpus_dagster.defs.runner import _release_held_conditions

    pool = ProcessPoolExecutor(max_workers=1)
    fut = pool.submit(abs, -1)
    fut._condition.acquire()
    fut._condition.acquire()  # held twice, as a reentrant acquisition may leave it
    try:
        time.sleep(0.5)  # the worker has answered: the manager thread waits for the condition to set the result
        _release_held_conditions([fut])
        closer = threading.Thread(target=pool.shutdown, kwargs={"wait": True})
        closer.start()
        closer.join(30)
        assert not closer.is_alive() and fut.result() == 1
    finally:
        while fut._condition._is_owned():
            fut._condition.release()
