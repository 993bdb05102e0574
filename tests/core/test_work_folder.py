"""core.work.WorkFolder: a plan is trusted only whole, a unit with an intact done-marker is skipped, a damaged
unit output is redone, a plan of another key removes the old folder, and a missing plan is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_dagster.core import records
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.work import WorkFolder, WorkFolderError, remove_all_work_folders

UNITS = ("u-000", "u-001", "u-002")


def folder(parent: Path, key: str = "k1") -> WorkFolder:
    return WorkFolder(parent, key, "demo", "plan_demo", "run_demo_unit")


def run_unit(work: WorkFolder, unit: str, calls: list[str]) -> None:
    """A unit as the drivers write one: skip when done, else outputs first, then the done-marker."""
    if work.done(unit) is not None:
        return
    calls.append(unit)
    work.unit_path(unit, "out.bin").parent.mkdir(parents=True, exist_ok=True)
    work.unit_path(unit, "out.bin").write_bytes(f"output of {unit}".encode() * 10)
    work.mark_done(unit, ["out.bin"], seconds=0.5)


def planned(parent: Path, key: str = "k1") -> WorkFolder:
    work = folder(parent, key)
    assert work.start() is None
    (work.path / "shared.npy").write_bytes(b"shared input")
    work.write_plan({"units": list(UNITS)}, files=["shared.npy"])
    return work


def test_a_plan_is_read_back_with_its_key(tmp_path: Path) -> None:
    work = planned(tmp_path)
    plan = work.read_plan()
    assert plan["units"] == list(UNITS) and plan["key"] == "k1"
    assert plan["plan_files"] == {"shared.npy": len(b"shared input")}


def test_a_missing_or_damaged_plan_names_the_stage_folder_and_step(tmp_path: Path) -> None:
    work = folder(tmp_path)
    with pytest.raises(WorkFolderError, match=r"demo: no complete plan in .*k1.*run plan_demo first"):
        work.read_plan()
    work = planned(tmp_path)
    work.plan_path().write_text("{not json")
    with pytest.raises(CorpusError, match=str(work.path)):
        work.read_plan()
    work = planned(tmp_path / "b")
    (work.path / "shared.npy").write_bytes(b"cut")  # a plan file of another size: the plan is incomplete
    assert work.find_plan() is None
    with pytest.raises(WorkFolderError, match="run plan_verify first"):
        work.read_plan("verify", step="plan_verify")


def test_the_stage_error_class_is_raised(tmp_path: Path) -> None:
    class StageError(CorpusError):
        pass

    work = WorkFolder(tmp_path, "k1", "demo", "plan_demo", "run_demo_unit", error=StageError)
    with pytest.raises(StageError):
        work.read_plan()
    with pytest.raises(StageError, match=r"3 of 3 unit\(s\).*u-000, u-001, u-002.*run run_demo_unit"):
        work.require_done(UNITS)


def test_resume_skips_units_with_a_marker(tmp_path: Path) -> None:
    work = planned(tmp_path)
    calls: list[str] = []
    run_unit(work, "u-000", calls)
    run_unit(work, "u-001", calls)
    before = {p.name: p.stat().st_mtime_ns for p in work.units_dir.iterdir()}
    again = folder(tmp_path)
    assert again.start() is not None  # the complete plan is kept
    assert again.pending(UNITS) == ("u-002",)
    for unit in UNITS:
        run_unit(again, unit, calls)
    assert calls == ["u-000", "u-001", "u-002"]
    assert {n: t for n, t in ((p.name, p.stat().st_mtime_ns) for p in work.units_dir.iterdir()) if n in before} == before
    markers = again.require_done(UNITS)
    assert [m["unit"] for m in markers] == list(UNITS) and markers[0]["seconds"] == 0.5


@pytest.mark.parametrize("damage", ["truncate", "same_size", "delete", "marker"])
def test_a_damaged_unit_output_is_redone(tmp_path: Path, damage: str) -> None:
    work = planned(tmp_path)
    calls: list[str] = []
    for unit in UNITS:
        run_unit(work, unit, calls)
    out = work.unit_path("u-001", "out.bin")
    good = out.read_bytes()
    if damage == "truncate":
        out.write_bytes(good[:-3])
    elif damage == "same_size":
        out.write_bytes(bytes([good[0] ^ 0xFF]) + good[1:])
    elif damage == "delete":
        out.unlink()
    else:
        (work.units_dir / "u-001.json").write_text("{")
    assert work.pending(UNITS) == ("u-001",)
    with pytest.raises(WorkFolderError, match="u-001"):
        work.require_done(UNITS)
    calls.clear()
    for unit in UNITS:
        run_unit(work, unit, calls)
    assert calls == ["u-001"] and out.read_bytes() == good
    assert work.pending(UNITS) == ()


def test_a_marker_of_another_key_does_not_count(tmp_path: Path) -> None:
    work = planned(tmp_path)
    run_unit(work, "u-000", [])
    other = WorkFolder(tmp_path, "k2", "demo", "plan_demo", "run_demo_unit")
    other.units_dir.mkdir(parents=True)
    for p in work.units_dir.iterdir():
        (other.units_dir / p.name).write_bytes(p.read_bytes())
    assert other.done("u-000") is None


def test_a_plan_of_another_key_removes_the_old_folder(tmp_path: Path) -> None:
    old = planned(tmp_path, "k1")
    run_unit(old, "u-000", [])
    new = folder(tmp_path, "k2")
    assert new.start() is None
    assert not old.path.exists() and new.path.is_dir()


def test_an_incomplete_folder_is_started_afresh(tmp_path: Path) -> None:
    work = folder(tmp_path)
    work.start()
    (work.path / "half-written").write_bytes(b"x")
    run_unit(work, "u-000", [])  # a unit output without a plan is not trusted either
    assert work.start() is None
    assert list(work.path.iterdir()) == []


def test_a_plan_never_removes_unit_files_and_finish_removes_the_folder(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    work = planned(stage)
    writing = work.units_dir / ".u-002.out.tmp-0123456789ab.bin"  # a unit being written by another process
    writing.parent.mkdir(parents=True)
    writing.write_bytes(b"partial")
    killed_plan = work.path / ".plan.json.tmp-0123456789ab"  # a plan step killed while writing
    killed_plan.write_bytes(b"partial")
    records.begin(stage)  # what a plan runs under the stage lock
    assert writing.exists() and not killed_plan.exists() and work.find_plan() is not None
    work.remove()
    assert not work.path.exists()


def test_remove_all_work_folders_keeps_other_names(tmp_path: Path) -> None:
    planned(tmp_path, "k1")
    planned(tmp_path, "k2")
    (tmp_path / "k3").mkdir()
    remove_all_work_folders(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["k3"]
