"""run_cached_many: cached units are skipped, the others are begun, computed by one call and committed each;
a computation that fails commits nothing. run_cached is its one-unit case."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_dagster.core import records
from corpus_dagster.core.stage import CachedUnit, Outputs, Stage, run_cached, run_cached_many

STAGE = Stage("example", "1")


def _unit(root: Path, name: str, value: str = "v") -> CachedUnit:
    folder = root / name
    return CachedUnit(folder, STAGE, {"source": name}, {"value": value})


def _writer(units: list[CachedUnit], calls: list[list[tuple[int, str]]]):
    """A compute_all that writes one file per pending unit under its key and records what it was given."""

    def compute_all(pending: list[tuple[int, str]]) -> list[Outputs]:
        calls.append(list(pending))
        outputs = []
        for i, key in pending:
            folder = Path(units[i].folder)
            (folder / key).mkdir(parents=True, exist_ok=True)
            (folder / key / "out.txt").write_text(f"{units[i].inputs['source']}\n")
            outputs.append(Outputs([f"{key}/out.txt"], files={"out": [f"{key}/out.txt"]}, stats={"unit": i}))
        return outputs

    return compute_all


def test_cached_units_are_skipped_and_the_others_computed_once_together(tmp_path: Path) -> None:
    units = [_unit(tmp_path, name) for name in ("a", "b", "c")]
    first_calls: list = []
    run_cached_many(units[:1], _writer(units, first_calls))  # "a" is done before the batch
    calls: list = []
    runs = run_cached_many(units, _writer(units, calls))
    assert [r.cached for r in runs] == [True, False, False]
    assert calls == [[(1, units[1].resolved_key()), (2, units[2].resolved_key())]]  # one call for both
    for unit, run in zip(units, runs, strict=True):
        assert run.key == unit.resolved_key() == STAGE.key(unit.inputs, unit.settings)
        record = records.read_record(Path(unit.folder))
        assert record is not None and record.key == run.key and record.stage == "example"
        assert run.summary() == {**record.stats, "cached": run.cached, "key": run.key}
    assert runs[1].stats == {"unit": 1} and runs[2].stats == {"unit": 2}

    again: list = []
    assert all(r.cached for r in run_cached_many(units, _writer(units, again)))
    assert again == []  # nothing changed: compute_all is not called at all


def test_a_changed_setting_recomputes_only_that_unit(tmp_path: Path) -> None:
    units = [_unit(tmp_path, name) for name in ("a", "b")]
    run_cached_many(units, _writer(units, []))
    changed = [units[0], _unit(tmp_path, "b", value="w")]
    calls: list = []
    runs = run_cached_many(changed, _writer(changed, calls))
    assert [r.cached for r in runs] == [True, False]
    assert calls == [[(1, changed[1].resolved_key())]]
    assert runs[1].key != units[1].resolved_key()


def test_a_failing_computation_commits_nothing(tmp_path: Path) -> None:
    units = [_unit(tmp_path, name) for name in ("a", "b")]

    def failing(pending: list[tuple[int, str]]) -> list[Outputs]:
        _writer(units, [])(pending[:1])  # one unit's file is written before the failure
        raise RuntimeError("worker died")

    with pytest.raises(RuntimeError, match="worker died"):
        run_cached_many(units, failing)
    assert all(records.read_record(Path(u.folder)) is None for u in units)
    runs = run_cached_many(units, _writer(units, []))  # the next run computes both again
    assert [r.cached for r in runs] == [False, False]


def test_outputs_for_the_wrong_number_of_units_are_refused_before_any_commit(tmp_path: Path) -> None:
    units = [_unit(tmp_path, name) for name in ("a", "b")]
    with pytest.raises(ValueError, match="1 Outputs for 2 unit"):
        run_cached_many(units, lambda pending: _writer(units, [])(pending[:1]))
    assert all(records.read_record(Path(u.folder)) is None for u in units)


def test_pending_units_are_begun_before_the_computation_and_their_clear_folders_created(tmp_path: Path) -> None:
    unit = _unit(tmp_path, "a")
    extra = tmp_path / "a" / "extra"
    leftover = tmp_path / "a" / ".out.txt.tmp-1234"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("from a killed run")
    unit = CachedUnit(unit.folder, STAGE, unit.inputs, unit.settings, clear=(extra,))
    seen: list[bool] = []

    def compute_all(pending: list[tuple[int, str]]) -> list[Outputs]:
        seen.append(extra.is_dir() and not leftover.exists())
        return _writer([unit], [])(pending)

    run_cached_many([unit], compute_all)
    assert seen == [True]


def test_run_cached_is_the_one_unit_case(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    computed: list[str] = []

    def compute(key: str) -> Outputs:
        computed.append(key)
        (folder / key).mkdir(parents=True)
        (folder / key / "out.txt").write_text("a\n")
        return Outputs([f"{key}/out.txt"], stats={"n": 1})

    first = run_cached(folder, STAGE, {"source": "a"}, {}, compute)
    second = run_cached(folder, STAGE, {"source": "a"}, {}, compute)
    assert not first.cached and second.cached and computed == [first.key] and second.record.key == first.key
    assert second.summary() == {"n": 1, "cached": True, "key": first.key}
