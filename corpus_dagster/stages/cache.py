"""Keys and records for cached per-source stage outputs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from corpus_dagster import __version__
from corpus_dagster.atomic import atomic_write_bytes
from corpus_dagster.config import canonical_json
from corpus_dagster.store import CURRENT, read_current


def cache_key(*parts: Any) -> str:
    """A short stable key of JSON-able inputs and the code version."""
    return hashlib.sha256(canonical_json([__version__, *parts])).hexdigest()[:16]


def current_key(folder: Path) -> str | None:
    """The key of a stage folder's completed output, if any."""
    record = read_current(folder)
    return record.get("key") if record else None


def write_current(folder: Path, record: dict[str, Any]) -> None:
    """Commit a stage folder's output record and remove outputs of older keys."""
    atomic_write_bytes(folder / CURRENT, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    for other in folder.iterdir():
        if other.is_dir() and other.name != record["key"] and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
