"""SIGINT and SIGTERM as one exception: the CLI unwinds, stops what it started, and exits 128 + the signal number.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be and lets SIGTERM kill the
process outright (no cleanup, no line). Inside `signals_raise_interrupted()` both raise `Interrupted` in the
main thread instead, once; a later signal runs the actions registered with `on_repeated_signal` at once (kill
the run processes) and, when none is registered, raises `Interrupted` again, so a second Ctrl-C never waits
for a graceful stop.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A stop signal reached the process. A BaseException, as KeyboardInterrupt is: `except Exception` blocks
    that turn errors into one-line messages must not take a stop for a failure."""

    def __init__(self, signum: int, repeated: bool = False):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.repeated = repeated
        self.canceled_runs: list[str] = []  # filled in by whoever stops the runs on the way up

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


_REPEATED: list[Callable[[], None]] = []


@contextlib.contextmanager
def signals_raise_interrupted(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """While the body runs, the first of `signals` raises Interrupted in the main thread; each later one runs
    the `on_repeated_signal` actions (or raises Interrupted again when there are none). Outside the main thread
    (where Python allows no signal handler) the body runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[Interrupted] = []

    def handle(signum: int, _frame: FrameType | None) -> None:
        if not first:
            first.append(Interrupted(signum))
            raise first[0]
        if _REPEATED:
            for action in list(_REPEATED):
                action()
            return
        first[0].repeated = True
        raise first[0]  # the same one: what it learnt on the way up (the runs it canceled) stays with it

    saved = {s: signal.getsignal(s) for s in signals}
    for s in signals:
        signal.signal(s, handle)
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)


@contextlib.contextmanager
def ignore_stop_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
    """From now on the stop signals do nothing (the stop is handled: its one line is being written); the
    enclosing `signals_raise_interrupted` restores the previous handlers when it ends."""
    if threading.current_thread() is threading.main_thread():
        for s in signals:
            signal.signal(s, signal.SIG_IGN)


@contextlib.contextmanager
def on_repeated_signal(action: Callable[[], None]) -> Iterator[None]:
    """Run `action` (quick, and safe to run more than once) when another stop signal comes while the body runs."""
    _REPEATED.append(action)
    try:
        yield
    finally:
        _REPEATED.remove(action)
