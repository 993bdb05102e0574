"""Write-to-temp-then-rename helpers: a failed step never leaves a half-written file at the real path."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_dagster.core.errors import CorpusError


def temp_sibling(path: Path, suffix_keep: bool = True) -> Path:
    """A unique temp path beside `path`. Keeps the real suffix last (np.save appends `.npy` otherwise)."""
    tag = uuid.uuid4().hex[:12]
    if suffix_keep:
        suffixes = "".join(path.suffixes)
        stem = path.name[: len(path.name) - len(suffixes)] if suffixes else path.name
        return path.with_name(f".{stem}.tmp-{tag}{suffixes}")
    return path.with_name(f".{path.name}.tmp-{tag}")


class WriteError(CorpusError):
    """An output could not be written for lack of room or a read-only or failing disk; names the path."""

    def __init__(self, message: str, path: Path | None = None, reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason  # the OS's words (e.g. "No space left on device"), for callers that word their own line


STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
STORAGE_MESSAGES = ("No space left on device", "Disk quota exceeded", "Read-only file system", "File too large")
# numpy's array writer (np.save, ndarray.tofile) reports a short write on a full disk as
# "OSError: 1472 requested and 1008 written", with no errno.
SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


UNNAMED = Path("(a file the writer did not name)")


def storage_error(exc: BaseException, path: Path | None = None) -> WriteError | None:
    """A WriteError naming `path` when `exc` says the disk is full, read-only or failing, else None.

    Without `path`, the file the OS named in `exc` (a failed `open`), else UNNAMED (a failed `write` names
    none). Arrow and zstd report these as OSError subclasses with the errno only in the message, so both are
    read.
    """
    if not isinstance(exc, OSError):
        return None
    if path is None:
        path = Path(exc.filename) if exc.filename else UNNAMED
    text = str(exc)
    short_write = exc.errno is None and bool(SHORT_WRITE.match(text))
    if exc.errno not in STORAGE_ERRNOS and not any(m in text for m in STORAGE_MESSAGES) and not short_write:
        return None
    if short_write:
        reason = f"short write ({text}): the disk is probably full"
    else:
        reason = os.strerror(exc.errno) if exc.errno in STORAGE_ERRNOS else text.splitlines()[0] if text else type(exc).__name__
    return WriteError(
        f"cannot write {path}: {reason}; free space on (or fix) the file system holding it and rerun: "
        f"completed stages are kept, the half-written file was removed",
        path=path, reason=reason,
    )


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write; on success rename it onto `path`, on error delete it.

    A full, read-only or failing disk becomes a WriteError naming `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        error = storage_error(exc, path)
        if error is not None:
            raise error from exc
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write bytes to `path` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temp folder; on success it replaces `path` whole (old content removed), on error it is deleted.

    Readers never see `path` missing: an existing folder is swapped with the new one in one step
    (`exchange_dirs`), and the old content, now under the temp name, is removed afterwards (or by the next
    `remove_stale_temps` when the process dies in between).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    tmp.mkdir()
    try:
        yield tmp
        replace_dir(tmp, path)
    except OSError as exc:
        error = storage_error(exc, path)
        if error is not None:
            raise error from exc
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_dir(new: Path, path: Path) -> None:
    """Put folder `new` at `path`. An existing `path` ends up at `new` (the caller removes it).

    On Linux the swap is one `renameat2(RENAME_EXCHANGE)`: `path` exists at every instant. Where that call
    is missing (other systems, or file systems that refuse it, e.g. some network and FUSE mounts) it falls
    back to two renames, `path` -> `.<name>.old-*` then `new` -> `path`, with a short window without `path`.
    """
    if not path.exists():
        os.replace(new, path)
        return
    if exchange_dirs(new, path):
        return
    old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:12]}")
    os.replace(path, old)
    os.replace(new, path)
    os.replace(old, new)  # hand the old content back under the temp name, for the caller to remove


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2: Any = None


def exchange_dirs(a: str | Path, b: str | Path) -> bool:
    """Swap two paths atomically with Linux `renameat2(RENAME_EXCHANGE)`; False where that is unavailable."""
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.renameat2
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
                fn.restype = ctypes.c_int
                _renameat2 = fn
    if not _renameat2:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # the file system cannot exchange: use the rename pair
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}", str(b))


# Work folders that are not `.x.tmp-*` names but are equally temp leftovers when a process dies.
WORK_PREFIXES = (".dedup-work-", ".corpus-rebuild-")


def is_temp_name(name: str) -> bool:
    """Whether a file or folder name is a temp leftover: `.x.tmp-*`, `.x.old-*` or a known work folder."""
    return name.startswith(".") and (".tmp-" in name or ".old-" in name or name.startswith(WORK_PREFIXES))


def remove_stale_temps(folder: str | Path, depth: int = 0) -> int:
    """Delete temp leftovers of a killed process in `folder` (and `depth` levels of sub-folders below it).

    Only call this while holding the stage's lock (`core.locks`): a concurrent writer's temps look the same.
    Returns how many were removed.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    n = 0
    for p in sorted(folder.iterdir()):
        if is_temp_name(p.name):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            n += 1
        elif depth > 0 and p.is_dir() and not p.is_symlink():
            n += remove_stale_temps(p, depth - 1)
    return n
