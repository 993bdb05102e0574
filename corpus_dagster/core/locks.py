"""Exclusive locks on an artifacts root, so two runs never write the same stage folder at once.

A lock is `fcntl.flock` on `<root>/.locks/<name>.lock`. The kernel releases it when its holder exits,
however it exits (SIGKILL, OOM kill, power loss of the process): a stale lock never needs deleting by hand.
The file holds who has the lock (pid, host, what, since), so a run that gives up can say whom it waited for.

flock works across processes on one machine and on local file systems; on NFS it is emulated with POSIX
record locks (Linux >= 2.6.12) and holds across client machines only where the server supports locking.

A lock is re-entrant within one thread (a step that calls another stage's driver may take that stage's lock
again); other threads and processes wait.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_dagster.core.errors import CorpusError

LOCK_DIR = ".locks"
POLL_S = 0.2  # how often a waiting process retries; waiting costs no CPU in between


class LockTimeout(CorpusError):
    """Another run holds a lock on the artifacts root longer than we were willing to wait; names the holder."""

    def __init__(self, path: Path, holder: dict[str, Any], waited_s: float):
        self.path = path
        self.holder = holder
        who = (
            f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} ({holder.get('what', '?')}, "
            f"since {holder.get('since', '?')})"
            if holder
            else "a process that has not written its name yet"
        )
        super().__init__(
            f"lock {path} is held by {who}; gave up after {waited_s:.0f} s. Another run is writing this artifacts "
            f"root: wait for it to finish (the lock frees itself when that process exits), or stop it"
        )


_held: dict[tuple[str, int], list[Any]] = {}  # (lock path, thread id) -> [fd, depth]
_held_guard = threading.Lock()


def lock_path(root: str | Path, name: str) -> Path:
    """`<root>/.locks/<name>.lock`, with characters outside [A-Za-z0-9._-] in `name` replaced by `_`."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "_"
    return Path(root) / LOCK_DIR / f"{safe}.lock"


def read_holder(path: str | Path) -> dict[str, Any]:
    """Who holds (or last held) a lock, from its file; {} when unknown."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def hold_lock(root: str | Path, name: str, what: str, timeout_s: float) -> Iterator[Path]:
    """Hold the exclusive lock `name` on the artifacts `root` for the body; wait up to `timeout_s` for it.

    `what` says what the holder does (e.g. "clean[alpha] in run 1a2b"), shown to whoever waits. Raises
    LockTimeout naming the holder after `timeout_s` seconds (0: do not wait). Yields the lock file path.
    """
    path = lock_path(root, name)
    slot = (str(path), threading.get_ident())
    with _held_guard:
        mine = _held.get(slot)
        if mine is not None:
            mine[1] += 1
    if mine is not None:
        try:
            yield path
        finally:
            with _held_guard:
                mine[1] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _acquire(fd, path, timeout_s)
        since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "since": since}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        with _held_guard:
            _held[slot] = [fd, 1]
        try:
            yield path
        finally:
            with _held_guard:
                del _held[slot]
            os.ftruncate(fd, 0)  # while still holding it: the next holder writes its own name
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_is_held(path: str | Path) -> bool:
    """Whether a live process holds the lock file at `path` (a non-blocking probe; a missing file is free).

    The kernel frees a lock when its holder exits however it exits, so a free lock whose file still names a
    holder means that holder died without cleaning up."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, timeout_s: float) -> None:
    start = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise OSError(exc.errno, f"cannot lock {path}: {exc.strerror}", str(path)) from exc
        waited = time.monotonic() - start
        if waited >= timeout_s:
            raise LockTimeout(path, read_holder(path), waited)
        time.sleep(min(POLL_S, max(timeout_s - waited, 0.01)))
