"""The whole graph on a cluster that shares no disk: artifacts and sources on an S3 server, the Dagster instance
on PostgreSQL, every step on one of two `dask worker` processes that each start in an empty folder of their
own. The shards, manifest and token streams equal an in-process run on local disk over the same source URLs.

Runs in `make test-cluster` (CORPUS_CLUSTER=1), which installs PostgreSQL when it is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
import yaml

pytestmark = pytest.mark.skipif(os.environ.get("CORPUS_CLUSTER") != "1",
                                reason="cluster in a box: run `make test-cluster`")

pytest.importorskip("moto")
pytest.importorskip("s3fs")
pytest.importorskip("dagster_postgres")
pytest.importorskip("distributed")

from cluster_box import dask_cluster, free_port, postgres_server, s3_server, stop  # noqa: E402
from corpus_factory import make_corpus, write_jsonl  # noqa: E402
from dagster_runs import build_in_process, failures  # noqa: E402

from corpus_dagster.core.ledger import load_ledger  # noqa: E402
from corpus_dagster.core.storage import Store  # noqa: E402
from corpus_dagster.defs.automation import ledger_sensor  # noqa: E402
from corpus_dagster.defs.resources import CorpusConfig  # noqa: E402
from corpus_dagster.defs.runner import source_pool  # noqa: E402

BUCKET = "corpus-box"
PROJECT = Path(__file__).resolve().parents[2]
PUBLISHED = ("corpus/testset", "tokens/testset")


def published(root: Path) -> dict[str, str]:
    """sha256 of the shards, their manifest and the token streams (paths relative to the artifacts root)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for top in PUBLISHED for p in sorted((root / top).rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def s3_ledger(tmp_path: Path) -> list[dict]:
    """The test corpus's three sources uploaded to the S3 server; ledger rows that name them by s3:// URL."""
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    inputs = make_corpus(tmp_path / "inputs")
    fs.put(str(inputs["alpha"]), f"{BUCKET}/sources/alpha.jsonl")
    fs.put(str(inputs["beta"]), f"{BUCKET}/sources/beta.jsonl.zst")
    for f in sorted(inputs["gamma"].iterdir()):
        fs.put(str(f), f"{BUCKET}/sources/gamma/{f.name}")
    return [
        {"source_id": "alpha", "urls": [f"s3://{BUCKET}/sources/alpha.jsonl"], "format": "jsonl", "url_field": "link",
         "license_spdx": "CC-BY-4.0"},
        {"source_id": "beta", "urls": [f"s3://{BUCKET}/sources/beta.jsonl.zst"], "format": "jsonl.zst",
         "text_field": "content", "license_spdx": "MIT"},
        {"source_id": "gamma", "urls": [f"s3://{BUCKET}/sources/gamma/*.txt"], "format": "text",
         "license_spdx": "CC0-1.0"},
    ]


def write_config(path: Path, artifacts: str, **extra: object) -> Path:
    cfg = {"dataset": "testset", "version": "v1", "shard_rows": 25, "val_permille": 100, "workers": 1,
           "paths": {"artifacts": artifacts}, **extra}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def step_table(instance: dg.DagsterInstance, runs: list[tuple[str, str]]) -> str:
    """A Markdown table of every step of `runs` ((label, run id)): where it ran and how long it took."""
    lines = ["| run | step | worker pid | seconds |", "|---|---|---:|---:|"]
    for label, run_id in runs:
        started: dict[str, float] = {}
        for record in instance.get_records_for_run(run_id).records:
            entry = record.event_log_entry
            event = entry.dagster_event
            if event is None:
                continue
            if event.event_type_value == "STEP_START":
                started[event.step_key] = entry.timestamp
            elif event.event_type_value == "STEP_SUCCESS" and event.step_key in started:
                lines.append(f"| {label} | {event.step_key} | {event.pid} | "
                             f"{entry.timestamp - started[event.step_key]:.1f} |")
    return "\n".join(lines) + "\n"


def test_a_cluster_without_a_shared_disk_gives_the_local_bytes(tmp_path, monkeypatch):
    with s3_server(tmp_path / "s3") as s3_env:
        for k, v in s3_env.items():
            monkeypatch.setenv(k, v)
        rows = s3_ledger(tmp_path)

        # The reference: in process, artifacts on local disk, the same source URLs.
        local_root = tmp_path / "local" / "artifacts"
        write_jsonl(local_root / "corpus" / "LEDGER.jsonl", rows)
        build_in_process(write_config(tmp_path / "local" / "corpus.yaml", str(local_root)))
        expected = published(local_root)
        assert any(k.startswith("tokens/") for k in expected) and any(k.endswith(".parquet") for k in expected)

        # The cluster: artifacts on S3, instance on PostgreSQL, steps on dask workers in folders of their own.
        url = f"s3://{BUCKET}/artifacts"
        import s3fs

        s3fs.S3FileSystem().pipe(f"{BUCKET}/artifacts/corpus/LEDGER.jsonl",
                                 (local_root / "corpus" / "LEDGER.jsonl").read_bytes())
        monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "driver-mirror"))
        with postgres_server(tmp_path / "pg") as pg, dask_cluster(tmp_path / "dask", s3_env, 2) as box:
            config = write_config(tmp_path / "cluster" / "corpus.yaml", url,
                                  executor={"kind": "dask", "dask_address": box.address, "fan_out": 2})
            corpus = CorpusConfig(config_path=str(config))
            ids = [s.source_id for s in load_ledger(corpus.layout().ledger)]
            home = tmp_path / "dagster_home"
            home.mkdir()
            overrides = {"storage": {"postgres": pg},
                         "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                                          "class": "NoOpComputeLogManager"}}
            with dg.DagsterInstance.local_temp(str(home), overrides=overrides) as instance:
                assert type(instance.run_storage).__name__ == "PostgresRunStorage"
                with source_pool(corpus, instance, ids) as pool:
                    sources = pool.run_sources(ids)
                    corpus_run = pool.run_global()
                assert [o.success for o in sources] == [True] * len(ids), failures(instance, sources[0].run_id)
                assert corpus_run.success, failures(instance, corpus_run.run_id)
                table = step_table(instance, [*((f"build_source {o.partition}", o.run_id) for o in sources),
                                              ("build_corpus", corpus_run.run_id)])
                out = PROJECT / "tests" / "cluster" / "artifacts" / "cluster-steps.md"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(table, encoding="utf-8")  # the step table of the last cluster run, for people
                print(table)
                pids = {record.event_log_entry.dagster_event.pid
                        for record in instance.get_records_for_run(corpus_run.run_id).records
                        if record.event_log_entry.dagster_event is not None
                        and record.event_log_entry.dagster_event.event_type_value == "STEP_SUCCESS"}

            # Every step ran in a dask worker process, each working on a mirror in its own folder.
            assert pids and pids <= box.worker_pids, (pids, box.worker_pids)
            for d in box.worker_dirs:
                assert any((d / "mirror").rglob("_RECORD.json")), f"{d} holds no mirrored stage record"

        # The values passed between steps went through the store, not the instance's folder.
        import s3fs

        assert s3fs.S3FileSystem().find(f"{BUCKET}/artifacts/.dagster-io/{corpus_run.run_id}")

        # A machine that never took part finds every published byte in the store.
        fresh = Store(url, tmp_path / "fresh-mirror")
        assert fresh.pull().files > 0
        assert published(fresh.mirror) == expected


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch):
    monkeypatch.delenv("CORPUS_MIRROR", raising=False)


