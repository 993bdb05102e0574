"""The unit-stage protocol (core.units): the cache prologue, the phases, a unit of a stage built meanwhile,
the plan as a step value. A toy stage writes one letter per unit and joins them in unit order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, commit_outputs
from corpus_dagster.core.step_values import decode, encode
from corpus_dagster.core.units import (
    Plan,
    UnitStage,
    finish_stage,
    plan_next_stage,
    plan_stage,
    run_stage,
    run_stage_unit,
)
from corpus_dagster.core.work import WorkFolder

TOY = Stage("toy", "1")
CALLS: list[str] = []


@dataclass(frozen=True)
class ToyResult:
    key: str
    cached: bool
    text: str


@dataclass(frozen=True)
class ToyStage(UnitStage[ToyResult]):
    """Phase one: units a, b, c; phase two: unit d. The finish joins the units' letters in unit order."""

    word: str = "abc"
    name: ClassVar[str] = "toy"
    lock: ClassVar[str] = "toy"
    phases: ClassVar[tuple[str, ...]] = ("one", "two")

    def folder(self, layout: Layout) -> Path:
        return layout.stage("toy")

    def work(self, layout: Layout, key: str) -> WorkFolder:
        return WorkFolder(self.folder(layout), key, "toy", "toy_plan", "toy units")

    def key(self, layout: Layout, settings: Settings) -> str:
        return TOY.key({"word": self.word}, {})

    def plan(self, layout: Layout, settings: Settings, key: str, log) -> Plan:
        CALLS.append("plan")
        work = self.work(layout, key)
        work.start()
        work.write_plan({"word": self.word})
        return Plan(key, tuple(self.word), info={"letters": len(self.word)})

    def plan_next(self, layout: Layout, settings: Settings, plan: Plan, log) -> Plan:
        CALLS.append("plan_next")
        return Plan(plan.key, ("d",), info={"second": True})

    def run_unit(self, layout: Layout, settings: Settings, key: str, unit: str) -> None:
        CALLS.append(f"unit {unit}")
        work = self.work(layout, key)
        work.read_plan()
        work.units_dir.mkdir(parents=True, exist_ok=True)
        work.unit_path(unit, "txt").write_text(unit.upper())
        work.mark_done(unit, ["txt"])

    def finish(self, layout: Layout, settings: Settings, plan: Plan, log) -> ToyResult:
        CALLS.append("finish")
        work = self.work(layout, plan.key)
        units = [*self.word, "d"]
        work.require_done(units)
        text = "".join(work.unit_path(u, "txt").read_text() for u in units)
        folder = self.folder(layout)
        (folder / plan.key).mkdir(parents=True, exist_ok=True)
        (folder / plan.key / "out.txt").write_text(text)
        commit_outputs(folder, TOY, plan.key, {"word": self.word}, {}, Outputs([f"{plan.key}/out.txt"]))
        work.remove()
        return ToyResult(plan.key, False, text)

    def reuse(self, layout: Layout, settings: Settings, key: str, record: StageRecord) -> ToyResult:
        CALLS.append("reuse")
        return ToyResult(key, True, (self.folder(layout) / key / "out.txt").read_text())


@pytest.fixture
def root(tmp_path, make_settings) -> tuple[Layout, Settings]:
    CALLS.clear()
    settings = make_settings({"paths": {"artifacts": str(tmp_path / "artifacts")}})
    return Layout.from_config(settings.resolved), settings


def test_run_stage_plans_runs_every_phase_in_order_finishes_and_then_reuses(root):
    layout, settings = root
    built = run_stage(ToyStage(), layout, settings)
    assert built == ToyResult(ToyStage().key(layout, settings), False, "ABCD")
    assert CALLS == ["plan", "unit a", "unit b", "unit c", "plan_next", "unit d", "finish"]
    CALLS.clear()
    again = run_stage(ToyStage(), layout, settings)
    assert again == ToyResult(built.key, True, "ABCD")
    assert "plan" not in CALLS and "finish" not in CALLS and not any(c.startswith("unit") for c in CALLS)


def test_the_steps_one_by_one_give_the_result_of_run_stage_and_a_built_stage_plans_no_units(root):
    layout, settings = root
    stage = ToyStage()
    plan = plan_stage(stage, layout, settings)
    assert plan.cached is False and plan.units == ("a", "b", "c") and plan.info == {"letters": 3}
    for unit in reversed(plan.units):
        run_stage_unit(stage, layout, settings, plan.key, unit)
    nxt = plan_next_stage(stage, layout, settings, plan)
    assert nxt.units == ("d",) and nxt.info == {"letters": 3, "second": True}  # the facts add up
    run_stage_unit(stage, layout, settings, nxt.key, "d")
    assert finish_stage(stage, layout, settings, nxt).text == "ABCD"

    cached = plan_stage(stage, layout, settings)
    assert cached == Plan(plan.key, (), cached=True)
    assert plan_next_stage(stage, layout, settings, cached) is cached
    assert finish_stage(stage, layout, settings, cached) == ToyResult(plan.key, True, "ABCD")
    # a later phase's plan of a key built meanwhile (another run finished it): no units
    assert plan_next_stage(stage, layout, settings, plan) == Plan(plan.key, cached=True, info=plan.info)


def test_a_unit_whose_work_folder_is_gone_ends_quietly_only_when_the_stage_is_built(root):
    layout, settings = root
    stage = ToyStage()
    plan = plan_stage(stage, layout, settings)
    stage.work(layout, plan.key).remove()
    with pytest.raises(CorpusError, match="run toy_plan first"):
        run_stage_unit(stage, layout, settings, plan.key, "a")
    other = ToyStage("xyz")
    run_stage(ToyStage(), layout, settings)  # the same key, built by another run
    run_stage_unit(stage, layout, settings, plan.key, "a")  # nothing left to do
    with pytest.raises(CorpusError):
        run_stage_unit(other, layout, settings, other.key(layout, settings), "x")


def test_a_plan_crosses_a_step_as_schema_checked_json():
    plan = Plan("0123456789abcdef", ("lsh-band-000", "shard-00000-rg0000"), False, {"sources": ["alpha"], "n_docs": 3})
    value = {**plan.to_json(), "started": 1.5}
    assert Plan.from_json(decode(encode(value, "v"), "v")) == plan
    assert Plan.from_json(decode(encode({**Plan("0123456789abcdef", cached=True).to_json(), "started": 0.0}, "v"),
                                 "v")).cached is True
