"""One way to hash a file or bytes: stage records, fetch checksums and checks all use it."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

BLOCK = 1 << 22
# A file changed less than this long before it was hashed is not memoized: file times come from a coarse
# clock (a jiffy on Linux, up to seconds on some network file systems), so a later in-place edit within the
# same tick could leave every stat field equal.
SETTLED_NS = 1_000_000_000

_MEMO: dict[tuple[int, int, int, int, int], str] = {}  # (dev, inode, size, mtime_ns, ctime_ns) -> sha256
_MEMO_GUARD = threading.Lock()


def sha256_file(path: str | Path) -> str:
    """Streaming SHA-256 (hex) of a file's bytes; memory stays at one block."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            h.update(block)
    return h.hexdigest()


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def sha256_file_once(path: str | Path, st: os.stat_result | None = None) -> str:
    """`sha256_file`, hashed at most once per process while the file stays as it was.

    A stage's cache check hashes its outputs and the stage that reads them next in the same process would
    hash them again; this remembers the digest by the file's device, inode, size, mtime and ctime (ctime
    moves on every write and on every `os.utime`, and cannot be set back), within this process only. A file
    that changed within SETTLED_NS of being hashed, or while it was hashed, is hashed again next time.
    """
    st = st or os.stat(path)
    ident = _identity(st)
    with _MEMO_GUARD:
        known = _MEMO.get(ident)
    if known is not None:
        return known
    started = time.time_ns()
    digest = sha256_file(path)
    try:
        after = os.stat(path)
    except OSError:
        return digest
    if _identity(after) == ident and started - st.st_ctime_ns > SETTLED_NS:
        with _MEMO_GUARD:
            _MEMO[ident] = digest
    return digest


def forget_hashes() -> None:
    """Drop every memoized file digest of this process (for a caller that hashes for a measurement)."""
    with _MEMO_GUARD:
        _MEMO.clear()


def sha256_hex(data: bytes) -> str:
    """SHA-256 (hex) of bytes."""
    return hashlib.sha256(data).hexdigest()