def committed_view_problems(fs, root: str) -> list[str]:
    """What a reader of the store would find broken: a stage record, shards manifest or token manifest naming a
    file that is missing or whose sha256 differs. A killed run must leave none."""
    problems = []

    def check(folder: str, name: str, sha256: str) -> None:
        path = posixpath.normpath(f"{folder}/{name}")
        if not fs.exists(path):
            problems.append(f"{path}: named but missing")
        elif hashlib.sha256(fs.cat_file(path)).hexdigest() != sha256:
            problems.append(f"{path}: sha256 differs from what names it")

    for path in fs.find(root):
        folder, name = path.rsplit("/", 1)
        if "/.dagster-io/" in path or name not in ("_RECORD.json", "_MANIFEST.json", "_TOKENS.json"):
            continue
        doc = json.loads(fs.cat_file(path))
        if name == "_RECORD.json":
            base = folder if doc.get("output_dir", ".") == "." else f"{folder}/{doc['output_dir']}".rstrip("/")
            for rel, entry in doc.get("outputs", {}).items():
                check(base, rel, entry["sha256"])
        elif name == "_MANIFEST.json":
            for shard in doc["shards"]:
                check(folder, shard["name"], shard["sha256"])
        else:
            for split in doc["splits"].values():
                for part in split["files"]:
                    for kind in ("bin", "idx"):
                        check(folder, part[kind]["name"], part[kind]["sha256"])
    return problems


def unit_marker_versions(bucket: str, prefix: str) -> dict[str, int]:
    """How many times each unit's done-marker was written (S3 versions, delete markers not counted)."""
    import boto3

    s3 = boto3.client("s3")
    counts: dict[str, int] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for version in page.get("Versions", []):
            key = version["Key"]
            if "/.work-" in key and "/units/" in key and key.endswith(".json"):
                counts[key] = counts.get(key, 0) + 1
    return counts


