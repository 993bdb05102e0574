"""`python -m corpus_dagster.run` stopped by a signal mid-run: SIGINT 130, SIGTERM 143, one line, no traceback,
its runs CANCELED in the instance, no temp file left, and a rerun that resumes to the same bytes.

One generated source large enough that its steps take seconds, built through a sequence of interrupted CLI
runs on one artifacts root (each later run resumes the earlier's work): Ctrl-C to the CLI's process group
while the source's run goes, SIGTERM to the CLI's pid alone while it goes again, SIGINT to the pid alone while
the corpus run goes (its step pools busy), Ctrl-C twice while it goes again, then a rerun to the end. The signal is sent when the console shows
a step line, so the run is mid-way whatever the machine's speed: what follows that line takes seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import yaml

from corpus_dagster.core.atomic import is_temp_name

DOCS = 1500
TIMEOUT_S = 300


@dataclass
class Stopped:
    returncode: int
    stdout: str
    stderr: str
    runs: list[dg.DagsterRun]  # the runs this CLI session created, as the instance has them afterwards


def _setup(root: Path, docs: int = DOCS) -> Path:
    """One source (so its run gets every worker: the corpus run's step pools have two processes)."""
    from corpus_factory import ledger_rows, make_corpus, write_jsonl

    inputs = make_corpus(root, docs_per_source=docs)
    artifacts = root / "artifacts"
    write_jsonl(artifacts / "corpus" / "LEDGER.jsonl", ledger_rows(inputs)[:1])
    cfg = {"dataset": "testset", "version": "v1", "shard_rows": 250, "val_permille": 100, "workers": 2,
           "paths": {"artifacts": str(artifacts)}}
    config = root / "corpus.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return config


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(root / "dagster_home")}


def _run_ids(root: Path) -> set[str]:
    home = root / "dagster_home"
    if not (home / "dagster.yaml").exists():
        return set()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return {r.run_id for r in instance.get_runs()}


def _stop_at(root: Path, config: Path, line_has: str, signum: int, to_group: bool, times: int = 1) -> Stopped:
    """Start the CLI in a session of its own, wait for a console line containing `line_has`, send `signum` to
    the CLI's pid (or its process group, as a terminal's Ctrl-C does) `times` times and wait for it to end."""
    before = _run_ids(root)
    proc = subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=root, env=_env(root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line_has in line:
                break
        else:
            pytest.fail(f"no line with {line_has!r} before the CLI ended: {''.join(seen)[-2000:]}")
        for _ in range(times):
            (os.killpg if to_group else os.kill)(proc.pid, signum)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with dg.DagsterInstance.from_config(str(root / "dagster_home")) as instance:
        runs = [r for r in instance.get_runs() if r.run_id not in before]
    return Stopped(proc.returncode, "".join(seen) + out, err, runs)


def _stop_mid_source_run(tmp_path_factory, name: str, signum: int, to_group: bool) -> tuple[Path, Path, Stopped]:
    """`_stop_at` the source's first step line, on a fresh root. The console follows the event log, so on a
    loaded machine that line can come after the source's run has ended: then no run was going, which is
    right but proves nothing, and the stop is made again on a fresh root with a source four times larger,
    whose run outlasts the lag."""
    for docs in (DOCS, 4 * DOCS):
        root = tmp_path_factory.mktemp(name)
        config = _setup(root, docs)
        stop = _stop_at(root, config, "alpha            raw_documents", signum, to_group)
        ended_first = stop.runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in stop.runs)
        if not (ended_first and "no run was going" in stop.stderr):
            break
    return root, config, stop


