"""One way to hash a file or bytes: stage records, fetch checksums and checks all use it."""

from __future__ import annotations

import hashlib
from pathlib import Path

BLOCK = 1 << 22


def sha256_file(path: str | Path) -> str:
    """Streaming SHA-256 (hex) of a file's bytes; memory stays at one block."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            h.update(block)
    return h.hexdigest()


def sha256_hex(data: bytes) -> str:
    """SHA-256 (hex) of bytes."""
    return hashlib.sha256(data).hexdigest()
