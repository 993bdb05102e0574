"""Stage records: one mechanism for every stage's cache key and the content hashes of its outputs.

A stage folder (`stages/<stage>/[<source_id>/]`) holds its outputs under a sub-folder named by the key
and a `_RECORD.json` written last. The key is the hash of
- the content hashes of the stage's inputs (sha256 of raw files, or the upstream stages' keys),
- the settings that change the stage's output bytes (one declaration per stage, see `output_settings`),
- the stage's code version.
Mtimes, ETags, paths and worker counts never enter a key. A rerun whose key equals the record's and whose
outputs are intact does nothing.

"Intact" means every output has the size and sha256 the record holds, hashed again on every reuse (the
stage's own cache check, `begin`, and every reader through `record_files`): an edit that keeps size and
mtime, or bits flipped on disk, is never trusted. A damaged output is named in one warning line on the
`corpus_dagster.records` logger (the Dagster layer forwards it to the run's log) and recomputed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from corpus_dagster.core.atomic import atomic_write_bytes, remove_stale_temps
from corpus_dagster.core.config import canonical_json
from corpus_dagster.core.errors import StageOutputDamaged, UpstreamMissing
from corpus_dagster.core.hashing import sha256_file_once, sha256_hex
from corpus_dagster.core.locks import hold_lock
from corpus_dagster.core.settings import Settings

RECORD = "_RECORD.json"
F = TypeVar("F", bound=Callable[..., Any])
# Where a damaged output is reported: one warning line each. The Dagster layer (defs.resources) forwards
# this logger's lines to the log of the step that emitted them; outside Dagster they reach Python logging.
LOG = logging.getLogger("corpus_dagster.records")
# The asset that rebuilds a stage's outputs, named in messages ("materialize clean_documents[alpha]").
ASSETS = {
    "ingest": "raw_documents", "clean": "clean_documents", "minhash": "minhash_signatures", "dedup": "dedup",
    "scrub": "scrubbed", "publish": "shards", "tokens": "token_streams", "analysis": "corpus_analysis",
    "release": "release", "review": "review_sample",
}
_reported: set[tuple[str, int, int, int, int]] = set()  # damage already reported in this process
_reported_guard = threading.Lock()


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
    """{name: {sha256, bytes}} of output files relative to `folder`, in the order given.

    No mtime: a file is trusted only by its size and sha256, and a record is a function of the content it
    describes, so two builds of the same bytes write the same record.
    """
    out = {}
    for n in names:
        st = (folder / n).stat()
        out[n] = {"sha256": sha256_file_once(folder / n, st), "bytes": st.st_size}
    return out


def output_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """Why one output does not match its record entry (missing, another size, another sha256), or None.

    Hashes the file (once per process while it stays unchanged, see `sha256_file_once`); its mtime
    decides nothing, so an edit that kept size and mtime is caught.
    """
    try:
        st = path.stat()
    except OSError:
        return f"missing (listed in its {RECORD})"
    if st.st_size != entry["bytes"]:
        return f"{st.st_size} bytes, its {RECORD} says {entry['bytes']}"
    if sha256_file_once(path, st) != entry["sha256"]:
        return f"sha256 differs from its {RECORD}"
    return None


def output_intact(path: Path, entry: dict[str, Any]) -> bool:
    """One output matches its record entry: same size and same sha256."""
    return output_problem(path, entry) is None


def damaged_outputs(folder: Path, record: StageRecord, names: list[str] | None = None) -> list[tuple[Path, str]]:
    """(path, problem) of every output (of `names`, default all the record lists) that does not match it."""
    base = record.base(folder)
    out = []
    for name in record.outputs if names is None else names:
        entry = record.outputs.get(name)
        if entry is None:
            if not (base / name).exists():
                out.append((base / name, f"missing (listed in its {RECORD})"))
            continue
        problem = output_problem(base / name, entry)
        if problem is not None:
            out.append((base / name, problem))
    return out


def outputs_intact(folder: Path, record: StageRecord) -> bool:
    """Every output the record lists exists with its recorded size and sha256, so a truncated, deleted or
    edited output (whatever its mtime) makes its stage recompute."""
    return not damaged_outputs(folder, record)


def verify_outputs(folder: Path, record: StageRecord) -> list[str]:
    """Problems of outputs that do not match the hashes recorded when they were written."""
    return [f"{path}: {problem}" for path, problem in damaged_outputs(folder, record)]


def source_of(folder: Path, record: StageRecord) -> str | None:
    """The source a per-source stage folder belongs to (`stages/<stage>/<source_id>`, `corpus/raw/<source_id>`)."""
    name = Path(folder).name
    return None if name == record.stage else name


def _shown(path: Path, folder: Path) -> str:
    """A path relative to the artifacts root the stage folder lies in (absolute when it lies elsewhere)."""
    folder = Path(folder)
    parents = [folder, *folder.parents]
    root = next((p.parent for p in parents[:3] if p.name == "stages"), None)
    if root is None and folder.parent.name == "raw" and folder.parent.parent.name == "corpus":
        root = folder.parent.parent.parent
    full = os.path.normpath(path)
    if root is not None:
        rel = os.path.relpath(full, root)
        if not rel.startswith(".."):
            return rel
    return full


def _where(folder: Path, record: StageRecord) -> str:
    source = source_of(folder, record)
    return f"stage {record.stage!r}" + (f" [{source}]" if source else "")


def _rerun(folder: Path, record: StageRecord) -> str:
    source = source_of(folder, record)
    asset = ASSETS.get(record.stage, record.stage)
    return f"materialize {asset}[{source}]" if source else f"materialize {asset}"


def _missing_ident(path: Path) -> tuple[str, int, int, int, int]:
    """How report_damage knows a file that is gone (a damaged one begin removed, a missing one)."""
    return (os.path.normpath(path), 0, 0, 0, 0)


def _damage_state(problem: str) -> str:
    """`missing (listed in its _RECORD.json)` or `damaged (<why>)`: what follows "is" in a damage line."""
    return problem if problem.startswith("missing") else f"damaged ({problem})"


def damage_line(folder: Path, record: StageRecord, path: Path, problem: str, then: str = "rebuilding it") -> str:
    """The one line that names a damaged output: stage, source, file (relative to the artifacts root), why."""
    return f"{_where(folder, record)}: {_shown(path, folder)} is {_damage_state(problem)}; {then}"


def report_damage(folder: Path, record: StageRecord, damaged: list[tuple[Path, str]], then: str = "rebuilding it") -> list[str]:
    """Log one warning line per damaged output, once per process for a file in one state; returns the lines."""
    lines = []
    for path, problem in damaged:
        try:
            st = path.stat()
            ident = (os.path.normpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            ident = _missing_ident(path)
        with _reported_guard:
            new = ident not in _reported
            _reported.add(ident)
        line = damage_line(folder, record, path, problem, then)
        lines.append(line)
        if new:
            LOG.warning(line)
    return lines


def cached(folder: Path, key: str) -> StageRecord | None:
    """The folder's record when it was written under `key` and its outputs are intact (size and sha256),
    else None. A damaged output is reported (one line naming the stage, source and file) before the miss."""
    record = read_record(folder)
    if record is None or record.key != key:
        return None
    damaged = damaged_outputs(folder, record)
    if damaged:
        report_damage(folder, record, damaged)
        return None
    return record


def begin(folder: Path) -> int:
    """Prepare a stage folder for a run: create it, clear temp leftovers of a killed process in the folder
    and its key folders one level down (temp files, `.x.tmp-*` folders, dedup work folders), and delete
    outputs of the last record that no longer match it (size or sha256), so a stage that resumes completed
    units (clean parts) recomputes a damaged one instead of keeping it. Outputs outside the stage folder
    (published folders, replaced whole) are left alone. Returns how many leftovers and damaged files were
    removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    removed = remove_stale_temps(folder, depth=1)
    record = read_record(folder)
    if record is not None and record.output_dir == ".":
        damaged = [(p, why) for p, why in damaged_outputs(folder, record) if p.exists()]
        report_damage(folder, record, damaged)
        for path, _ in damaged:
            path.unlink()
            removed += 1
            with _reported_guard:  # said once as damaged: the cache check that follows finds it missing
                _reported.add(_missing_ident(path))
    return removed