def webserver_runs(config: Path, env: dict[str, str], log: Path) -> list[tuple[str, str]]:
    """(job, status) of every run, as the UI's GraphQL API lists them from `dagster-webserver` on the instance."""
    port = free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p",
                             str(port), "-w", str(PROJECT / "workspace.yaml")], cwd=PROJECT,
                            env={**env, "CORPUS_CONFIG": str(config)}, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    query = json.dumps({"query": "{ runsOrError { ... on Runs { results { jobName status } } } }"}).encode()
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as response:
                    results = json.loads(response.read())["data"]["runsOrError"]["results"]
                return [(r["jobName"], r["status"]) for r in results]
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dagster-webserver did not answer; see {log}") from None
                time.sleep(1)
    finally:
        stop(proc)


def cli(config: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config)], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def test_a_cluster_run_killed_mid_stage_resumes_without_redoing_finished_units(tmp_path, monkeypatch):
    import s3fs

    with s3_server(tmp_path / "s3") as s3_env, postgres_server(tmp_path / "pg") as pg:
        for k, v in s3_env.items():
            monkeypatch.setenv(k, v)
        rows = s3_ledger(tmp_path)
        fs = s3fs.S3FileSystem()
        import boto3

        boto3.client("s3").put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        fs.pipe(f"{BUCKET}/artifacts/corpus/LEDGER.jsonl",
                "".join(json.dumps(r) + "\n" for r in rows).encode())
        home = tmp_path / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text(yaml.safe_dump({
            "storage": {"postgres": pg},
            "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                             "class": "NoOpComputeLogManager"}}))
        env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_MIRROR": str(tmp_path / "driver-mirror")}
        url = f"s3://{BUCKET}/artifacts"

        # First run: killed, with the scheduler and both workers, once a unit of a global stage is done.
        with dask_cluster(tmp_path / "dask-1", s3_env, 2) as box:
            config = write_config(tmp_path / "run-1.yaml", url, executor={"kind": "dask", "dask_address": box.address,
                                                                           "fan_out": 2})
            first = cli(config, env, tmp_path / "run-1.log")
            deadline = time.monotonic() + 600
            done_at_kill: dict[str, str] = {}
            while time.monotonic() < deadline and first.poll() is None:
                fs.invalidate_cache()
                done_at_kill = {p: "" for p in fs.find(f"{BUCKET}/artifacts")
                                if "/.work-" in p and "/units/" in p and p.endswith(".json")}
                if done_at_kill:
                    break
                time.sleep(0.05)
            for proc in (first, *box.workers, box.scheduler):
                stop(proc, signal.SIGKILL)
        assert done_at_kill, f"the run ended (rc {first.returncode}) before any unit was seen; see {tmp_path}/run-1.log"
        fs.invalidate_cache()
        assert committed_view_problems(fs, f"{BUCKET}/artifacts") == []

        # Second run: a new scheduler and new workers in new empty folders; the CLI resumes.
        with dask_cluster(tmp_path / "dask-2", s3_env, 2) as box:
            config = write_config(tmp_path / "run-2.yaml", url, executor={"kind": "dask", "dask_address": box.address,
                                                                           "fan_out": 2})
            second = cli(config, env, tmp_path / "run-2.log")
            assert second.wait(900) == 0, (tmp_path / "run-2.log").read_text()[-4000:]
        fs.invalidate_cache()
        assert committed_view_problems(fs, f"{BUCKET}/artifacts") == []
        versions = unit_marker_versions(BUCKET, "artifacts/")
        kept = [p.split("/", 1)[1] for p in done_at_kill]
        redone = [k for k in kept if versions.get(k, 0) > 1]
        assert redone == [], f"{len(redone)} of {len(kept)} units finished before the kill were done again"
        assert all(versions.get(k, 0) == 1 for k in kept)
        # and resumed in the same work folders: no stage planned its units again under another folder
        for k in kept:
            folder = k.rsplit("/units/", 1)[0]
            stage = folder.rsplit("/", 1)[0]
            others = {v.rsplit("/units/", 1)[0] for v in versions
                      if v.startswith(stage + "/.work-") and not v.startswith(folder + "/")}
            assert not others, (folder, others)
        print(f"units finished before the kill: {len(kept)}, redone: {len(redone)}; "
              f"units written in all: {len(versions)}")
        fresh = Store(url, tmp_path / "fresh-mirror")
        fresh.pull()
        assert published(fresh.mirror)  # the resumed run published

        # The sensor and the UI read the same PostgreSQL instance and store as the CLI.
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        corpus = CorpusConfig(config_path=str(config))
        with dg.DagsterInstance.get() as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            tick = ledger_sensor(dg.build_sensor_context(instance=instance, resources={"corpus": corpus}))
            assert not getattr(tick, "run_requests", None), tick  # the CLI left nothing for it to do
        runs = webserver_runs(config, env, tmp_path / "webserver.log")
        assert ("build_corpus", "SUCCESS") in runs and ("build_corpus", "FAILURE") in runs, runs  # killed, resumed
