"""The IO manager of every job: step values as JSON in the artifacts root, retention of finished runs' values."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import dagster as dg
import pytest
import yaml

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.step_values import StepValues
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.store_io import step_value_io_manager

PLAN = {"key": "0123456789abcdef", "units": ["shard-00000"], "cached": False, "info": {"n_docs": 3}, "started": 1.0}


@dg.op
def make_plan() -> dict:
    return dict(PLAN)


@dg.op
def use_plan(plan: dict) -> None:
    assert plan == PLAN


def plan_job(config: Path) -> dg.JobDefinition:
    @dg.job(resource_defs={"corpus": CorpusConfig(config_path=str(config)), "io_manager": step_value_io_manager})
    def plans():
        use_plan(make_plan())

    return plans


@pytest.fixture()
def config(tmp_path) -> Path:
    path = tmp_path / "corpus.yaml"
    path.write_text(yaml.safe_dump({"dataset": "t", "version": "v1",
                                    "paths": {"artifacts": str(tmp_path / "artifacts"), "keep_step_values": 1}}))
    return path


def instance_in(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    return dg.instance_for_test(temp_dir=str(home))


def values_of(config: Path) -> StepValues:
    return StepValues.of(Layout.from_config(CorpusConfig(config_path=str(config)).resolved()))


def test_values_are_json_files_under_the_local_artifacts_root_and_nothing_is_pickled(config, tmp_path):
    with instance_in(tmp_path / "home") as instance:
        result = plan_job(config).execute_in_process(instance=instance)
    assert result.success
    stored = sorted((tmp_path / "artifacts" / ".dagster-io").rglob("*"))
    files = [p for p in stored if p.is_file()]
    assert [p.relative_to(tmp_path / "artifacts" / ".dagster-io" / result.run_id).as_posix() for p in files] == [
        "make_plan/result.json"]
    assert json.loads(files[0].read_bytes()) == PLAN
    assert not list((tmp_path / "home").rglob("result"))  # Dagster's default pickle file is never written


def test_the_io_manager_has_no_config_to_record(config):
    definition = plan_job(config).resource_defs["io_manager"]
    assert definition.config_schema.as_field().config_type.fields == {}  # nothing of the store in a snapshot
    assert definition.required_resource_keys == {"corpus"}


def test_step_values_of_finished_runs_are_kept_for_the_newest_keep_step_values(config, tmp_path):
    with instance_in(tmp_path / "home") as instance:
        job = plan_job(config)
        ids = [job.execute_in_process(instance=instance).run_id for _ in range(3)]
    # the third run's start removed the first's (keep 1 finished run besides the one going)
    assert set(values_of(config).runs()) == {ids[1], ids[2]}


def test_a_planted_value_fails_the_loading_step_with_one_line(config, tmp_path):
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (Path.touch, (marker,))

    @dg.op
    def plant(plan: dict) -> dict:
        run_id = dg.OpExecutionContext.get().run_id
        values = values_of(config)
        values.fs.pipe_file(values.path([run_id, "make_plan", "result"]), pickle.dumps(Planted()))
        return plan

    @dg.job(resource_defs={"corpus": CorpusConfig(config_path=str(config)), "io_manager": step_value_io_manager})
    def planted():
        plan = make_plan()
        plant(plan)
        use_plan(plan)

    with instance_in(tmp_path / "home") as instance:
        result = planted.execute_in_process(instance=instance, raise_on_error=False)
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert not marker.exists()
    assert failures, "a step loaded the planted value without failing"
    description = failures[0].step_failure_data.user_failure_data.description
    assert "\n" not in description and "make_plan/result is not JSON" in description
