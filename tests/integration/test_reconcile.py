"""Ledger and partitions agree through every entry point: a removed row leaves the published corpus (CLI, sensor,
schedule, a UI launch of build_corpus), its data is deleted once a corpus without it is published, first runs
started together share one healthy instance, and runs of a killed CLI are marked failed."""

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest
import yaml

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.reconcile import plan_partitions, purge_removed_sources, sources_on_disk
from corpus_dagster.dedup.outputs import dedup_stats
from corpus_dagster.defs.automation import refresh_schedule_for
from corpus_dagster.defs.instance import (
    SESSION_HOST_TAG,
    SESSION_TAG,
    fail_orphaned_runs,
    hold_session,
    instance_setup,
    open_instance,
    prepare_home,
    session_tags,
)
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources
from corpus_dagster.publish.driver import published_shards
from corpus_dagster.publish.sources_check import check_sources_in_ledger, published_source_ids

CACHED_SOURCE_STEP = re.compile(r"^run: (\S+)\s+(clean_documents|minhash_signatures)\s.*\(cached\)$")


def run_cli(config: Path, home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=config.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)


def layout_of(config: Path) -> Layout:
    cfg = yaml.safe_load(config.read_text())
    return Layout(root=Path(cfg["paths"]["artifacts"]), dataset=cfg["dataset"], version=cfg["version"])


def drop_row(ledger: Path, source_id: str) -> list[str]:
    lines = [x for x in ledger.read_text().splitlines() if json.loads(x)["source_id"] != source_id]
    ledger.write_text("".join(x + "\n" for x in lines))
    return lines


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def release_rows(folder: Path) -> dict[str, list]:
    """Every release part's rows without `created_at` (the fetch time), and every other file's bytes."""
    out: dict[str, object] = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                              if p.is_file() and p.suffix != ".parquet" and p.name != "_RELEASE.json"}
    for part in sorted(folder.rglob("*.parquet")):
        table = pq.read_table(part)
        out[str(part.relative_to(folder))] = table.drop_columns(["created_at"]).to_pylist()
    return out


# --- the plan ------------------------------------------------------------------------------------------------

def test_plan_adds_new_rows_and_removes_gone_ones_in_a_fixed_order():
    plan = plan_partitions(["b", "a", "c"], ["z", "a", "y"])
    assert plan.add == ["b", "c"] and plan.remove == ["y", "z"] and plan.changed


def test_plan_keeps_a_source_named_by_an_invalid_row():
    plan = plan_partitions(["a"], ["a", "b"], named_by_invalid={"b"})
    assert plan.remove == [] and not plan.changed


def test_plan_removes_nothing_while_an_invalid_row_names_no_source():
    plan = plan_partitions(["a"], ["a", "b"], unnamed_invalid=1)
    assert plan.remove == [] and plan.held_back == ["b"]


def test_purge_deletes_only_sources_neither_in_the_ledger_nor_published(tmp_path):
    layout = Layout(root=tmp_path, dataset="d", version="v")
    for sid in ("kept", "published", "gone"):
        (layout.raw_source(sid) / "20260101").mkdir(parents=True)
        (layout.stage("clean", sid)).mkdir(parents=True)
        (layout.stage("clean", sid) / "_RECORD.json").write_text("{}")
    (layout.stage("dedup") / "0123456789abcdef").mkdir(parents=True)  # a key folder of a global stage
    (layout.stage("dedup") / "_RECORD.json").write_text("{}")
    assert sources_on_disk(layout) == ["gone", "kept", "published"]
    deleted = purge_removed_sources(layout, ["kept"], ["published"])
    assert list(deleted) == ["gone"]
    assert not layout.raw_source("gone").exists() and not layout.stage("clean", "gone").exists()
    assert layout.raw_source("kept").exists() and layout.stage("clean", "published").exists()
    assert (layout.stage("dedup") / "0123456789abcdef").exists()


# --- the CLI ---------------------------------------------------------------------------------------------------

def test_removing_a_source_through_the_cli_equals_a_fresh_build_without_it(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path / "a")
    layout = layout_of(config)
    first = run_cli(config, tmp_path / "home")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    kept_rows = drop_row(layout.ledger, "gamma")

    again = run_cli(config, tmp_path / "home")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "removed from the ledger, so left out of the corpus: gamma" in again.stdout
    assert published_source_ids(published_shards(layout)) == ["alpha", "beta"]
    reused = sorted(m.groups() for m in map(CACHED_SOURCE_STEP.match, again.stdout.splitlines()) if m)
    assert reused == [("alpha", "clean_documents"), ("alpha", "minhash_signatures"),
                      ("beta", "clean_documents"), ("beta", "minhash_signatures")]
    near_blocks = dedup_stats(layout)  # the near-duplicate pairs between the kept sources are read back
    assert near_blocks["blocks"] == {"computed": 0, "reused": 3} and near_blocks["generated_pairs"] == 0
    assert "gamma" not in sources_on_disk(layout)  # published without it: its data is gone
    assert not layout.raw_source("gamma").exists()
    assert not any(layout.stage(s, "gamma").exists() for s in ("clean", "minhash", "scrub"))

    removed = {"shards": tree_bytes(layout.shards), "tokens": tree_bytes(layout.tokens),
               "analysis": tree_bytes(layout.analysis), "release": release_rows(layout.release("testset"))}
    shutil.rmtree(layout.root)  # a fresh build of the same ledger, from nothing
    layout.ledger.parent.mkdir(parents=True)
    layout.ledger.write_text("".join(x + "\n" for x in kept_rows))
    fresh = run_cli(config, tmp_path / "fresh-home")
    assert fresh.returncode == 0, fresh.stdout[-2000:] + fresh.stderr[-2000:]
    assert tree_bytes(layout.shards) == removed["shards"]
    assert tree_bytes(layout.tokens) == removed["tokens"]
    assert tree_bytes(layout.analysis) == removed["analysis"]
    assert release_rows(layout.release("testset")) == removed["release"]


