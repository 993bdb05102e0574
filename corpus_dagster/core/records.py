"""Stage records: one mechanism for every stage's cache key and the content hashes of its outputs.

A stage folder (`stages/<stage>/[<source_id>/]`) holds its outputs under a sub-folder named by the key
and a `_RECORD.json` written last. The key is the hash of
- the content hashes of the stage's inputs (sha256 of raw files, or the upstream stages' keys),
- the settings that change the stage's output bytes (one declaration per stage, see `output_settings`),
- the stage's code version.
Mtimes, ETags, paths and worker counts never enter a key. A rerun whose key equals the record's and whose
outputs are intact does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from corpus_dagster.core.atomic import atomic_write_bytes, remove_stale_temps
from corpus_dagster.core.config import canonical_json
from corpus_dagster.core.errors import StageOutputError, UpstreamMissing
from corpus_dagster.core.hashing import sha256_file, sha256_hex
from corpus_dagster.core.locks import hold_lock

RECORD = "_RECORD.json"
F = TypeVar("F", bound=Callable[..., Any])


def stage_key(stage: str, code_version: str, inputs: Any, settings: Any) -> str:
    """The cache key of one stage run: a hash of its input content, output-deciding settings and code version."""
    body = {"stage": stage, "code_version": code_version, "inputs": inputs, "settings": settings}
    return sha256_hex(canonical_json(body))[:16]


@dataclass
class StageRecord:
    """What a completed stage run wrote: its key, what the key was made of, its outputs and their hashes."""

    stage: str
    key: str
    code_version: str
    inputs: Any
    settings: Any
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # relative name -> {sha256, bytes}
    files: dict[str, list[str]] = field(default_factory=dict)  # named lists of outputs, e.g. docs, rejects
    stats: dict[str, Any] = field(default_factory=dict)
    # Where the outputs live, relative to the record's folder: "." for stage folders; published outputs
    # (shards, token streams) live at their contract paths and are named from there.
    output_dir: str = "."

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "key": self.key, "code_version": self.code_version, "inputs": self.inputs,
            "settings": self.settings, "output_dir": self.output_dir, "outputs": self.outputs, "files": self.files,
            "stats": self.stats,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StageRecord:
        names = ("stage", "key", "code_version", "inputs", "settings", "outputs", "files", "stats", "output_dir")
        return cls(**{k: data[k] for k in names})

    def base(self, folder: Path) -> Path:
        """The folder the output names are relative to."""
        return Path(folder) / self.output_dir


def read_record(folder: Path) -> StageRecord | None:
    """The record of a stage folder, or None when the stage never completed there."""
    path = Path(folder) / RECORD
    if not path.exists():
        return None
    try:
        return StageRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, KeyError, TypeError):
        return None  # a record from an older layout or a damaged one: the stage recomputes


def require_record(folder: Path, stage: str, source_id: str | None = None) -> StageRecord:
    """The record of a completed stage; UpstreamMissing naming the stage and source when there is none."""
    record = read_record(folder)
    if record is None:
        where = f" for source {source_id!r}" if source_id else ""
        what = f"{stage}[{source_id}]" if source_id else stage
        raise UpstreamMissing(f"stage {stage!r} has not completed{where} (no {Path(folder) / RECORD}); materialize {what}")
    return record


def describe_outputs(folder: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """{name: {sha256, bytes, mtime_ns}} of output files relative to `folder`, in the order given.

    `mtime_ns` only lets `outputs_intact` skip re-hashing a file nobody wrote to since; it never enters a key.
    """
    out = {}
    for n in names:
        st = (folder / n).stat()
        out[n] = {"sha256": sha256_file(folder / n), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    return out


def output_intact(path: Path, entry: dict[str, Any]) -> bool:
    """One output matches its record entry: same size, and same mtime or (when touched, copied or edited
    in place) the same sha256."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_size != entry["bytes"]:
        return False
    if entry.get("mtime_ns") == st.st_mtime_ns:
        return True
    return sha256_file(path) == entry["sha256"]


