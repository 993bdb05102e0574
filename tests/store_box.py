"""An S3 server on 127.0.0.1 (moto's, in a thread of the test process) and corpus configs whose artifacts root is
a prefix of its bucket: what the CLI tests of the artifacts store run against."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import yaml

from corpus_dagster.core.storage import forget_stores

BUCKET = "corpus-store-test"
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def s3_in_a_thread() -> Iterator[dict[str, str]]:
    """moto's S3 server on 127.0.0.1 with one bucket; yields the environment a client needs."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", **S3_KEYS}
        client(env).create_bucket(Bucket=BUCKET)
        forget_stores()
        yield env
    finally:
        forget_stores()
        server.stop()


def client(env: dict[str, str]):
    """A boto3 client of the server: what a writer to the bucket (or an attacker) uses, not the project's code."""
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])


def store_config(root: Path, env: dict[str, str], extra_paths: dict | None = None) -> tuple[Path, str]:
    """The test corpus with its ledger uploaded under a fresh prefix of the bucket, and a config whose artifacts
    root is that prefix; returns (config, prefix)."""
    from corpus_factory import write_setup

    local = write_setup(root / "local", workers=1)
    cfg = yaml.safe_load(local.read_text())
    prefix = f"corpora/{uuid.uuid4().hex[:8]}"
    ledger = Path(cfg["paths"]["artifacts"]) / "corpus" / "LEDGER.jsonl"
    client(env).put_object(Bucket=BUCKET, Key=f"{prefix}/corpus/LEDGER.jsonl", Body=ledger.read_bytes())
    cfg["paths"] = {"artifacts": f"s3://{BUCKET}/{prefix}", **(extra_paths or {})}
    config = root / "store.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return config, prefix


def keys(env: dict[str, str], prefix: str) -> set[str]:
    """Every key under a prefix, as the server lists them (no client-side normalization)."""
    found: set[str] = set()
    for page in client(env).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found.update(obj["Key"] for obj in page.get("Contents", []))
    return found


def cli_env(root: Path, env: dict[str, str], machine: str) -> dict[str, str]:
    """The environment of a CLI run on `machine`: its own DAGSTER_HOME and mirror folder under root."""
    return {**os.environ, **env, "DAGSTER_HOME": str(root / machine / "dagster_home"),
            "CORPUS_MIRROR": str(root / machine / "mirror")}


def cli(root: Path, env: dict[str, str], machine: str, config: Path, *args: str,
        timeout: int = 600) -> subprocess.Popen:
    """Start `python -m corpus_dagster.run CONFIG` as a person starts it on `machine` (another working folder)."""
    work = root / machine / "work"
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config), *args], cwd=work,
                            env=cli_env(root, env, machine), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finished(proc: subprocess.Popen, timeout: int = 600) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err