def test_first_runs_started_together_share_one_healthy_instance(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path / "a")
    home = tmp_path / "home"  # does not exist yet
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    procs = [subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n---\n".join(o[-1500:] for o in outputs)
    fifth = run_cli(config, home)
    assert fifth.returncode == 0, fifth.stdout[-2000:] + fifth.stderr[-2000:]


def test_runs_of_a_killed_cli_are_marked_failed_by_the_next_start(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path / "a")
    home = tmp_path / "home"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    started = None
    deadline = time.monotonic() + 300
    try:
        while started is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            with open_instance(home) as instance:
                runs = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
                started = next((r.run_id for r in runs if SESSION_TAG in r.tags), None)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert started is not None, "no run of the CLI was seen in progress"
    time.sleep(1)  # the run processes end with the CLI that started them
    with open_instance(home) as instance:
        assert instance.get_run_by_id(started).status == dg.DagsterRunStatus.STARTED  # what the UI showed before

    again = run_cli(config, home)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "marked" in again.stdout and started in again.stdout
    with open_instance(home) as instance:
        assert instance.get_run_by_id(started).status == dg.DagsterRunStatus.FAILURE
        failure = [e for e in instance.all_logs(started) if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"]
        assert failure and "ended without finishing" in failure[-1].message
        unfinished = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        assert unfinished == []


def test_make_ui_set_up_fails_runs_of_a_dead_session_only(tmp_path):
    home = tmp_path / "home"
    with instance_setup(home) as instance:
        job = dg.GraphDefinition("g").to_job()
        dead = instance.create_run_for_job(job, tags={SESSION_TAG: "dead"})
        other = instance.create_run_for_job(job)  # launched by the UI: Dagster's own monitoring owns it
        for run in (dead, other):
            instance.handle_run_event(run.run_id, dg.DagsterEvent(
                event_type_value="PIPELINE_START", job_name=run.job_name, message="start"))
        instance.dispose()
    assert prepare_home(home) == [dead.run_id]
    with open_instance(home) as instance:
        assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(other.run_id).status == dg.DagsterRunStatus.STARTED


def test_a_live_session_keeps_its_runs(tmp_path):
    home = tmp_path / "home"
    with hold_session(home, "live"), instance_setup(home) as instance:
        run = instance.create_run_for_job(dg.GraphDefinition("g").to_job(), tags={SESSION_TAG: "live"})
        instance.handle_run_event(run.run_id, dg.DagsterEvent(
            event_type_value="PIPELINE_START", job_name=run.job_name, message="start"))
        assert fail_orphaned_runs(instance, home) == []
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
        instance.dispose()


# --- the Dagster side: a UI launch, the sensor's check, the schedule ------------------------------------------

@pytest.fixture(scope="module")
def built_then_removed(tmp_path_factory):
    """Three sources materialized and published in process, then gamma's row removed (its partition kept).
    Shared by the tests below; the one that rebuilds the corpus comes last."""
    from corpus_factory import write_setup

    corpus = CorpusConfig(config_path=str(write_setup(tmp_path_factory.mktemp("removed"))))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
        layout = corpus.layout()
        drop_row(layout.ledger, "gamma")
        yield corpus, instance, layout


def test_published_source_missing_from_the_ledger_fails_the_check(built_then_removed):
    _, _, layout = built_then_removed
    report = check_sources_in_ledger(layout, published_shards(layout))
    assert not report.passed
    assert report.n_problems == 1 and "'gamma' is published but has no row" in report.problems[0]


def test_the_schedule_refetches_only_sources_in_the_ledger(built_then_removed):
    corpus, instance, _ = built_then_removed
    schedule = refresh_schedule_for("0 3 * * *", "UTC")
    ctx = dg.build_schedule_context(instance=instance, resources={"corpus": corpus},
                                    scheduled_execution_time=dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC))
    requests = schedule(ctx)
    assert sorted(r.partition_key for r in requests) == ["alpha", "beta"]


def test_a_corpus_launch_before_the_partition_is_removed_leaves_the_source_out(built_then_removed):
    corpus, instance, layout = built_then_removed
    assert "gamma" in instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)  # as a UI launch finds it
    result = materialize_global(corpus, instance)
    assert published_source_ids(published_shards(layout)) == ["alpha", "beta"]
    checks = {ev.check_name: ev.passed for ev in result.get_asset_check_evaluations()}
    assert checks["sources_in_ledger"] is True
    assert not layout.raw_source("gamma").exists() and not layout.stage("clean", "gamma").exists()
    near_blocks = dedup_stats(layout)  # the near-duplicate pairs between the kept sources are read back
    assert near_blocks["blocks"] == {"computed": 0, "reused": 3} and near_blocks["generated_pairs"] == 0