def outputs_intact(folder: Path, record: StageRecord) -> bool:
    """Every output the record lists exists with its recorded size and content (hashed only when its mtime
    moved since it was written), so a truncated, deleted or edited output makes its stage recompute."""
    return all(output_intact(record.base(folder) / name, entry) for name, entry in record.outputs.items())


def verify_outputs(folder: Path, record: StageRecord) -> list[str]:
    """Problems of outputs that do not match the hashes recorded when they were written."""
    problems = []
    for name, entry in record.outputs.items():
        path = record.base(folder) / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif sha256_file(path) != entry["sha256"]:
            problems.append(f"{path}: sha256 differs from the stage record")
    return problems


def cached(folder: Path, key: str) -> StageRecord | None:
    """The folder's record when it was written under `key` and its outputs are intact, else None."""
    record = read_record(folder)
    if record is not None and record.key == key and outputs_intact(folder, record):
        return record
    return None


def begin(folder: Path) -> int:
    """Prepare a stage folder for a run: create it, clear temp leftovers of a killed process in the folder
    and its key folders one level down (temp files, `.x.tmp-*` folders, dedup work folders), and delete
    outputs of the last record that no longer match it, so a stage that resumes completed units (clean
    parts) recomputes a damaged one instead of keeping it. Outputs outside the stage folder (published
    folders, replaced whole) are left alone. Returns how many leftovers and damaged files were removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    removed = remove_stale_temps(folder, depth=1)
    record = read_record(folder)
    if record is not None and record.output_dir == ".":
        for name, entry in record.outputs.items():
            path = folder / name
            if path.exists() and not output_intact(path, entry):
                path.unlink()
                removed += 1
    return removed


def commit(folder: Path, record: StageRecord, prune: bool = True) -> None:
    """Write the record last (atomically), then (with `prune`) remove output folders of older keys."""
    folder = Path(folder)
    atomic_write_bytes(folder / RECORD, (json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n").encode())
    for other in folder.iterdir() if prune else ():
        if other.is_dir() and other.name != record.key and not other.name.startswith(("_", ".")):
            shutil.rmtree(other, ignore_errors=True)


def record_files(folder: Path, record: StageRecord, kind: str) -> list[Path]:
    """Absolute paths of a named output list of a record (e.g. `docs`), checked against the record.

    A missing, truncated or edited file is never handed to the next stage: StageOutputError names it, and
    rerunning the stage that wrote it recomputes it (its cache check fails the same way).
    """
    names = record.files.get(kind, [])
    paths = [record.base(folder) / name for name in names]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise StageOutputError(f"stage {record.stage!r}: outputs missing on disk: {missing[:3]}; rerun that stage")
    damaged = [str(p) for p, n in zip(paths, names, strict=True) if n in record.outputs and not output_intact(p, record.outputs[n])]
    if damaged:
        raise StageOutputError(
            f"stage {record.stage!r}: {damaged[:3]} changed since the stage wrote them (size or sha256 differ from "
            f"{Path(folder) / RECORD}); rerun that stage to recompute them"
        )
    return paths


@contextlib.contextmanager
def stage_lock(root: Path, name: str, resolved: dict[str, Any], what: str | None = None) -> Iterator[None]:
    """Hold the exclusive lock of one stage unit (e.g. `clean.alpha`, `publish`) from its cache check to its
    record: a concurrent run on the same root waits, then finds the output cached and does nothing."""
    with hold_lock(root, name, what or name, timeout_s=float(resolved["locks"]["timeout_s"])):
        yield


def locked(unit: Callable[[dict[str, Any]], str]) -> Callable[[F], F]:
    """Run a stage entry function (arguments `layout` and `resolved`) under the lock of the unit it writes.

    `unit` names the unit from the call's arguments, e.g. `lambda a: f"clean.{a['source_id']}"`.
    """

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            name = unit(arguments)
            with stage_lock(arguments["layout"].root, name, arguments["resolved"], what=f"{fn.__name__} ({name})"):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
