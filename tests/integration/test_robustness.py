"""Robustness of ingest and the core helpers against inputs and events found by trying to break the pipeline:
lone surrogates, damaged raw parts, symlinked sources, newline-carrying names, concurrent runs, the publish swap."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.core import atomic, records
from corpus_dagster.core.config import load_config, load_settings
from corpus_dagster.core.errors import ConfigError, LedgerError, SourceError, StageOutputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, parse_ledger_lines
from corpus_dagster.core.locks import LockTimeout, hold_lock, lock_path, read_holder
from corpus_dagster.ingest.driver import QUARANTINE_FILE, fetch_source
from corpus_dagster.ingest.files import resolve_files
from corpus_dagster.ingest.outputs import raw_parts
from corpus_dagster.ingest.raw_parts import read_raw_part

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}, "ingest": {"part_max_docs": 3}})
    return tmp_path, Layout.from_config(settings.resolved), settings


def fetch(layout, settings, source):
    return fetch_source(source, layout, settings.ingest, now=NOW)


def texts(layout, sid):
    paths, _, _ = raw_parts(layout, sid)
    return [rec["text"] for p in paths for rec in read_raw_part(p)]


def quarantine(layout, sid, date="20261129"):
    path = layout.raw_source(sid) / date / QUARANTINE_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# a lone surrogate escape is quarantined as invalid_utf8 with file and line, never aborts the run.


def test_lone_surrogate_in_text_url_or_kept_field_is_quarantined(env):
    tmp, layout, settings = env
    f = tmp / "s.jsonl"
    f.write_text(
        '{"text": "good one", "u": "https://x/1"}\n'
        '{"text": "bad \\ud800 text", "u": "https://x/2"}\n'
        '{"text": "good url is bad", "u": "https://x/\\udfff"}\n'
        '{"text": "kept field is bad", "u": "https://x/4", "title": ["\\ud83d"]}\n'
        '{"text": "good two", "u": "https://x/5", "title": "t"}\n',
        encoding="ascii",
    )
    res = fetch(layout, settings, Source("s", (f"file://{f}",), "jsonl", "MIT", url_field="u", keep_fields=("title",)))
    assert res.docs == 2 and res.quarantined == {"invalid_utf8": 3}
    assert texts(layout, "s") == ["good one", "good two"]
    rows = quarantine(layout, "s")
    assert [(r["file"], r["line"], r["reason"]) for r in rows] == [
        (f"file://{f}", 2, "invalid_utf8"), (f"file://{f}", 3, "invalid_utf8"), (f"file://{f}", 4, "invalid_utf8")
    ]
    assert "'text'" in rows[0]["detail"] and "'u'" in rows[1]["detail"] and "'title'" in rows[2]["detail"]


def test_lone_surrogate_in_raw_utf8_bytes_is_quarantined(env):
    tmp, layout, settings = env
    f = tmp / "b.jsonl"
    f.write_bytes(b'{"text": "ok"}\n{"text": "cesu \xed\xa0\x80 bytes"}\n{"text": "\xff broken"}\n')
    res = fetch(layout, settings, Source("b", (f"file://{f}",), "jsonl", "MIT"))
    assert res.docs == 1 and res.quarantined == {"invalid_utf8": 2}
    assert [r["line"] for r in quarantine(layout, "b")] == [2, 3]


# a damaged raw part makes raw_documents fetch again, so "rerun raw_documents" repairs it.


@pytest.mark.parametrize("damage", ["truncate", "same_size_edit"])
def test_damaged_raw_part_is_refetched(env, damage):
    tmp, layout, settings = env
    f = tmp / "a.jsonl"
    f.write_text("".join(json.dumps({"text": f"document number {i} " * 20}) + "\n" for i in range(7)))
    source = Source("a", (f"file://{f}",), "jsonl", "MIT")
    assert fetch(layout, settings, source).unchanged is False
    assert fetch(layout, settings, source).unchanged is True
    paths, _, _ = raw_parts(layout, "a")
    good = paths[1].read_bytes()
    if damage == "truncate":
        paths[1].write_bytes(good[: len(good) // 2])
    else:
        paths[1].write_bytes(good[:-8] + bytes(b ^ 0xFF for b in good[-8:]))
    with pytest.raises(StageOutputError, match="part-00001.jsonl.zst.*rerun that stage"):
        run_clean_source(layout, settings, "a")  # the damaged part is never read
    res = fetch(layout, settings, source)  # what the error says to do
    assert res.unchanged is False and res.docs == 7
    assert paths[1].read_bytes() == good
    again = run_clean_source(layout, settings, "a")  # the refetched part is read: every document accounted for
    assert again["docs_in"] == 7 and again["kept"] + again["rejected"] == 7


def test_touched_output_is_verified_by_hash_not_recomputed(env):
    tmp, layout, settings = env
    f = tmp / "a.jsonl"
    f.write_text(json.dumps({"text": "one document here"}) + "\n")
    source = Source("a", (f"file://{f}",), "jsonl", "MIT")
    fetch(layout, settings, source)
    paths, _, _ = raw_parts(layout, "a")
    inode = paths[0].stat().st_ino
    os.utime(paths[0], ns=(1, 1))  # a touch (or a copy) moves the mtime only
    assert fetch(layout, settings, source).unchanged is True
    assert paths[0].stat().st_ino == inode


# temp leftovers of killed runs are cleared when their stage starts again.


def test_begin_clears_temp_files_folders_and_work_folders_one_level_down(tmp_path):
    stage = tmp_path / "stage"
    leftovers = [
        stage / ".20260101.tmp-abc" / "part-00000.jsonl.zst",
        stage / "key1" / ".docs-00001.tmp-abc.parquet",
        stage / "key1" / ".dedup-work-1234-xyz" / "shingles.u64",
        stage / ".v1.old-abc" / "shard.parquet",
        stage / ".corpus-rebuild-xyz" / "a",
    ]
    kept = [stage / "key1" / "docs-00000.parquet", stage / "_RECORD.json", stage / ".locks" / "x.lock"]
    for p in leftovers + kept:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    assert records.begin(stage) == 5
    assert all(p.exists() for p in kept)
    assert sorted(p.name for p in stage.iterdir()) == [".locks", "_RECORD.json", "key1"]
    assert [p.name for p in (stage / "key1").iterdir()] == ["docs-00000.parquet"]


def test_fetch_clears_a_killed_fetch_temp_folder_and_half_downloads(env):
    tmp, layout, settings = env
    f = tmp / "a.jsonl"
    f.write_text(json.dumps({"text": "one document here"}) + "\n")
    stale = layout.raw_source("a") / ".20261128.tmp-0123456789ab"
    stale.mkdir(parents=True)
    (stale / "part-00000.jsonl.zst").write_bytes(b"half")
    half = layout.downloads("a") / ".abc-file.tmp-0123456789ab.jsonl"
    half.parent.mkdir(parents=True)
    half.write_bytes(b"half")
    fetch(layout, settings, Source("a", (f"file://{f}",), "jsonl", "MIT"))
    assert not stale.exists() and not half.exists()


# symlinked files matched by a glob are read; a broken link is an error naming it.


def test_symlinks_matched_by_a_glob_are_read(env):
    tmp, layout, settings = env
    store = tmp / "annex"
    store.mkdir()
    checkout = tmp / "checkout"
    checkout.mkdir()
    for name in ("a", "b"):
        (store / f"blob-{name}").write_text(json.dumps({"text": f"document {name}"}) + "\n")
        (checkout / f"{name}.jsonl").symlink_to(store / f"blob-{name}")
    source = Source("ln", (f"file://{checkout}/*.jsonl",), "jsonl", "MIT")
    res = fetch(layout, settings, source)
    assert res.docs == 2 and texts(layout, "ln") == ["document a", "document b"]
    assert [rf.url for rf in resolve_files(source)] == [f"file://{checkout}/a.jsonl", f"file://{checkout}/b.jsonl"]
    # A changed target is seen, although the link itself did not change.
    (store / "blob-b").write_text(json.dumps({"text": "document b, new edition"}) + "\n")
    assert fetch(layout, settings, source).unchanged is False
    assert texts(layout, "ln") == ["document a", "document b, new edition"]
    # A link named directly (no glob) works too.
    direct = Source("direct", (f"file://{checkout}/a.jsonl",), "jsonl", "MIT")
    assert fetch(layout, settings, direct).docs == 1


@pytest.mark.parametrize("glob", [True, False])
def test_broken_symlink_is_an_error_naming_it(env, glob):
    tmp, layout, settings = env
    (tmp / "d").mkdir()
    (tmp / "d" / "gone.jsonl").symlink_to(tmp / "annex" / "missing-blob")
    url = f"file://{tmp}/d/*.jsonl" if glob else f"file://{tmp}/d/gone.jsonl"
    with pytest.raises(SourceError) as err:
        fetch(layout, settings, Source("br", (url,), "jsonl", "MIT"))
    msg = str(err.value)
    assert "broken symlink" in msg and f"{tmp}/d/gone.jsonl" in msg and "missing-blob" in msg
    assert "no file matches" not in msg


# a trailing newline fails the source_id, dataset and version patterns.


def test_trailing_newline_fails_source_id():
    with pytest.raises(LedgerError, match=r"source_id"):
        parse_ledger_lines([json.dumps({"source_id": "evil\n", "urls": ["x"], "format": "jsonl", "license_spdx": "MIT"})], "L")
    assert parse_ledger_lines([json.dumps({"source_id": "evil", "urls": ["x"], "format": "jsonl", "license_spdx": "MIT"})], "L")


@pytest.mark.parametrize("key", ["dataset", "version"])
def test_trailing_newline_fails_dataset_and_version(key):
    with pytest.raises(ConfigError, match=rf"\$\.{key}"):
        load_config(None, {key: "evil\n"})
    assert load_config(None, {key: "evil"})[key] == "evil"


def test_max_doc_bytes_is_bounded_by_the_row_group_limit():
    assert load_config(None, {"ingest": {"max_doc_bytes": 32 * 1024 * 1024}})["ingest"]["max_doc_bytes"] == 32 << 20
    with pytest.raises(ConfigError, match=r"\$\.ingest\.max_doc_bytes"):
        load_config(None, {"ingest": {"max_doc_bytes": 64 * 1024 * 1024 + 1}})


# an exclusive lock per name on the artifacts root, released when its holder dies.

HOLDER = textwrap.dedent("""
    import sys, time
    from corpus_dagster.core.locks import hold_lock
    with hold_lock(sys.argv[1], "publish", "publish in test run", timeout_s=5):
        print("held", flush=True)
        if sys.argv[2] == "hang":
            time.sleep(600)
        sys.stdin.readline()  # released when the parent says so
        open(sys.argv[3], "w").write("done")
