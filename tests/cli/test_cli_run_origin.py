"""Runs of `python -m corpus_dagster.run` carry what the UI needs to file and re-execute them.

The Overview timeline groups runs by the code location and repository of their remote job origin (a run without
one is left off it), and "Re-execute" warns of another version unless the run's job snapshot is the one the
loaded location's job has. So each CLI run must name the location workspace.yaml loads, with that location's
snapshot, and keep the run config it ran with.

`build_corpus`'s job snapshot is not yet the same in two processes: Dagster orders a downstream input's blocking
asset-check dependencies by output name only, every `@asset_check` op's output is named "result", and the ties
keep the order of a set of node handles, whose hashes (hash(None) in Python 3.11) differ per process. Its
snapshot test is an expected failure until the checks' dependencies have an order of their own.
"""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget

from corpus_dagster.defs.runner import GLOBAL_JOB, QUIET_CONSOLE, SOURCE_JOB

CHECKOUT = Path(__file__).resolve().parents[2]
WORKSPACE = CHECKOUT / "workspace.yaml"


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """A small corpus built through the CLI (as a person runs it: another working folder, its own DAGSTER_HOME),
    then the runs it stored and the code location workspace.yaml loads for its config."""
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("origin")
    config = write_setup(root, workers=2).resolve()
    home = root / "dagster_home"
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(home))
    mp.setenv("CORPUS_CONFIG", str(config))  # the location as `CORPUS_CONFIG=... make ui` loads it
    mp.delenv("CORPUS_ARTIFACTS", raising=False)
    mp.chdir(CHECKOUT)  # `make ui` runs dagster dev here; the location's working directory is relative to it
    try:
        with dg.DagsterInstance.get() as instance:
            runs = list(reversed(instance.get_runs()))
            with WorkspaceProcessContext(instance, WorkspaceFileTarget([str(WORKSPACE)])) as ctx:
                workspace = ctx.create_request_context()
                entries = workspace.get_code_location_entries()
                assert len(entries) == 1 and all(e.load_error is None for e in entries.values()), entries
                location = workspace.get_code_location(next(iter(entries)))
                jobs = {(location.name, repo.name, job.name): job.identifying_job_snapshot_id
                        for repo in location.get_repositories().values() for job in repo.get_all_jobs()}
    finally:
        mp.undo()
    return config, runs, jobs


def test_the_cli_made_one_run_per_source_and_one_corpus_run(cli_runs):
    _, runs, _ = cli_runs
    assert sorted(r.job_name for r in runs) == [GLOBAL_JOB] + [SOURCE_JOB] * 3
    assert all(r.is_success for r in runs)


def test_each_run_names_the_code_location_repository_and_job_the_workspace_loads(cli_runs):
    _, runs, jobs = cli_runs
    for run in runs:
        origin = run.remote_job_origin
        assert origin is not None, run.run_id  # without one the Overview timeline leaves the run off
        key = (origin.repository_origin.code_location_origin.location_name, origin.repository_origin.repository_name,
               origin.job_name)
        assert key in jobs, (key, sorted(jobs))
        assert origin.job_name == run.job_name


def assert_snapshot_of_workspace_job(runs, jobs, job_name: str) -> None:
    """Each run of the job has the snapshot id the workspace's job has: else "Re-execute" warns of another version."""
    chosen = [r for r in runs if r.job_name == job_name]
    assert chosen
    for run in chosen:
        origin = run.remote_job_origin
        assert origin is not None, run.run_id
        key = (origin.repository_origin.code_location_origin.location_name, origin.repository_origin.repository_name,
               origin.job_name)
        assert run.job_snapshot_id == jobs[key], run.job_name


def test_source_runs_have_the_job_snapshot_of_the_workspace_job(cli_runs):
    _, runs, jobs = cli_runs
    assert_snapshot_of_workspace_job(runs, jobs, SOURCE_JOB)


@pytest.mark.xfail(strict=True, reason="build_corpus's snapshot orders its blocking-check dependencies per process")
def test_the_corpus_run_has_the_job_snapshot_of_the_workspace_job(cli_runs):
    _, runs, jobs = cli_runs
    assert_snapshot_of_workspace_job(runs, jobs, GLOBAL_JOB)


def test_each_run_keeps_the_config_it_ran_with(cli_runs):
    config, runs, _ = cli_runs
    corpus = {"config_path": str(config), "artifacts": None, "workers": None}
    for run in runs:
        # the source runs going at once (2 of workers 2) ran with their share of workers, and say so
        ran = {**corpus, "workers": 1} if run.job_name == SOURCE_JOB else corpus
        assert run.run_config == {**QUIET_CONSOLE, "resources": {"corpus": {"config": ran}}}, run.job_name
