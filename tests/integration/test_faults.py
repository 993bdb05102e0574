"""Fault injection: a server that cuts a download, a disk that fills during each kind of write, a corrupt
intermediate of each stage, two runs on one artifacts root. Each gives a one-line error naming what and
where, nothing half-written is trusted afterwards, and the rerun recovers."""

from __future__ import annotations

import datetime as dt
import errno
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from corpus_factory import write_setup

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.clean.outputs import clean_doc_files
from corpus_dagster.core import atomic, parquet, records
from corpus_dagster.core.atomic import WriteError
from corpus_dagster.core.config import load_config, load_settings
from corpus_dagster.core.errors import SourceError, StageOutputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, load_ledger
from corpus_dagster.core.locks import lock_path, read_holder
from corpus_dagster.dedup.driver import run_global_dedup
from corpus_dagster.dedup.outputs import dedup_tables
from corpus_dagster.ingest import raw_parts as raw_parts_module
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.minhash.driver import run_signatures
from corpus_dagster.minhash.outputs import signature_file
from corpus_dagster.publish.driver import run_publish
from corpus_dagster.scrub.driver import run_scrub
from corpus_dagster.scrub.outputs import scrubbed_files
from corpus_dagster.tokenize.driver import run_token_streams

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
REPO = Path(__file__).resolve().parents[2]
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def pipeline(config: Path) -> dict[str, bool]:
    """Run every stage driver in order, as the assets do; returns {step: computed (not a cache hit)}."""
    settings = load_settings(config)
    layout = Layout.from_config(settings.resolved)
    sources = load_ledger(layout.ledger)
    ids = [s.source_id for s in sources]
    done = {f"fetch.{s.source_id}": not fetch_source(s, layout, settings.ingest, now=NOW).unchanged for s in sources}
    done |= {f"clean.{sid}": not run_clean_source(layout, settings, sid)["cached"] for sid in ids}
    done |= {f"signatures.{sid}": not run_signatures(layout, settings, sid)["cached"] for sid in ids}
    done["dedup"] = not run_global_dedup(layout, settings, ids).cached
    done |= {f"scrub.{sid}": not r["cached"] for sid, r in run_scrub(layout, settings).items()}
    done["publish"] = not run_publish(layout, settings).cached
    done["tokens"] = not run_token_streams(layout, settings).cached
    return done


def published(layout: Layout) -> dict[str, bytes]:
    return {
        str(p.relative_to(layout.root)): p.read_bytes()
        for base in (layout.shards, layout.tokens)
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != ".locks" and ".locks" not in p.parts)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: its published bytes are what every recovered run must reproduce."""
    root = tmp_path_factory.mktemp("reference")
    config = write_setup(root, extra={"ingest": {"part_max_docs": 10}})
    pipeline(config)
    layout = Layout.from_config(load_config(config))
    return root, published(layout)


@pytest.fixture
def setup(tmp_path, reference):
    """A fresh artifacts root over the reference's source files (same URLs, so the same document ids)."""
    ref_root, _ = reference
    config = write_setup(tmp_path, extra={"ingest": {"part_max_docs": 10}})
    ledger = tmp_path / "artifacts" / "corpus" / "LEDGER.jsonl"
    ledger.write_text(ledger.read_text().replace(str(tmp_path / "sources"), str(ref_root / "sources")))
    return config, Layout.from_config(load_config(config))


def one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg, msg
    return msg


# A server that cuts the stream mid-file.


class CuttingHandler(http.server.BaseHTTPRequestHandler):
    body = b""
    cut = True

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self):
        cut = type(self).cut and self.headers.get("Range") is not None  # listing works; the file read is cut
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body[: len(self.body) // 2] if cut else self.body)
        self.close_connection = True


@pytest.fixture
def server():
    handler = type("Handler", (CuttingHandler,), {})
    handler.body = "".join(json.dumps({"text": f"web document {i} " * 40}) + "\n" for i in range(1500)).encode()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield handler, f"http://127.0.0.1:{srv.server_address[1]}/web.jsonl"
    srv.shutdown()
    srv.server_close()


def test_http_stream_cut_mid_file_then_recovers(tmp_path, server):
    handler, url = server
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path)}, "ingest": {"timeout_s": 10}})
    layout = Layout.from_config(settings.resolved)
    source = Source("web", (url,), "jsonl", "MIT")
    with pytest.raises(SourceError) as err:
        fetch_source(source, layout, settings.ingest, now=NOW)
    msg = one_line(err.value)
    assert url in msg and "download failed" in msg and "source 'web'" in msg
    # Nothing half-written is kept or trusted: no cached download, no parts, no record.
    assert not any(layout.downloads("web").glob("*")) and not layout.raw_source("web").exists()
    assert leftovers(tmp_path) == []
    handler.cut = False
    res = fetch_source(source, layout, settings.ingest, now=NOW)
    assert res.docs == 1500 and res.files_fetched == 1
    assert fetch_source(source, layout, settings.ingest, now=NOW).unchanged