def _temp_leftovers(artifacts: Path) -> list[str]:
    return sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("*")
                  if is_temp_name(p.name) or ".spill-" in p.name)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """The sequence of stops, then the rerun to the end; each result by name."""
    results: dict[str, object] = {}
    root, config, results["group_sigint"] = _stop_mid_source_run(tmp_path_factory, "signals", signal.SIGINT, True)
    artifacts = root / "artifacts"
    results["group_sigint_temps"] = _temp_leftovers(artifacts)
    # SIGTERM on an artifacts root of its own: on the first one alpha's fetch is done, so its run could end
    # before the signal lands and no run would be going
    term_root, _, results["pid_sigterm"] = _stop_mid_source_run(tmp_path_factory, "signals-term", signal.SIGTERM,
                                                                False)
    results["pid_sigterm_temps"] = _temp_leftovers(term_root / "artifacts")
    results["pid_sigint"] = _stop_at(root, config, "corpus           dedup", signal.SIGINT, False)
    results["pid_sigint_temps"] = _temp_leftovers(artifacts)
    # the corpus run again (dedup is done: its line comes at once), and Ctrl-C pressed twice
    results["double_ctrl_c"] = _stop_at(root, config, "corpus           dedup", signal.SIGINT, True, times=2)
    results["rerun"] = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=root,
                                      env=_env(root), capture_output=True, text=True, timeout=TIMEOUT_S)
    return root, config, results


def _assert_stopped(stop: Stopped, code: int, signame: str) -> None:
    detail = stop.stdout[-2000:] + stop.stderr[-2000:]
    assert stop.returncode == code, detail
    assert "Traceback" not in stop.stderr and "Traceback" not in stop.stdout, detail
    lines = [line for line in stop.stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and stop.stderr.strip() == lines[0], detail
    assert lines[0].startswith(f"run: interrupted by {signame}: run") and lines[0].endswith(
        "canceled; finished steps are kept, rerun to resume"), lines[0]
    canceled = [r for r in stop.runs if r.status == dg.DagsterRunStatus.CANCELED]
    assert canceled, [(r.job_name, r.status) for r in stop.runs]
    assert all(r.status in (dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.SUCCESS) for r in stop.runs), \
        [(r.job_name, r.status) for r in stop.runs]
    for run in canceled:
        assert run.run_id in lines[0]


def test_ctrl_c_to_the_process_group_exits_130_and_cancels_the_run(stopped):
    _, _, results = stopped
    _assert_stopped(results["group_sigint"], 130, "SIGINT")
    assert results["group_sigint_temps"] == []


def test_sigterm_to_the_pid_exits_143_and_cancels_the_run(stopped):
    _, _, results = stopped
    stop = results["pid_sigterm"]
    _assert_stopped(stop, 143, "SIGTERM")
    assert results["pid_sigterm_temps"] == []
    assert {r.job_name for r in stop.runs if r.status == dg.DagsterRunStatus.CANCELED} == {"build_source"}


def test_sigint_to_the_pid_mid_corpus_run_exits_130_and_cancels_it(stopped):
    _, _, results = stopped
    stop = results["pid_sigint"]
    _assert_stopped(stop, 130, "SIGINT")
    assert results["pid_sigint_temps"] == []
    assert "build_corpus" in {r.job_name for r in stop.runs if r.status == dg.DagsterRunStatus.CANCELED}


def test_a_second_ctrl_c_stops_at_once_with_the_same_one_line(stopped):
    """The run processes are killed instead of waited for; the run is CANCELED all the same, and what the
    killed processes leave (a temp file, the resource tracker's warning) stays off the console."""
    _, _, results = stopped
    _assert_stopped(results["double_ctrl_c"], 130, "SIGINT")


def test_rerun_after_the_stops_resumes_to_the_bytes_of_an_uninterrupted_build(stopped, tmp_path):
    from dagster_runs import build_in_process, published_bytes

    root, config, results = stopped
    rerun = results["rerun"]
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    reference = tmp_path / "reference"
    (reference / "artifacts" / "corpus").mkdir(parents=True)
    shutil.copy(root / "artifacts" / "corpus" / "LEDGER.jsonl", reference / "artifacts" / "corpus" / "LEDGER.jsonl")
    cfg = yaml.safe_load(config.read_text())
    cfg["paths"]["artifacts"] = str(reference / "artifacts")
    (reference / "corpus.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    build_in_process(reference / "corpus.yaml")
    expected = published_bytes(reference / "artifacts")
    assert any(name.endswith(".parquet") for name in expected)
    assert published_bytes(root / "artifacts") == expected
