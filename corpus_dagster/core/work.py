"""The work folder of one key of a global stage: the plan, the units' outputs and their done-markers.

    <parent>/<prefix><key>/
      plan.json                  the plan step's plan, written last: the key, the plan's own content and the
                                 size of every plan file it names (a later step may add e.g. verify.json)
      <plan files>               what the plan prepared for the units, written before the plan
      units/<unit>.<name>        a unit's outputs
      units/<unit>.json          its done-marker, written last: the key, the size and sha256 of every output
                                 and the unit's own facts (timings, counts)

Unit files sit one level below the work folder: `records.begin`, run by a plan under the stage lock, clears
temp names only down to the work folder's top level, so it never removes the temp file of a unit another
process is writing without the lock. The work folder is not a temp name: a plan of the same key resumes from
it, a plan of another key removes it, and the finish removes it once the stage record is committed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.units import remove_work_folders

UNITS = "units"
PLAN = "plan"


class WorkFolderError(CorpusError):
    """A step found no complete plan or unit output in a work folder; names the folder and what to run."""


@dataclass(frozen=True)
class WorkFolder:
    """The work folder of `key` under `parent`, for the stage `stage`.

    `plan_step` and `unit_step` name the entries an error tells the user to run; `error` is the stage's own
    CorpusError subclass, so callers that catch it keep doing so.
    """

    parent: Path
    key: str
    stage: str
    plan_step: str
    unit_step: str
    prefix: str = ".work-"
    error: type[CorpusError] = WorkFolderError

    @property
    def path(self) -> Path:
        return Path(self.parent) / f"{self.prefix}{self.key}"

    @property
    def units_dir(self) -> Path:
        return self.path / UNITS

    # --- the plan ----------------------------------------------------------------------------------------

    def plan_path(self, name: str = PLAN) -> Path:
        return self.path / f"{name}.json"

    def write_plan(self, plan: dict[str, Any], files: Iterable[str] = (), name: str = PLAN) -> dict[str, Any]:
        """Write a plan atomically, after every file it names (relative to the work folder): a plan on disk
        means those files are complete. Returns the plan as stored (with `key` and `plan_files`)."""
        stored = {**plan, "key": self.key, "plan_files": {f: (self.path / f).stat().st_size for f in files}}
        atomic_write_bytes(self.plan_path(name), (json.dumps(stored, indent=1, sort_keys=True) + "\n").encode())
        return stored

    def find_plan(self, name: str = PLAN) -> dict[str, Any] | None:
        """The plan when it is there, of this key, and every file it names has its recorded size; else None."""
        try:
            plan = json.loads(self.plan_path(name).read_text(encoding="utf-8"))
            if plan["key"] != self.key:
                return None
            if all((self.path / f).stat().st_size == size for f, size in plan["plan_files"].items()):
                return plan
        except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
            pass
        return None

    def read_plan(self, name: str = PLAN, step: str | None = None) -> dict[str, Any]:
        """The plan, or the stage's error naming the work folder and the step that writes the plan."""
        plan = self.find_plan(name)
        if plan is None:
            raise self.error(
                f"{self.stage}: no complete {name} in {self.path} for key {self.key} ({self.plan_path(name).name} "
                f"or a file it names is missing or damaged); run {step or self.plan_step} first"
            )
        return plan

    def start(self, name: str = PLAN) -> dict[str, Any] | None:
        """Before planning: remove the work folders of other keys, and this one's content unless it holds a
        complete plan (nothing in an incomplete folder is trusted). Returns that plan (a resume) or None."""
        self.remove_others()
        plan = self.find_plan(name)
        if plan is None:
            self.remove()
        self.path.mkdir(parents=True, exist_ok=True)
        return plan

    # --- the units -----------------------------------------------------------------------------------------

    def unit_path(self, unit: str, name: str) -> Path:
        """Where a unit writes its output `name` (create the units folder with `units_dir.mkdir`)."""
        return self.units_dir / f"{unit}.{name}"

    def _marker_path(self, unit: str) -> Path:
        return self.units_dir / f"{unit}.json"

    def mark_done(self, unit: str, names: Sequence[str], **facts: Any) -> dict[str, Any]:
        """Write a unit's done-marker, after its outputs `names` (see `unit_path`): their size and sha256,
        so a damaged output is noticed and the unit redone, and the unit's `facts`."""
        files = {}
        for name in names:
            path = self.unit_path(unit, name)
            files[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        marker = {**facts, "unit": unit, "key": self.key, "files": files}
        atomic_write_bytes(self._marker_path(unit), (json.dumps(marker, indent=1, sort_keys=True) + "\n").encode())
        return marker

    def done(self, unit: str, verify: bool = True) -> dict[str, Any] | None:
        """A unit's marker when every output it lists is there with its size (and, with `verify`, its sha256),
        else None: the unit is to be (re)done."""
        try:
            marker = json.loads(self._marker_path(unit).read_text(encoding="utf-8"))
            if marker["key"] != self.key or marker["unit"] != unit:
                return None
            for name, entry in marker["files"].items():
                path = self.unit_path(unit, name)
                if path.stat().st_size != entry["bytes"] or (verify and sha256_file(path) != entry["sha256"]):
                    return None
            return marker
        except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
            return None

    def pending(self, units: Iterable[str]) -> tuple[str, ...]:
        """The units without a complete output, in the order given."""
        return tuple(u for u in units if self.done(u) is None)

    def require_done(self, units: Sequence[str], verify: bool = True) -> list[dict[str, Any]]:
        """The markers of every unit in order, or the stage's error naming the units still to run."""
        markers = [self.done(u, verify) for u in units]
        missing = [u for u, m in zip(units, markers, strict=True) if m is None]
        if missing:
            raise self.error(
                f"{self.stage}: {len(missing)} of {len(units)} unit(s) have no complete output in {self.units_dir} "
                f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); run {self.unit_step} for "
                f"them, then finish again"
            )
        return markers  # type: ignore[return-value]

    # --- removal -------------------------------------------------------------------------------------------

    def remove_others(self) -> None:
        """Remove the work folders of every other key: a plan of this key made their units useless."""
        remove_work_folders(Path(self.parent), self.prefix, keep=self.path)

    def remove(self) -> None:
        """Remove this work folder (the finish, once the stage record is committed)."""
        shutil.rmtree(self.path, ignore_errors=True)


def remove_all_work_folders(parent: Path, prefix: str = ".work-") -> None:
    """Remove every work folder under `parent`: a committed key needs none."""
    remove_work_folders(Path(parent), prefix)