def commit(folder: Path, record: StageRecord, prune: bool = True) -> None:
    """Write the record last (atomically), then (with `prune`) remove output folders of older keys."""
    folder = Path(folder)
    atomic_write_bytes(folder / RECORD, (json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n").encode())
    for other in folder.iterdir() if prune else ():
        if other.is_dir() and other.name != record.key and not other.name.startswith(("_", ".")):
            shutil.rmtree(other, ignore_errors=True)


def record_files(folder: Path, record: StageRecord, kind: str, rebuild: Callable[[], Any] | None = None) -> list[Path]:
    """Absolute paths of a named output list of a record (e.g. `docs`), each checked against the size and
    sha256 the record holds.

    A missing, truncated or edited file is never handed to the next stage. With `rebuild` (the writing
    stage's driver, deterministic under the same key) the damage is reported, the stage rebuilt and its
    files checked again; without it, or when the rebuild did not restore them under the same key,
    StageOutputDamaged names the stage, the file and what reruns it.
    """
    names = record.files.get(kind, [])
    damaged = damaged_outputs(folder, record, names)
    if damaged and rebuild is not None:
        report_damage(folder, record, damaged)
        rebuild()
        again = read_record(folder)
        if again is not None and again.key == record.key:
            record, damaged = again, damaged_outputs(folder, again, again.files.get(kind, []))
    if damaged:
        path, problem = damaged[0]
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        raise StageOutputDamaged(
            f"{_where(folder, record)}: {os.path.normpath(path)} is {_damage_state(problem)}{more}; rerun that stage "
            f"({_rerun(folder, record)}) to rebuild it"
        )
    return [record.base(folder) / name for name in names]


@contextlib.contextmanager
def stage_lock(root: Path, name: str, settings: Settings, what: str | None = None) -> Iterator[None]:
    """Hold the exclusive lock of one stage unit (e.g. `clean.alpha`, `publish`) from its cache check to its
    record: a concurrent run on the same root waits, then finds the output cached and does nothing."""
    with hold_lock(root, name, what or name, timeout_s=float(settings.locks.timeout_s)):
        yield


def locked(unit: Callable[[dict[str, Any]], str]) -> Callable[[F], F]:
    """Run a stage entry function (arguments `layout` and `settings`) under the lock of the unit it writes.

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
            with stage_lock(arguments["layout"].root, name, arguments["settings"], what=f"{fn.__name__} ({name})"):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
