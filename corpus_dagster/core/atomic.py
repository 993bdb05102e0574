"""Write-to-temp-then-rename helpers: a failed step never leaves a half-written file at the real path."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def temp_sibling(path: Path, suffix_keep: bool = True) -> Path:
    """A unique temp path beside `path`. Keeps the real suffix last (np.save appends `.npy` otherwise)."""
    tag = uuid.uuid4().hex[:12]
    if suffix_keep:
        suffixes = "".join(path.suffixes)
        stem = path.name[: len(path.name) - len(suffixes)] if suffixes else path.name
        return path.with_name(f".{stem}.tmp-{tag}{suffixes}")
    return path.with_name(f".{path.name}.tmp-{tag}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write; on success rename it onto `path`, on error delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
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
    """Yield a temp folder; on success it replaces `path` whole (old content removed), on error it is deleted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:12]}")
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_stale_temps(folder: str | Path) -> int:
    """Delete temp leftovers of a killed process (names `.x.tmp-*`, `.x.old-*`); returns how many."""
    folder = Path(folder)
    if not folder.exists():
        return 0
    n = 0
    for p in folder.iterdir():
        if p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            n += 1
    return n
