"""The CLI on a shared artifacts store (moto's S3 server on 127.0.0.1), played as a user with write access to the
bucket would play it: step values are JSON checked when loaded (a planted pickle runs nothing and fails the step
with one line), step values and run logs are kept for a stated number of runs, and the credentials given in
`paths.storage_options` stay out of everything Dagster records, the bucket, the run log and the UI.

Two CLI runs share one server and one DAGSTER_HOME (module fixture); the re-execution is the UI's "re-execute"
of the last `build_corpus` run, through Dagster's API.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import dagster as dg
import pytest
import yaml

pytestmark = pytest.mark.skipif(os.environ.get("CORPUS_DEPLOY") != "1",
                                reason="whole builds on an S3 server: run `make test-deploy`")

pytest.importorskip("moto")
pytest.importorskip("s3fs")

from cluster_box import s3_server  # noqa: E402
from corpus_factory import write_setup  # noqa: E402

from corpus_dagster.cli.progress_display import failure_message  # noqa: E402
from corpus_dagster.defs.resources import CorpusConfig  # noqa: E402
from corpus_dagster.defs.runner import GLOBAL_JOB, reconstructable_job, run_config_for  # noqa: E402

CHECKOUT = Path(__file__).resolve().parents[2]
WORKSPACE = CHECKOUT / "workspace.yaml"
BUCKET = "corpus-shared"
PREFIX = f"{BUCKET}/team/docs"
KEY_ID = f"AKIA{uuid.uuid4().hex[:16].upper()}"
SECRET = f"s3cr3t-{uuid.uuid4().hex}"
CREDENTIALS = (KEY_ID, SECRET)


class Planted:
    """Unpickling this creates the marker file: what a planted step value would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def cli_env(server: dict[str, str], home: Path) -> dict[str, str]:
    """The CLI's environment: the server's endpoint, no credentials (they are in the config's storage_options)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_ENDPOINT_URL": server["AWS_ENDPOINT_URL"], "AWS_DEFAULT_REGION": "us-east-1",
            "DAGSTER_HOME": str(home)}


def bucket_fs(server: dict[str, str]):
    import s3fs

    return s3fs.S3FileSystem(key=KEY_ID, secret=SECRET, endpoint_url=server["AWS_ENDPOINT_URL"])


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Two CLI runs on one S3 prefix, keeping the step values of 1 finished run and 1 run log."""
    root = tmp_path_factory.mktemp("shared")
    local_config = write_setup(root / "setup", workers=1)
    cfg = yaml.safe_load(local_config.read_text())
    cfg["paths"] = {"artifacts": f"s3://{PREFIX}", "ledger": str(Path(cfg["paths"]["artifacts"]) / "corpus" / "LEDGER.jsonl"),
                    "mirror": str(root / "mirror"), "storage_options": {"key": KEY_ID, "secret": SECRET},
                    "keep_step_values": 1, "keep_run_logs": 1}
    config = root / "shared.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    home = root / "dagster_home"
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    with s3_server(root / "s3") as server:
        bucket_fs(server).mkdir(BUCKET)
        procs = [subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=elsewhere,
                                env=cli_env(server, home), capture_output=True, text=True, timeout=900)
                 for _ in range(2)]
        yield {"root": root, "config": config, "home": home, "server": server, "procs": procs}


def global_runs(home: Path) -> list[dg.DagsterRun]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return sorted((r for r in instance.get_runs() if r.job_name == GLOBAL_JOB),
                      key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)


def test_both_runs_exit_0(shared):
    for proc in shared["procs"]:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_step_values_are_json_and_kept_for_the_newest_finished_run_only(shared):
    fs = bucket_fs(shared["server"])
    objects = fs.find(f"{PREFIX}/.dagster-io")
    first, second = global_runs(shared["home"])
    run_ids = {name.split("/.dagster-io/", 1)[1].split("/")[0] for name in objects}
    assert run_ids == {second.run_id}  # the first run's values went when the second finished (keep 1)
    assert objects and all(name.endswith(".json") for name in objects)
    for name in objects:
        value = json.loads(fs.cat_file(name))
        assert set(value) == {"key", "units", "cached", "info", "started"}


def test_pushed_run_logs_keep_the_newest(shared):
    fs = bucket_fs(shared["server"])
    logs = sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{PREFIX}/logs"))
    assert len(logs) == 1, logs
    second_log = shared["procs"][1].stdout.splitlines()[0].removeprefix("run: log ").strip()
    assert logs == [Path(second_log).name]


