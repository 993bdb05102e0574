"""The CLI's log file, guarded: a disk that refuses a write ends the run with one line, never a traceback.

The log usually sits under the artifacts root, on the same file system as the outputs: when that fills up, the
log is the first thing to fail and the last thing that could report it. A refused write is remembered (which
file, during which step, why), writing stops, and the CLI reports it as a failed step (exit 3).
"""

from __future__ import annotations

import io
from pathlib import Path

from corpus_dagster.core.atomic import WriteError, storage_error

SQLITE_FULL = "database or disk is full"  # SQLite's words for ENOSPC; it reports no errno


class GuardedLog(io.TextIOBase):
    """A text log that records its first storage error instead of raising it; `step` says what was being logged."""

    def __init__(self, path: Path):
        self.path = path
        self.step = "start-up"
        self.failure: WriteError | None = None
        self.failed_during = ""
        self._fh = path.open("a", encoding="utf-8")

    def _refused(self, exc: OSError) -> None:
        error = storage_error(exc, self.path)
        if error is None:
            raise exc
        if self.failure is None:
            self.failure, self.failed_during = error, self.step

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                self._fh.write(text)
            except OSError as exc:
                self._refused(exc)
        return len(text)

    def flush(self) -> None:
        if self.failure is None and not self._fh.closed:
            try:
                self._fh.flush()
            except OSError as exc:
                self._refused(exc)

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError as exc:  # the buffered tail could not be written
            self._refused(exc)
        super().close()

    def writable(self) -> bool:
        return True

    def message(self) -> str:
        """One line for the console: the step during which the log stopped, and the file."""
        reason = self.failure.reason if self.failure else ""
        return (f"{self.failed_during}: cannot write the log file {self.path}: {reason}; it stops there. Free space "
                f"on the file system holding it and rerun: completed stages are kept")


def disk_full_message(exc: BaseException, dagster_home: str | None) -> str | None:
    """One line for a storage error that escaped every step (the instance's SQLite files, a folder the CLI makes),
    or None when `exc` is not one."""
    if isinstance(exc, OSError):
        error = storage_error(exc)
        return str(error) if error is not None else None
    if SQLITE_FULL in str(exc):
        where = f"the Dagster instance in {dagster_home}" if dagster_home else "the Dagster instance"
        return (f"cannot write {where}: the database or the disk is full; free space on the file system holding it "
                f"and rerun: completed stages are kept")
    return None


RUN_LOG_GLOB = "run-*.log"  # what `cli.run.default_log_file` names its logs


def prune_run_logs(folder: Path, keep: int, current: Path | None = None) -> list[Path]:
    """Remove the CLI's run logs in `folder` (the artifacts root's `logs/`) but the newest `keep` (`paths.keep_run_logs`);
    the log of the run going on is always kept. Names carry the UTC start time, so name order is time order.
    Returns the logs removed (with an artifacts store, the next push removes them there)."""
    logs = sorted((p for p in folder.glob(RUN_LOG_GLOB) if p.is_file()), key=lambda p: p.name, reverse=True)
    kept = 1 if current is not None and current in logs else 0
    removed = []
    for path in logs:
        if path == current:
            continue
        if kept < keep:
            kept += 1
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
