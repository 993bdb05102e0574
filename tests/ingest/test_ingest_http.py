"""HTTP sources through the ingest driver: a server without Range support, and transfers cut short."""

from __future__ import annotations

import datetime as dt
import hashlib
import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import SourceError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.ingest.outputs import raw_parts
from corpus_dagster.ingest.raw_parts import read_raw_part

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
BIG = 6 * 1024 * 1024  # over fsspec's 5 MiB HTTP block: a block reader needs Range for the rest


def big_jsonl(min_bytes: int = BIG) -> tuple[bytes, int]:
    """JSON Lines of at least `min_bytes`, and its number of documents."""
    lines, size, i = [], 0, 0
    while size < min_bytes:
        line = (json.dumps({"text": f"web document {i} " + "lorem ipsum " * 60}) + "\n").encode()
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines), i


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ingest_env(tmp_path: Path) -> tuple[Layout, dict]:
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}, "ingest": {"timeout_s": 20}})
    return Layout.from_config(settings.resolved), settings.ingest


def nothing_kept(layout: Layout, sid: str) -> bool:
    downloads = layout.downloads(sid)
    return not (downloads.exists() and any(downloads.iterdir())) and not layout.raw_source(sid).exists()


@pytest.fixture
def http_server(tmp_path):
    """`python -m http.server` (no Range support) serving tmp_path/www; yields (folder, base URL)."""
    www = tmp_path / "www"
    www.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(www)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("http.server did not start") from None
                time.sleep(0.05)
        yield www, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # SIGTERM ignored (a disposition inherited from the test process)
            proc.kill()
            proc.wait(timeout=10)


def test_file_over_one_block_from_a_server_without_range_support(tmp_path, http_server):
    www, base = http_server
    body, n = big_jsonl()
    (www / "web.jsonl").write_bytes(body)
    layout, ingest = ingest_env(tmp_path)
    source = Source("web", (f"{base}/web.jsonl",), "jsonl", "MIT")
    res = fetch_source(source, layout, ingest, now=NOW)
    assert (res.docs, res.files_fetched, res.quarantined) == (n, 1, {})
    paths, _, _ = raw_parts(layout, "web")
    texts = [rec["text"] for p in paths for rec in read_raw_part(p)]
    assert texts == [json.loads(line)["text"] for line in body.splitlines()]
    (cached,) = layout.downloads("web").iterdir()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == hashlib.sha256(body).hexdigest()
    again = fetch_source(source, layout, ingest, now=NOW)
    assert again.unchanged and again.files_skipped == 1


def test_missing_file_is_not_advised_a_rerun(tmp_path, http_server):
    _, base = http_server
    layout, ingest = ingest_env(tmp_path)
    with pytest.raises(SourceError) as err:
        fetch_source(Source("web", (f"{base}/gone.jsonl",), "jsonl", "MIT"), layout, ingest, now=NOW)
    assert f"{base}/gone.jsonl does not exist" in str(err.value) and "rerun" not in str(err.value)


class HalfHandler(http.server.BaseHTTPRequestHandler):
    """HEAD announces the whole body; GET sends half of it and closes the connection, with the full
    Content-Length (`announce`) or none, so only the count of bytes received shows the cut."""

    body = b""
    announce = True

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self):
        self.send_response(200)
        if self.announce:
            self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body[: len(self.body) // 2])
        self.wfile.flush()
        self.close_connection = True


@pytest.mark.parametrize("announce", [True, False], ids=["content-length", "close-delimited"])
def test_transfer_cut_halfway_fails_naming_the_url_and_keeps_nothing(tmp_path, announce):
    handler = type("Handler", (HalfHandler,), {"announce": announce})
    handler.body, _ = big_jsonl()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/web.jsonl"
    layout, ingest = ingest_env(tmp_path)
    try:
        with pytest.raises(SourceError) as err:
            fetch_source(Source("web", (url,), "jsonl", "MIT"), layout, ingest, now=NOW)
    finally:
        srv.shutdown()
        srv.server_close()
    msg = str(err.value)
    assert "\n" not in msg and f"source 'web', file {url}: download failed: " in msg
    total, half = len(handler.body), len(handler.body) // 2
    if announce:  # aiohttp sees the Content-Length unmet and raises; its own words follow
        assert f"the transfer was cut before all {total} bytes arrived (ClientPayloadError: " in msg
    else:  # the stream ends cleanly: only the count against the HEAD's Content-Length shows the cut
        assert f"the transfer was cut after {half} of {total} bytes; " in msg
    assert msg.endswith("nothing of it was kept, rerun to fetch it again")
    assert nothing_kept(layout, "web")
