"""Units: the independent pieces a global stage splits into, so any executor can run them anywhere.

A global stage with units is one `UnitStage` object (dedup, publish, tokenize each have one): the same object
serves the in-process run (`run_stage`: units through a process pool of `workers`) and the Dagster graph
(`defs.units`: groups of units over executor steps). Neither changes a byte of output. A stage says

- `key(layout, settings)`: its content key;
- `plan(layout, settings, key, log)`: on a cache miss, prepare the shared inputs of the units under the
  artifacts root and name the units (sorted, stable names); a stage with several unit phases (`phases`)
  plans each later one in `plan_next(layout, settings, plan, log)`;
- `run_unit(layout, settings, key, unit)`: read and write only under the artifacts root, keyed by the stage
  key, atomically and idempotently (a unit whose output is already there and intact does nothing), so a
  unit can run in any process on any machine that mounts the artifacts root, and a killed run redoes only
  unfinished units;
- `finish(layout, settings, plan, log)`: merge the units' outputs in unit order (never completion order)
  and commit the stage record; `reuse(layout, settings, key, record)` is the result of a stage already built.

This module owns the cache prologue every entry starts with (`plan_stage`, `plan_next_stage`,
`run_stage_unit`, `finish_stage`: is the stage recorded under this key with intact outputs?) and the stage
lock around the plan and finish, so a stage writes none of it. The plan, the units' outputs and their
done-markers live in one work folder per key (`core.work.WorkFolder`).
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from corpus_dagster.core import records
from corpus_dagster.core.atomic import is_temp_name
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.progress import Log, heartbeat, interval_of
from corpus_dagster.core.storage import push_all

if TYPE_CHECKING:
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.records import StageRecord
    from corpus_dagster.core.settings import Settings

R = TypeVar("R")


@dataclass(frozen=True)
class Plan:
    """What a plan step decided: the stage key, whether the stage is already built under it (`cached`: no
    units), the units still to run, and plain JSON facts (`info`) the later steps report."""

    key: str
    units: tuple[str, ...] = ()
    cached: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The plan as the plain JSON a step hands the next (schemas/step-value.schema.json)."""
        return {"key": self.key, "units": list(self.units), "cached": self.cached, "info": dict(self.info)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        return cls(str(data["key"]), tuple(data["units"]), bool(data["cached"]), dict(data["info"]))


class UnitStage(ABC, Generic[R]):
    """One global stage split into units; `R` is its typed result (a frozen dataclass with `key` and `cached`).

    Subclasses state the class attributes and the abstract methods; the entries of this module run them with
    the cache prologue and the lock. A stage object must pickle (a pool runs its `run_unit` in other
    processes): a plain frozen dataclass or a class without state.
    """

    #: the name steps and messages use (`dedup`, `shards`, `token_streams`)
    name: ClassVar[str]
    #: the stage lock its plan and finish hold (`records.stage_lock`)
    lock: ClassVar[str]
    #: the unit phases in order: one group of unit steps each, every phase after the first planned by `plan_next`
    phases: ClassVar[tuple[str, ...]] = ("units",)

    @abstractmethod
    def folder(self, layout: Layout) -> Path:
        """The folder of the stage record (what the cache prologue checks)."""

    @abstractmethod
    def key(self, layout: Layout, settings: Settings) -> str:
        """The stage key of the current inputs and settings."""

    @abstractmethod
    def plan(self, layout: Layout, settings: Settings, key: str, log: Log | None) -> Plan:
        """The first phase's units of `key` (the stage is not built under it); prepares what they read."""

    def plan_next(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> Plan:
        """The next phase's units, after every unit of `plan` ran (stages with one phase have none)."""
        raise NotImplementedError(f"{self.name} has one unit phase")

    @abstractmethod
    def run_unit(self, layout: Layout, settings: Settings, key: str, unit: str) -> None:
        """Run one unit of `key`: writes only the unit's own files, atomically; a unit already done does nothing."""

    @abstractmethod
    def finish(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> R:
        """After every unit: merge their outputs in unit order, commit the stage record; the result."""

    @abstractmethod
    def reuse(self, layout: Layout, settings: Settings, key: str, record: StageRecord) -> R:
        """The result of the stage already built under `key` (its `record`), after removing what a build of
        it may have left (work folders). Called by every step that finds the stage built."""

    def local_workers(self, settings: Settings, plan: Plan) -> tuple[int, Settings]:
        """In one process (`run_stage`): how many pool processes run a phase's units, and the settings they get."""
        return settings.workers, settings

    def doing(self, layout: Layout, settings: Settings) -> str:
        """What the heartbeat of an in-process run names (e.g. how many documents)."""
        return ""


@contextmanager
def _locked(stage: UnitStage[Any], layout: Layout, settings: Settings, step: str) -> Iterator[None]:
    with records.stage_lock(layout.root, stage.lock, settings, what=f"{stage.name} {step}"):
        yield


def plan_stage(stage: UnitStage[Any], layout: Layout, settings: Settings, log: Log | None = None) -> Plan:
    """The plan step: the key, and either `cached` (the stage is built under it: no units) or its first units."""
    with _locked(stage, layout, settings, "plan"):
        key = stage.key(layout, settings)
        record = records.cached(stage.folder(layout), key)
        if record is not None:
            stage.reuse(layout, settings, key, record)
            return Plan(key, cached=True)
        return stage.plan(layout, settings, key, log)


def plan_next_stage(stage: UnitStage[Any], layout: Layout, settings: Settings, plan: Plan,
                    log: Log | None = None) -> Plan:
    """The plan of the next unit phase (its `info` added to the previous plan's); `cached` when the stage
    was built meanwhile (another run of this key finished and removed the work folder)."""
    if plan.cached:
        return plan
    with _locked(stage, layout, settings, "plan_next"):
        if records.cached(stage.folder(layout), plan.key) is not None:
            return Plan(plan.key, cached=True, info=plan.info)
        nxt = stage.plan_next(layout, settings, plan, log)
    return replace(nxt, info={**plan.info, **nxt.info})


def run_stage_unit(stage: UnitStage[Any], layout: Layout, settings: Settings, key: str, unit: str) -> None:
    """Run one unit. Takes no lock: outputs are keyed. When it fails because its work folder is gone or
    incomplete and the stage is meanwhile built under the same key, there is nothing left to do: two runs of
    one key share the work folder, the first to finish removes it, and the other run's units (planned before
    that) end quietly; its finish step finds the stage cached."""
    try:
        stage.run_unit(layout, settings, key, unit)
    except (CorpusError, OSError):
        if records.cached(stage.folder(layout), key) is not None:
            return
        raise


def run_stage_units(stage: UnitStage[Any], layout: Layout, settings: Settings, key: str, units: Sequence[str],
                    workers: int) -> None:
    """`run_stage_unit` of every unit through a pool of `workers` processes (`run_units`)."""
    run_units(run_stage_unit, (stage, layout, settings, key), units, workers)


def finish_stage(stage: UnitStage[R], layout: Layout, settings: Settings, plan: Plan, log: Log | None = None) -> R:
    """The finish step: the stage's result, built now or (already built under the key) reused."""
    with _locked(stage, layout, settings, "finish"):
        record = records.cached(stage.folder(layout), plan.key)
        if record is not None:
            return stage.reuse(layout, settings, plan.key, record)
        return stage.finish(layout, settings, plan, log)


def run_stage(stage: UnitStage[R], layout: Layout, settings: Settings, log: Log | None = None) -> R:
    """Plan, every phase's units through a pool (`local_workers`), finish: the same steps an executor spreads
    over processes or machines, in this process. The lock is held throughout, so a concurrent run waits and
    then finds the stage built. `log` hears a heartbeat every `progress.interval_s` seconds."""
    with _locked(stage, layout, settings, "run"):
        with heartbeat(log, stage.name, interval_of(settings.resolved), stage.doing(layout, settings)):
            plan = plan_stage(stage, layout, settings, log)
            for phase in range(len(stage.phases)):
                if phase:
                    plan = plan_next_stage(stage, layout, settings, plan, log)
                workers, unit_settings = stage.local_workers(settings, plan)
                run_stage_units(stage, layout, unit_settings, plan.key, plan.units, workers)
            return finish_stage(stage, layout, settings, plan, log)


def unit_groups(units: Sequence[str], fan_out: int) -> list[list[str]]:
    """Split units into at most `fan_out` contiguous groups of near-equal size, in unit order.

    Always at least one group (possibly empty), so a graph step downstream always runs.
    """
    units = list(units)
    n = max(1, min(int(fan_out), len(units)))
    size, extra = divmod(len(units), n)
    groups, start = [], 0
    for i in range(n):
        stop = start + size + (1 if i < extra else 0)
        groups.append(units[start:stop])
        start = stop
    return groups


def remove_work_folders(parent: Path, prefix: str, keep: Path | None = None) -> None:
    """Remove every work folder `<parent>/<prefix><key>` but `keep`: a plan of another key made their units
    useless, and a committed key needs none. Temp names (a plan being written) are left to records.begin."""
    for path in sorted(parent.iterdir()) if parent.is_dir() else ():
        if path.name.startswith(prefix) and path != keep and path.is_dir() and not is_temp_name(path.name):
            shutil.rmtree(path, ignore_errors=True)


UNIT_PUSH_INTERVAL_S = 5.0  # a push walks the whole mirror; a kill loses at most this much finished work


def run_units(run_unit: Callable[..., Any], args: tuple[Any, ...], units: Sequence[str], workers: int) -> None:
    """Run `run_unit(*args, unit)` for every unit through a pool of `workers` processes (inline for 1).

    `run_unit` must be a module-level function (it is pickled to the pool's processes). With an artifacts
    store (`core.storage`), finished units are pushed as they finish (at most one push every
    UNIT_PUSH_INTERVAL_S), so a step killed after them keeps them; the step's own push takes the rest.
    """
    for _ in ordered_map(run_unit, [(*args, unit) for unit in units], workers):
        push_all(min_interval_s=UNIT_PUSH_INTERVAL_S)