""")


def start_holder(tmp: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp), mode, str(tmp / "done")], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_held_by_another_process_times_out_naming_the_holder(tmp_path):
    proc = start_holder(tmp_path, "wait")
    try:
        with pytest.raises(LockTimeout) as err, hold_lock(tmp_path, "publish", "second run", timeout_s=0.3):
            pass
        msg = str(err.value)
        assert f"pid {proc.pid}" in msg and socket.gethostname() in msg and "publish in test run" in msg
        assert str(lock_path(tmp_path, "publish")) in msg
        # Another name is another lock: no waiting.
        with hold_lock(tmp_path, "clean.alpha", "clean", timeout_s=0):
            pass
        # The waiter gets it as soon as the holder lets go, and the holder had finished its work by then.
        proc.stdin.write("\n")
        proc.stdin.flush()
        with hold_lock(tmp_path, "publish", "second run", timeout_s=30):
            assert (tmp_path / "done").read_text() == "done"
            assert read_holder(lock_path(tmp_path, "publish"))["what"] == "second run"
    finally:
        proc.kill()
        proc.wait()


def test_killed_holder_releases_the_lock(tmp_path):
    proc = start_holder(tmp_path, "hang")
    with pytest.raises(LockTimeout):
        with hold_lock(tmp_path, "publish", "second run", timeout_s=0):
            pass
    proc.kill()  # SIGKILL: no cleanup code runs in the holder
    proc.wait()
    with hold_lock(tmp_path, "publish", "second run", timeout_s=30) as path:
        assert read_holder(path)["pid"] == os.getpid()
    assert read_holder(path) == {}  # released: nobody named


def test_lock_is_reentrant_in_one_thread(tmp_path):
    with hold_lock(tmp_path, "dedup", "outer", timeout_s=0), hold_lock(tmp_path, "dedup", "inner", timeout_s=0):
        assert read_holder(lock_path(tmp_path, "dedup"))["what"] == "outer"


def test_lock_names_are_file_safe(tmp_path):
    assert lock_path(tmp_path, "clean[alpha/../x]").parent == tmp_path / ".locks"
    assert lock_path(tmp_path, "..").name == "_.lock"


# the publish swap never leaves a moment without the published folder.


def test_atomic_dir_replaces_without_a_moment_of_absence(tmp_path, monkeypatch):
    target = tmp_path / "corpus" / "ds" / "v1"
    with atomic.atomic_dir(target) as tmp:
        (tmp / "shard-0.parquet").write_text("old")
    seen_missing = []
    real_replace = os.replace

    def watching_replace(src, dst):
        real_replace(src, dst)
        if not target.exists():
            seen_missing.append((src, dst))

    monkeypatch.setattr(atomic.os, "replace", watching_replace)
    with atomic.atomic_dir(target) as tmp:
        (tmp / "shard-0.parquet").write_text("new")
    assert seen_missing == []
    assert (target / "shard-0.parquet").read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["v1"]  # the old content is gone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux only")
def test_exchange_dirs_swaps_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    (tmp_path / "b").mkdir()
    assert atomic.exchange_dirs(tmp_path / "a", tmp_path / "b") is True
    assert (tmp_path / "b" / "x").read_text() == "a" and not any((tmp_path / "a").iterdir())


def test_atomic_dir_falls_back_to_two_renames_where_exchange_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "exchange_dirs", lambda a, b: False)
    target = tmp_path / "v1"
    for content in ("old", "new"):
        with atomic.atomic_dir(target) as tmp:
            (tmp / "f").write_text(content)
    assert (target / "f").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["v1"]


def test_atomic_dir_failure_keeps_the_old_folder(tmp_path):
    target = tmp_path / "v1"
    with atomic.atomic_dir(target) as tmp:
        (tmp / "f").write_text("old")
    with pytest.raises(RuntimeError), atomic.atomic_dir(target) as tmp:
        (tmp / "f").write_text("half")
        raise RuntimeError("boom")
    assert (target / "f").read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["v1"]
