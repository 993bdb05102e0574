"""One way to run a stage (or one unit of it) under its content key: cached -> skip, else begin, compute,
commit, and a typed result either way.

Every driver states what its key is made of (`Stage.key`) and what its computation wrote (`Outputs`);
`run_cached` does the rest the same way for all of them, so "a rerun whose key is unchanged does nothing",
"temp leftovers of a killed run are cleared first" and "the record is written last" hold by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_dagster.core import records
from corpus_dagster.core.records import StageRecord, stage_key


@dataclass(frozen=True)
class Stage:
    """A stage's identity in its cache keys: its name and the version of the code that writes its bytes."""

    name: str
    code_version: str

    def key(self, inputs: Any, settings: Any) -> str:
        """The cache key: a hash of the input content, the output-deciding settings and the code version."""
        return stage_key(self.name, self.code_version, inputs, settings)


@dataclass(frozen=True)
class Outputs:
    """What one computation wrote: output names relative to the record's output folder, the named lists
    readers ask for (e.g. `docs`), and the stats kept in the record."""

    names: list[str]
    files: dict[str, list[str]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StageRun:
    """The result of `run_cached`: the key, whether the run was skipped as cached, and the record."""

    key: str
    cached: bool
    record: StageRecord

    @property
    def stats(self) -> dict[str, Any]:
        return self.record.stats

    def summary(self) -> dict[str, Any]:
        """The record's stats with `cached` and `key`, the shape the Dagster layer reports."""
        return {**self.record.stats, "cached": self.cached, "key": self.key}


def run_cached(
    folder: Path,
    stage: Stage,
    inputs: Any,
    settings: Any,
    compute: Callable[[str], Outputs],
    *,
    key: str | None = None,
    clear: Iterable[Path] = (),
    output_dir: str = ".",
    prune: bool = True,
    on_cached: Callable[[StageRecord], None] | None = None,
    needs: Iterable[Path] = (),
) -> StageRun:
    """Run `compute(key)` unless `folder` holds an intact record of the same key, then commit its record.

    - cached: the record is returned and nothing runs (`on_cached` may still act on it, e.g. log);
    - else `records.begin` clears temp leftovers and damaged outputs of `folder` and of each `clear` folder,
      `compute` writes its outputs atomically and says what it wrote, and the record is committed last.

    `key` defaults to `stage.key(inputs, settings)`; a caller that already computed it passes it.
    `output_dir` is where the outputs live relative to `folder` (published folders); `prune` removes key
    folders of older keys on commit. `needs` are files beside the record that a cached run must still have
    (a log of its work a check reads); when one is missing the stage runs again.
    """
    key = key if key is not None else stage.key(inputs, settings)
    folder = Path(folder)
    done = records.cached(folder, key)
    if done is not None and all(Path(p).is_file() for p in needs):
        if on_cached is not None:
            on_cached(done)
        return StageRun(key, True, done)
    records.begin(folder)
    for extra in clear:
        Path(extra).mkdir(parents=True, exist_ok=True)
        records.begin(extra)
    out = compute(key)
    record = commit_outputs(folder, stage, key, inputs, settings, out, output_dir=output_dir, prune=prune)
    return StageRun(key, False, record)


def commit_outputs(
    folder: Path,
    stage: Stage,
    key: str,
    inputs: Any,
    settings: Any,
    out: Outputs,
    *,
    output_dir: str = ".",
    prune: bool = True,
    described: dict[str, dict[str, Any]] | None = None,
) -> StageRecord:
    """Commit the record of what a computation under `key` wrote: `run_cached`'s epilogue, and the one a
    finish step of units (which has its own prologue) ends with.

    `described` is `records.describe_outputs` of the outputs when the caller already hashed them.
    """
    folder = Path(folder)
    outputs = described if described is not None else records.describe_outputs(folder / output_dir, out.names)
    record = StageRecord(
        stage=stage.name, key=key, code_version=stage.code_version, inputs=inputs, settings=settings,
        outputs=outputs, files=out.files, stats=out.stats, output_dir=output_dir,
    )
    records.commit(folder, record, prune=prune)
    return record

