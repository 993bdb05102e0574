"""Progress lines for long steps: documents, MB, rate and ETA every `progress.interval_s` seconds.

A stage driver makes a `Progress` with the run's `log` callable (Dagster's `context.log.info`, or print) and
calls `update` as work completes; `heartbeat` covers a step whose inner loop reports nothing, so the run log
still says it is alive and for how long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Log = Callable[[str], Any]


def interval_of(resolved: dict[str, Any]) -> float:
    """The configured progress interval in seconds (`progress.interval_s`)."""
    return float(resolved.get("progress", {}).get("interval_s", 10.0))


class Progress:
    """Counts documents and bytes of one step and logs a line at most every `interval_s` seconds."""

    def __init__(self, log: Log | None, step: str, total_docs: int | None = None, total_bytes: int | None = None,
                 interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.log, self.step, self.total_docs, self.total_bytes = log, step, total_docs, total_bytes
        self.interval_s, self.clock = interval_s, clock
        self.start = self.last = clock()
        self.docs = 0
        self.bytes = 0

    def update(self, docs: int = 0, n_bytes: int = 0) -> None:
        """Add finished work; log when the interval has passed."""
        self.docs += docs
        self.bytes += n_bytes
        now = self.clock()
        if self.log is not None and now - self.last >= self.interval_s:
            self.last = now
            self.log(self.line(now))

    def line(self, now: float | None = None) -> str:
        """`<step>: 1,200/10,000 documents (12%), 4.5 MB, 300 docs/s, 1.1 MB/s, ETA 29 s`."""
        elapsed = max((now if now is not None else self.clock()) - self.start, 1e-9)
        done = f"{self.docs:,}" + (f"/{self.total_docs:,}" if self.total_docs else "") + " documents"
        if self.total_docs:
            done += f" ({100 * self.docs / self.total_docs:.0f}%)"
        rate = self.docs / elapsed
        text = f"{self.step}: {done}, {self.bytes / 1e6:.1f} MB, {rate:,.0f} docs/s, {self.bytes / 1e6 / elapsed:.1f} MB/s"
        eta = self.eta(elapsed)
        return text + (f", ETA {eta:.0f} s" if eta is not None else "") + f", {elapsed:.0f} s elapsed"

    def eta(self, elapsed: float) -> float | None:
        """Seconds left, from the documents (else bytes) share done so far; None when unknown."""
        for done, total in ((self.docs, self.total_docs), (self.bytes, self.total_bytes)):
            if total and done:
                return elapsed * (total - done) / done
        return None

    def finish(self) -> None:
        """The closing line (always logged)."""
        if self.log is not None:
            self.log(self.line() + " - done")


@contextmanager
def heartbeat(log: Log | None, step: str, interval_s: float, what: str = "") -> Iterator[None]:
    """Log `<step>: running, N s elapsed (what)` every interval while the block runs (a daemon thread)."""
    if log is None:
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(interval_s):
            log(f"{step}: running, {time.monotonic() - start:.0f} s elapsed" + (f" ({what})" if what else ""))

    thread = threading.Thread(target=beat, name=f"progress-{step}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1)