@pytest.mark.parametrize("entry", ["sensor", "cli"])
def test_a_removed_source_no_longer_headlines_the_per_source_assets(tmp_path, entry):
    from corpus_factory import write_setup

    from corpus_dagster.defs.automation import ledger_sensor
    from corpus_dagster.defs.instance import reconcile_partitions

    corpus = CorpusConfig(config_path=str(write_setup(tmp_path)))
    clean = dg.AssetKey("clean_documents")
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        (latest,) = instance.fetch_materializations(clean, limit=1).records
        assert latest.partition_key == "gamma"  # the last source built is what the asset page headlines
        drop_row(corpus.layout().ledger, "gamma")
        if entry == "sensor":
            ledger_sensor(dg.build_sensor_context(instance=instance, resources={"corpus": corpus}))
        else:
            reconcile_partitions(instance, ["alpha", "beta"])
        (latest,) = instance.fetch_materializations(clean, limit=1).records
        assert latest.partition_key in {"alpha", "beta"}
        assert instance.get_materialized_partitions(clean) == {"alpha", "beta"}
        assert not instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": "gamma"}))
        assert instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": "alpha"}))


def test_the_instance_yaml_turns_onboarding_off_and_upgrades_what_earlier_versions_wrote(tmp_path):
    from corpus_dagster.defs.instance import INSTANCE_YAML, ensure_dagster_home

    ensure_dagster_home(tmp_path / "fresh")
    assert yaml.safe_load((tmp_path / "fresh" / "dagster.yaml").read_text()) == {
        "telemetry": {"enabled": False}, "nux": {"enabled": False}}
    old = tmp_path / "old"
    old.mkdir()
    (old / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    ensure_dagster_home(old)
    assert (old / "dagster.yaml").read_text() == INSTANCE_YAML
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    ensure_dagster_home(mine)
    assert (mine / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


@pytest.mark.parametrize("entry", ["dagster", "cli"])
def test_a_last_source_whose_every_document_is_rejected_builds(tmp_path, entry):
    """The last source by id keeps no document: its near-duplicate blocks are planned with the others'."""
    from corpus_factory import write_jsonl, write_setup

    config = write_setup(tmp_path)
    layout = layout_of(config)
    short = tmp_path / "sources" / "zulu.jsonl"
    write_jsonl(short, [{"text": f"ok {i}."} for i in range(5)])  # too few words for the quality filters
    with layout.ledger.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"source_id": "zulu", "urls": [f"file://{short}"], "format": "jsonl",
                             "license_spdx": "CC0-1.0"}) + "\n")
    if entry == "cli":
        proc = run_cli(config, tmp_path / "home")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    else:
        corpus = CorpusConfig(config_path=str(config))
        with dg.instance_for_test() as instance:
            materialize_sources(corpus, instance)
            assert materialize_global(corpus, instance).success
    stats = dedup_stats(layout)
    assert stats["blocks"] == {"computed": 10, "reused": 0}  # 4 sources: 4 own blocks and 6 between two
    assert published_source_ids(published_shards(layout)) == ["alpha", "beta", "gamma"]


def test_a_cli_on_another_machine_leaves_this_machines_sessions_alone(tmp_path, monkeypatch):
    """An instance on PostgreSQL is shared by CLIs on several machines; a session lock is a file on the machine
    of its CLI, so only that machine can judge the session dead."""
    import socket

    home = tmp_path / "home"
    with instance_setup(home) as instance:
        job = dg.GraphDefinition("g").to_job()
        elsewhere = instance.create_run_for_job(job, tags={SESSION_TAG: "s-b", SESSION_HOST_TAG: "machine-b"})
        here = instance.create_run_for_job(job, tags=session_tags("s-a"))
        assert here.tags[SESSION_HOST_TAG] == socket.gethostname()
        for run in (elsewhere, here):
            instance.handle_run_event(run.run_id, dg.DagsterEvent(
                event_type_value="PIPELINE_START", job_name=run.job_name, message="start"))
        assert fail_orphaned_runs(instance, home) == [here.run_id]  # no lock of s-a here: it died
        assert instance.get_run_by_id(elsewhere.run_id).status == dg.DagsterRunStatus.STARTED
        monkeypatch.setattr(socket, "gethostname", lambda: "machine-b")
        assert fail_orphaned_runs(instance, home) == [elsewhere.run_id]  # machine b's own CLI may
        instance.dispose()