# A disk that fills during each kind of write.


def full_disk_open(after_bytes: int):
    """An `open` whose files accept `after_bytes` bytes in all, then fail like a full disk."""
    state = {"left": after_bytes}

    class FullFile:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            if len(data) > state["left"]:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            state["left"] -= len(data)
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def _open(path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        return FullFile(fh) if "w" in mode else fh

    return _open


def full_parquet_writer(marker: str, arrow_style: bool):
    """A ParquetWriter that fails like a full disk when writing a file whose path contains `marker`."""
    real = pq.ParquetWriter

    class Writer(real):
        def __init__(self, where, *args, **kwargs):
            super().__init__(where, *args, **kwargs)
            self.full = marker in str(where)

        def write_table(self, *args, **kwargs):
            if self.full:  # Arrow reports the errno inside its message, with no errno attribute
                raise (OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")
                       if arrow_style else ENOSPC)
            return super().write_table(*args, **kwargs)

    return Writer


@pytest.mark.parametrize("kind", ["raw_part", "stage_parquet", "record", "shards"])
def test_disk_full_during_each_kind_of_write(setup, reference, monkeypatch, kind):
    config, layout = setup
    if kind == "shards":
        pipeline(config)  # a published version exists: it must survive the failed republish untouched
        before = published(layout)
        cfg = load_config(config)
        config.write_text(config.read_text().replace("shard_rows: 25", "shard_rows: 20"))
    with monkeypatch.context() as m:
        if kind == "raw_part":
            m.setattr(raw_parts_module, "open", full_disk_open(3000), raising=False)
            expect = str(layout.raw_source("alpha") / "20260102")
        elif kind == "stage_parquet":
            m.setattr(parquet.pq, "ParquetWriter", full_parquet_writer("/stages/clean/", arrow_style=True))
            expect = "/stages/clean/alpha/"
        elif kind == "record":
            def full_record(path, data):
                with atomic.atomic_path(path) as tmp:
                    tmp.write_bytes(data[:10])
                    raise ENOSPC
            m.setattr(records, "atomic_write_bytes", full_record)
            expect = str(layout.raw_source("alpha") / records.RECORD)
        else:
            m.setattr(parquet.pq, "ParquetWriter", full_parquet_writer(f"/corpus/{cfg['dataset']}/", arrow_style=False))
            expect = str(layout.shards.parent / ".v1.work-")  # a shard unit writes into the publish work folder
        with pytest.raises(WriteError) as err:
            pipeline(config)
    msg = one_line(err.value)
    assert expect in msg and "No space left on device" in msg and "rerun" in msg
    if kind == "shards":
        # The publish work folder stays for a resume, with no half-written file in it; the next plan removes it.
        left = leftovers(layout.root)
        assert len(left) == 1 and left[0].startswith("corpus/testset/.v1.work-"), left
        assert published(layout) == before  # the old version is still whole
        config.write_text(config.read_text().replace("shard_rows: 20", "shard_rows: 25"))
    else:
        assert leftovers(layout.root) == []
    if kind in ("raw_part", "record"):
        assert records.read_record(layout.raw_source("alpha")) is None  # nothing a later stage would trust
    pipeline(config)
    assert published(layout) == reference[1]
    assert leftovers(layout.root) == []


# A corrupt intermediate of each stage is detected and recomputed.


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_last_bytes(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-16] + bytes(b ^ 0x5A for b in data[-16:]))


