"""Units: the independent pieces a global stage splits into, so any executor can run them anywhere.

A global stage with units offers three kinds of entry in its driver:

- plan: decide the stage key; when the stage is cached return its stats and no units, else prepare the
  shared inputs of the units under the artifacts root and name the units (sorted, stable names);
- run one unit: read and write only under the artifacts root, keyed by the stage key, atomically and
  idempotently (a unit whose output is already there and intact does nothing), so a unit can run in any
  process on any machine that mounts the artifacts root, and a killed run redoes only unfinished units;
- finish: merge the units' outputs in unit order (never completion order) and commit the stage record.

The plan, the units' outputs and their done-markers live in one work folder per key (`core.work.WorkFolder`).

The in-process path (`run_units`) runs the units through a process pool of `workers`; the Dagster graph
spreads groups of units (`unit_groups`) over executor steps. Neither changes a byte of output.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from corpus_dagster.core import records
from corpus_dagster.core.atomic import is_temp_name
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.storage import push_all

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Plan:
    """What a stage's plan step decided: its key, and either its cached stats or the units still to run."""

    key: str
    units: tuple[str, ...] = ()
    cached: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)  # plain JSON values the finish step may want


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


def done_elsewhere(stage_folder: Callable[[Any], Path]) -> Callable[[F], F]:
    """Decorate a unit runner `(layout, settings, key, unit)`: when it fails because its work folder is gone
    or incomplete and the stage is meanwhile committed under the same key, there is nothing left to do.

    Two runs of one key share the work folder; the first to finish removes it, and the other run's units
    (planned before that) must then end quietly, not fail: its finish step finds the stage cached.
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(layout: Any, settings: Settings, key: str, unit: str) -> Any:
            try:
                return fn(layout, settings, key, unit)
            except (CorpusError, OSError):
                if records.cached(stage_folder(layout), key) is not None:
                    return None
                raise

        return wrapper  # type: ignore[return-value]

    return decorate
