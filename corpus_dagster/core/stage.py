"""One way to run a stage (or one unit of it, or several units computed together) under its content key:
cached -> skip, else begin, compute, commit, and a typed result either way.

Every driver states what its key is made of (`Stage.key`) and what its computation wrote (`Outputs`);
`run_cached` does the rest the same way for all of them, so "a rerun whose key is unchanged does nothing",
"temp leftovers of a killed run are cleared first" and "the record is written last" hold by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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


@dataclass(frozen=True)
class CachedUnit:
    """One unit of `run_cached_many`: the folder its record lives in, its stage, what its key is made of.

    `key` defaults to `stage.key(inputs, settings)`; `clear` are further folders `records.begin` prepares
    before a computation (e.g. the key's output folder); `needs` are files beside the record a cached run
    must still have.
    """

    folder: Path
    stage: Stage
    inputs: Any
    settings: Any
    key: str | None = None
    clear: Sequence[Path] = ()
    needs: Sequence[Path] = ()

    def resolved_key(self) -> str:
        return self.key if self.key is not None else self.stage.key(self.inputs, self.settings)


def is_current(folder: Path, key: str) -> bool:
    """Whether `folder` holds an intact record of `key` (what a stage asks of an upstream it may compute
    first, e.g. dedup of a source's signatures)."""
    return records.cached(Path(folder), key) is not None


def run_cached_many(
    units: Sequence[CachedUnit],
    compute_all: Callable[[list[tuple[int, str]]], Sequence[Outputs]],
    *,
    output_dir: str = ".",
    prune: bool = True,
) -> list[StageRun]:
    """`run_cached` for units computed together: one pool over all of them rather than one unit at a time.

    Each unit with an intact record of its key is returned as cached. Every other unit is begun (its folder
    and `clear` folders cleared of temp leftovers and damaged outputs), then `compute_all` runs once over all
    of them, given their (position in `units`, key) and returning their Outputs in that order, then each
    record is committed. If `compute_all` raises, no record is committed. Returns one StageRun per unit, in
    the order of `units`.
    """
    runs: list[StageRun | None] = [None] * len(units)
    pending: list[tuple[int, str]] = []
    for i, unit in enumerate(units):
        key = unit.resolved_key()
        done = records.cached(Path(unit.folder), key)
        if done is not None and all(Path(p).is_file() for p in unit.needs):
            runs[i] = StageRun(key, True, done)
        else:
            pending.append((i, key))
    for i, _ in pending:
        records.begin(Path(units[i].folder))
        for extra in units[i].clear:
            Path(extra).mkdir(parents=True, exist_ok=True)
            records.begin(extra)
    if pending:
        outputs = list(compute_all(pending))
        if len(outputs) != len(pending):
            raise ValueError(f"compute_all returned {len(outputs)} Outputs for {len(pending)} unit(s)")
        for (i, key), out in zip(pending, outputs, strict=True):
            unit = units[i]
            record = commit_outputs(unit.folder, unit.stage, key, unit.inputs, unit.settings, out,
                                    output_dir=output_dir, prune=prune)
            runs[i] = StageRun(key, False, record)
    return [run for run in runs if run is not None]


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
    needs: Iterable[Path] = (),
) -> StageRun:
    """Run `compute(key)` unless `folder` holds an intact record of the same key, then commit its record.

    - cached: the record is returned and nothing runs;
    - else `records.begin` clears temp leftovers and damaged outputs of `folder` and of each `clear` folder,
      `compute` writes its outputs atomically and says what it wrote, and the record is committed last.

    `key` defaults to `stage.key(inputs, settings)`; a caller that already computed it passes it.
    `output_dir` is where the outputs live relative to `folder` (published folders); `prune` removes key
    folders of older keys on commit. `needs` are files beside the record that a cached run must still have
    (a log of its work a check reads); when one is missing the stage runs again. The one-unit case of
    `run_cached_many`.
    """
    unit = CachedUnit(Path(folder), stage, inputs, settings, key, tuple(clear), tuple(needs))
    [run] = run_cached_many([unit], lambda pending: [compute(k) for _, k in pending], output_dir=output_dir,
                            prune=prune)
    return run


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