def corrupt_targets(layout: Layout) -> dict[str, tuple[Path, str]]:
    """stage -> (a file it wrote, the step that must recompute it)."""
    return {
        "clean": (clean_doc_files(layout, "alpha")[1], "clean.alpha"),
        "signatures": (signature_file(layout, "beta"), "signatures.beta"),
        "dedup": (dedup_tables(layout)["dropped"], "dedup"),
        "scrub": (scrubbed_files(layout, "gamma")[0], "scrub.gamma"),
    }


@pytest.mark.parametrize("damage", [truncate, flip_last_bytes], ids=["truncated", "edited"])
def test_corrupt_intermediate_of_each_stage_is_recomputed(setup, reference, damage):
    config, layout = setup
    pipeline(config)
    targets = corrupt_targets(layout)
    originals = {stage: path.read_bytes() for stage, (path, _) in targets.items()}
    for stage, (path, step) in targets.items():
        damage(path)
        with pytest.raises(StageOutputError) as err:  # the next stage refuses it, naming the file
            records.record_files(path.parents[1], records.read_record(path.parents[1]), _kind(stage))
        assert str(path) in one_line(err.value) and "rerun that stage" in str(err.value)
        computed = pipeline(config)
        assert computed[step], f"{stage}: damaged output not recomputed"
        assert path.read_bytes() == originals[stage]
        assert [k for k, v in computed.items() if v] == [step], f"{stage}: more than the damaged step recomputed"
    assert published(layout) == reference[1]


def _kind(stage: str) -> str:
    return {"clean": "docs", "signatures": "signatures", "dedup": "tables", "scrub": "docs"}[stage]


# Two runs on one artifacts root: the lock makes the second wait, and no step's work is done twice.

LOCKED_RUNNER = '''
import json, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[3], str(Path(sys.argv[3]).parent)]  # this test module and the shared test helpers
import test_faults as tf
from corpus_dagster.core import locks
from corpus_dagster.core.config import load_config

config, gate = Path(sys.argv[1]), Path(sys.argv[2])
root = load_config(config)["paths"]["artifacts"]
computed = {}
real_fetch = tf.fetch_source

def fetch_gated(source, *args, **kwargs):  # the first run holds the fetch lock until the test opens the gate
    print("fetching", source.source_id, flush=True)
    while gate.exists():
        time.sleep(0.05)
    return real_fetch(source, *args, **kwargs)

tf.fetch_source = fetch_gated
print("waiting", flush=True)
with locks.hold_lock(root, "corpus", f"test run {sys.argv[4]}", timeout_s=60):
    computed = tf.pipeline(config)
print(json.dumps(computed), flush=True)
'''


def test_two_runs_on_one_root_second_waits_and_does_nothing(setup, reference, tmp_path):
    config, layout = setup
    (tmp_path / "runner.py").write_text(textwrap.dedent(LOCKED_RUNNER))
    gate = tmp_path / "gate"
    gate.write_text("closed")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start(name: str) -> subprocess.Popen:
        args = [sys.executable, str(tmp_path / "runner.py"), str(config), str(gate), str(Path(__file__).resolve().parent), name]
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = start("first")
    try:
        assert first.stdout.readline().strip() == "waiting"
        assert first.stdout.readline().startswith("fetching")  # the first run is inside the lock
        second = start("second")
        assert second.stdout.readline().strip() == "waiting"  # at the lock, which the first run holds
        assert read_holder(lock_path(layout.root, "corpus"))["what"] == "test run first"
        gate.unlink()
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0 and second.returncode == 0, err1[-2000:] + err2[-2000:]
    did_first = json.loads(out1.strip().splitlines()[-1])
    did_second = json.loads(out2.strip().splitlines()[-1])
    assert all(did_first.values()) and did_first.keys() == did_second.keys()
    assert not any(did_second.values()), f"the second run redid work: {did_second}"
    assert published(layout) == reference[1]


def test_a_short_write_of_numpy_names_the_path():
    """np.save on a full disk raises `OSError: 1472 requested and 1008 written` (no errno, no text about
    space): it must still become a WriteError naming the file."""
    from pathlib import Path

    from corpus_dagster.core.atomic import storage_error

    err = storage_error(OSError("1472 requested and 1008 written"), Path("/data/x/band_hashes.npy"))
    assert err is not None and "/data/x/band_hashes.npy" in str(err) and "short write" in str(err)
    assert storage_error(OSError("something else"), Path("/data/x")) is None
