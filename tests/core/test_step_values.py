"""Step values: JSON checked against schemas/step-value.schema.json, never a pickle; the retention rule."""

from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path

import fsspec
import pytest

from corpus_dagster.core.step_values import StepValueError, StepValues, decode, runs_to_remove

PLAN = {"key": "0123456789abcdef", "units": ["lsh-band-000", "verify-00001", "shard-00000-rg0000"],
        "cached": False, "info": {"sources": ["alpha", "beta.v2"], "waiting": []}, "started": 1767225600.5}
RUN = "4a09e5ba-b935-495f-8e01-fbfd78bee250"
IDENT = [RUN, "dedup.dedup_plan", "result"]


class Planted:
    """Unpickling this creates the marker file: what a planted pickle would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture()
def values() -> StepValues:
    return StepValues(fsspec.filesystem("memory"), f"/step-values-{uuid.uuid4().hex[:8]}/.dagster-io")


def test_a_plan_round_trips_as_json(values):
    values.put(IDENT, PLAN)
    stored = values.fs.cat_file(values.path(IDENT))
    assert stored.startswith(b"{") and values.path(IDENT).endswith("/dedup.dedup_plan/result.json")
    assert values.get(IDENT) == PLAN


def test_a_planted_pickle_runs_nothing_and_fails_with_one_line(values, tmp_path):
    marker = tmp_path / "marker"
    values.fs.pipe_file(values.path(IDENT), pickle.dumps(Planted(marker)))
    with pytest.raises(StepValueError) as err:
        values.get(IDENT)
    assert not marker.exists()
    message = str(err.value)
    assert "\n" not in message and "is not JSON" in message and "dedup.dedup_plan" in message


@pytest.mark.parametrize(("change", "path", "rule"), [
    ({"key": "../../etc"}, "$.key", "pattern"),
    ({"units": ["../x"]}, "$.units[0]", "pattern"),
    ({"info": {"sources": ["/abs"]}}, "$.info.sources[0]", "pattern"),
    ({"info": {"command": "rm -rf /"}}, "$.info", "additionalProperties"),
    ({"started": "soon"}, "$.started", "type"),
    ({"cached": {"docs": 3}}, "$.cached", "type"),  # whether the stage is built, never its stats
])
def test_a_value_that_breaks_the_schema_is_refused_naming_the_rule_not_the_content(values, change, path, rule):
    data = json.dumps({**PLAN, **change}).encode()
    with pytest.raises(StepValueError) as err:
        decode(data, "run/step/result")
    message = str(err.value)
    assert f"{path} breaks the schema's {rule!r} rule" in message
    assert "etc" not in message and "rm -rf" not in message


def test_nan_and_non_utf8_are_not_json():
    for data in (b'{"started": NaN}', "{}".encode("utf-16")):
        with pytest.raises(StepValueError, match="is not JSON"):
            decode(data, "v")


def test_a_step_that_hands_on_a_value_outside_the_schema_fails_when_it_stores_it(values):
    with pytest.raises(StepValueError, match=r"\$ breaks the schema's 'required' rule"):
        values.put(IDENT, {"key": "0123456789abcdef"})
    assert not values.fs.exists(values.path(IDENT))


def test_a_value_name_is_a_plain_name(values):
    for bad in ([RUN, "..", "result"], [RUN, "a/b", "result"], ["", "step", "result"]):
        with pytest.raises(StepValueError, match="not a plain name"):
            values.path(bad)


def test_runs_lists_run_folders_only_and_remove_run_takes_one(values):
    other = str(uuid.uuid4())
    values.put(IDENT, PLAN)
    values.put([other, "shards.shards_plan", "result"], PLAN)
    values.fs.pipe_file(f"{values.root}/not-a-run/x.json", b"{}")
    assert set(values.runs()) == {RUN, other}
    values.remove_run(RUN)
    assert set(values.runs()) == {other}
    assert values.fs.exists(f"{values.root}/not-a-run/x.json")
    with pytest.raises(StepValueError):
        values.remove_run("../x")


def test_retention_keeps_unfinished_runs_and_the_newest_finished_ones():
    runs = {"old": 10.0, "mid": 20.0, "new": 30.0, "going": 5.0, "stranger": 1.0, "fresh-stranger": 99.0}
    finished = {"old": 11.0, "mid": 21.0, "new": 31.0}
    drop = runs_to_remove(runs, finished, {"going"}, keep=1, now=100.0, unknown_grace_s=50.0)
    assert drop == ["stranger", "old", "mid"]  # oldest first; a run still going and a recent stranger stay
    assert runs_to_remove(runs, finished, {"going"}, keep=0, now=100.0, unknown_grace_s=50.0)[-1] == "new"
    assert runs_to_remove(runs, finished, {"going"}, keep=5, now=100.0, unknown_grace_s=50.0) == ["stranger"]
