"""A cluster in a box on 127.0.0.1: an S3-compatible server (moto), a PostgreSQL server, a dask scheduler and
dask workers, each a real process listening on the loopback address only; a worker starts in its own empty
folder and shares no folder with the others.

Used by tests/cluster/ (`make test-cluster`) and bench/object_store.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corpus_dagster.core.storage import forget_stores

LOOPBACK = "127.0.0.1"
# Every dask process serves HTTP (health, metrics) beside its protocol port, `--no-dashboard` or not: on
# 0.0.0.0:8787 (scheduler) and 0.0.0.0:<random> (workers) unless told an address. The dask protocol is
# unauthenticated and runs pickled functions, so the box binds everything to the loopback address
# (tests/cluster/test_cluster_box_loopback.py checks every listening socket).
LOOPBACK_HTTP = ("--dashboard-address", f"{LOOPBACK}:0", "--no-dashboard")
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} is not listening on 127.0.0.1:{port} after {timeout_s:.0f} s")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 20) -> None:
    """Stop a process started with its own session, and everything it started."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start(cmd: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


@contextlib.contextmanager
def s3_server(folder: Path) -> Iterator[dict[str, str]]:
    """moto's S3 server; yields the environment a client needs (endpoint and test credentials)."""
    port = free_port()
    proc = start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], folder / "moto.log")
    try:
        wait_for_port(port, proc, "moto server")
        forget_stores()  # a file system cached for an earlier server of this process would call its old port
        yield {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", **S3_KEYS}
        forget_stores()
    finally:
        stop(proc)


def postgres_bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, else Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    return str(versions[-1]) if versions else None


@contextlib.contextmanager
def postgres_server(folder: Path) -> Iterator[dict[str, str]]:
    """A PostgreSQL server on 127.0.0.1 with a database `dagster`; yields dagster-postgres' storage config.

    As root it runs as the `postgres` user (the server refuses root)."""
    initdb, postgres = postgres_bin("initdb"), postgres_bin("postgres")
    if initdb is None or postgres is None:
        raise RuntimeError("no PostgreSQL server: install Debian's postgresql (make test-cluster does)")
    prefix: list[str] = []
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    if os.geteuid() == 0:
        # the postgres user cannot enter pytest's private temp folders: the server's own folder is in /tmp
        prefix = ["runuser", "-u", "postgres", "--"]
        folder = Path(tempfile.mkdtemp(prefix="corpus-pg-"))
        shutil.chown(folder, "postgres")
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "pgdata"
    made = subprocess.run([*prefix, initdb, "-D", str(data), "-A", "trust", "-U", user, "-E", "UTF8"],
                          capture_output=True, text=True, check=False)
    if made.returncode:
        raise RuntimeError(f"initdb failed ({made.returncode}): {made.stderr.strip()[-2000:]}")
    port = free_port()
    proc = start([*prefix, postgres, "-D", str(data), "-p", str(port), "-k", str(folder),
                  "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"], folder / "postgres.log")
    try:
        wait_for_port(port, proc, "postgres")
        import psycopg2

        for _ in range(100):
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=port, user=user, dbname="postgres")
                break
            except psycopg2.OperationalError:  # accepting connections a moment after it listens
                time.sleep(0.1)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE dagster")
        conn.close()
        # the driver named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, dagster-postgres needs psycopg2
        yield {"postgres_url": f"postgresql+psycopg2://{user}@127.0.0.1:{port}/dagster"}
    finally:
        stop(proc)
        if prefix:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class DaskBox:
    address: str
    worker_pids: set[int]  # the processes that run tasks (each `dask worker` runs one under its nanny)
    workers: list[subprocess.Popen]
    worker_dirs: list[Path]
    scheduler: subprocess.Popen


@contextlib.contextmanager
def dask_cluster(folder: Path, env: dict[str, str], n_workers: int = 2) -> Iterator[DaskBox]:
    """`dask scheduler` and `n_workers` `dask worker` processes (one thread each, non-daemonic so a step may
    start its own processes), each worker in its own empty folder with its own artifacts mirror there."""
    port = free_port()
    base = {**os.environ, **env, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler = start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", LOOPBACK, "--port",
                       str(port), *LOOPBACK_HTTP], folder / "scheduler.log", env=base)
    workers, dirs = [], []
    try:
        wait_for_port(port, scheduler, "dask scheduler")
        address = f"tcp://127.0.0.1:{port}"
        for i in range(n_workers):
            cwd = folder / f"worker-{i}"
            cwd.mkdir(parents=True)
            dirs.append(cwd)
            workers.append(start([sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", LOOPBACK,
                                  *LOOPBACK_HTTP, "--nthreads", "1", "--nworkers", "1",
                                  "--local-directory", str(cwd / "dask"), "--name", f"w{i}"],
                                 cwd / "worker.log", cwd=cwd, env={**base, "CORPUS_MIRROR": str(cwd / "mirror")}))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(n_workers, timeout=120)
            pids = set(client.run(os.getpid).values())
        yield DaskBox(address, pids, workers, dirs, scheduler)
    finally:
        for w in workers:
            stop(w)
        stop(scheduler)