def test_a_planted_pickle_under_a_step_value_key_runs_nothing_and_fails_the_step_with_one_line(shared, monkeypatch):
    """Every value of the last build_corpus run replaced by a pickle (in the bucket, and where Dagster's default
    IO manager would look in DAGSTER_HOME); re-executing its dedup finish step, as the UI does, loads one."""
    server, home = shared["server"], shared["home"]
    marker = shared["root"] / "planted-code-ran"
    fs = bucket_fs(server)
    parent = global_runs(home)[-1]
    planted = pickle.dumps(Planted(marker))
    for name in fs.find(f"{PREFIX}/.dagster-io/{parent.run_id}"):
        fs.pipe_file(name, planted)
        default_path = home / "storage" / parent.run_id / Path(name).parent.name / Path(name).stem
        default_path.parent.mkdir(parents=True, exist_ok=True)
        default_path.write_bytes(planted)
    for key, value in cli_env(server, home).items():
        monkeypatch.setenv(key, value)
    corpus = CorpusConfig(config_path=str(shared["config"]))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.execute_job(
            reconstructable_job(corpus, GLOBAL_JOB), instance, run_config=run_config_for(
                {"config_path": corpus.config_path, "artifacts": None, "workers": None}),
            reexecution_options=dg.ReexecutionOptions(parent_run_id=parent.run_id,
                                                      step_selection=["dedup.dedup_finish"]))
        failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert not result.success
    assert not marker.exists()
    assert [e.step_key for e in failures] == ["dedup.dedup_finish"]
    message, error = failure_message(failures[0].step_failure_data)
    assert error == "StepValueError" and "\n" not in message
    assert "dedup.dedup_verify_plan/result is not JSON" in message and "never loaded" in message


# --- the credentials -------------------------------------------------------------------------------------------


def sqlite_cells(path: Path) -> list[bytes]:
    """Every cell of every table of a SQLite database, as bytes."""
    cells: list[bytes] = []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                cells.extend(c if isinstance(c, bytes) else str(c).encode() for c in row if c is not None)
    return cells


def unpacked(data: bytes) -> list[bytes]:
    """The bytes, and what they decompress to when they are zlib or gzip data (Dagster compresses snapshots)."""
    out = [data]
    for decompress in (zlib.decompress, gzip.decompress):
        try:
            out.append(decompress(data))
        except (zlib.error, OSError, EOFError):
            pass
    return out


def found_in(blobs: list[bytes]) -> list[str]:
    """The credentials that any of the blobs (or what it decompresses to) holds."""
    return sorted({c for blob in blobs for data in unpacked(blob) for c in CREDENTIALS if c.encode() in data})


def home_blobs(home: Path) -> list[bytes]:
    """Every file of DAGSTER_HOME, and every cell of each SQLite database there."""
    blobs = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        blobs.append(data)
        if data.startswith(b"SQLite format 3\x00"):
            blobs.extend(sqlite_cells(path))
    return blobs


def test_the_scan_finds_credentials_in_a_compressed_database_cell(tmp_path):
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute("CREATE TABLE snapshots (body BLOB)")
        db.execute("INSERT INTO snapshots VALUES (?)", (zlib.compress(json.dumps({"secret": SECRET}).encode()),))
    assert found_in(home_blobs(tmp_path)) == [SECRET]


def test_the_credentials_are_nowhere_in_dagster_home(shared):
    blobs = home_blobs(shared["home"])
    assert len(blobs) > 20  # the runs, event log and schedule databases and their cells
    assert found_in(blobs) == []


def test_the_credentials_are_nowhere_in_the_bucket_the_run_logs_or_the_console(shared):
    fs = bucket_fs(shared["server"])
    objects = fs.find(BUCKET)
    assert any("/logs/run-" in name for name in objects)
    assert found_in([fs.cat_file(name) for name in objects]) == []
    mirror_logs = sorted((shared["root"] / "mirror").rglob("run-*.log"))
    assert mirror_logs
    assert found_in([p.read_bytes() for p in mirror_logs]) == []
    assert found_in([(p.stdout + p.stderr).encode() for p in shared["procs"]]) == []


RESOURCES_QUERY = """
query Resources($selector: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $selector) {
    __typename
    ... on ResourceDetailsList {
      results { name description resourceType
                configFields { name description defaultValueAsJson }
                configuredValues { key value type } }
    }
    ... on PythonError { message }
  }
}
"""


def test_the_credentials_are_not_in_the_uis_resources_answer(shared, monkeypatch):
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_graphql.test.utils import execute_dagster_graphql, infer_repository_selector

    for key, value in cli_env(shared["server"], shared["home"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CORPUS_CONFIG", str(shared["config"]))  # the UI as `CORPUS_CONFIG=... make ui` starts it
    monkeypatch.chdir(CHECKOUT)
    with dg.DagsterInstance.from_config(str(shared["home"])) as instance, \
            WorkspaceProcessContext(instance, WorkspaceFileTarget([str(WORKSPACE)])) as process:
        context = process.create_request_context()
        result = execute_dagster_graphql(context, RESOURCES_QUERY, {"selector": infer_repository_selector(context)})
    answer = result.data["allTopLevelResourceDetailsOrError"]
    assert answer["__typename"] == "ResourceDetailsList", answer
    resources = {r["name"]: r for r in answer["results"]}
    assert {"corpus", "io_manager"} <= set(resources)
    assert resources["io_manager"]["configuredValues"] == []
    assert found_in([json.dumps(answer).encode()]) == []
