"""The cluster in a box listens on 127.0.0.1 only: the dask protocol is unauthenticated and runs the pickled
functions it is sent, so a scheduler, worker, nanny or dashboard on another interface would hand the machine
to its network. Every listening socket of every process the box starts (this test's descendants: the S3
server, PostgreSQL, the dask scheduler, the workers and their nannies) is checked, without running a build.

Runs in `make test-cluster` (CORPUS_CLUSTER=1).
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("CORPUS_CLUSTER") != "1",
                                reason="cluster in a box: run `make test-cluster`")

pytest.importorskip("moto")
pytest.importorskip("psycopg2")
pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

from cluster_box import dask_cluster, postgres_server, s3_server  # noqa: E402

LOOPBACK = "127.0.0.1"


def listening_sockets(root: psutil.Process) -> list[tuple[int, str, str, int]]:
    """(pid, program, address, port) of every TCP socket in LISTEN and every bound UDP socket of `root`'s
    descendants."""
    out = []
    for proc in root.children(recursive=True):
        try:
            conns = proc.net_connections(kind="inet")
            name = proc.name()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for conn in conns:
            listening = conn.status == psutil.CONN_LISTEN or (conn.type == 2 and conn.laddr)  # SOCK_DGRAM
            if listening and not conn.raddr:
                out.append((proc.pid, name, conn.laddr.ip, conn.laddr.port))
    return out


def test_every_listening_socket_of_the_box_is_on_the_loopback_address(tmp_path):
    with s3_server(tmp_path / "s3") as s3_env, postgres_server(tmp_path / "pg"), \
            dask_cluster(tmp_path / "dask", s3_env, n_workers=2) as box:
        sockets = listening_sockets(psutil.Process())
        pids = {pid for pid, *_ in sockets}
        assert box.scheduler.pid in pids and box.worker_pids <= pids, sockets  # the box's servers were seen
        assert len({port for *_, port in sockets}) >= 6, sockets  # S3, PostgreSQL, scheduler, 2 workers + nannies
        elsewhere = [s for s in sockets if s[2] != LOOPBACK]
        assert elsewhere == [], elsewhere
