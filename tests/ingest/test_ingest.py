import datetime as dt
import gzip
import hashlib
import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import ChecksumMismatch, RawPartError, SourceError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.driver import QUARANTINE_FILE, fetch_source
from corpus_dagster.ingest.outputs import raw_parts
from corpus_dagster.ingest.raw_parts import read_raw_part

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def env(tmp_path):
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}})
    return tmp_path, Layout.from_config(settings.resolved), settings.ingest


def jsonl(records):
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def fetch(layout, ingest, source, **kw):
    return fetch_source(source, layout, ingest, now=NOW, **kw)


def raw_records(layout, sid):
    paths, _, _ = raw_parts(layout, sid)
    return [rec for p in paths for rec in read_raw_part(p)]


def src(sid, path, fmt, **kw):
    return Source(sid, (f"file://{path}",), fmt, "MIT", **kw)


def test_raw_format_exact_keys_and_urls(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(jsonl([{"text": "héllo one"}, {"text": "two", "u": "https://x/2"}]))
    res = fetch(layout, ingest, src("a", f, "jsonl", url_field="u"))
    assert res.docs == 2 and res.parts == 1 and res.files_fetched == 1
    part = layout.raw_source("a") / "20261129" / "part-00000.jsonl.zst"
    lines = zstandard.ZstdDecompressor().stream_reader(part.open("rb")).read().decode().splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["url", "fetched_at", "license_spdx", "text"]
    assert first == {"url": f"file://{f}#1", "fetched_at": "2026-11-29T12:00:00Z", "license_spdx": "MIT", "text": "héllo one"}
    assert json.loads(lines[1])["url"] == "https://x/2"
    assert "héllo" in lines[0]  # UTF-8, not \u escapes


@pytest.mark.parametrize("fmt", ["jsonl.gz", "jsonl.zst", "parquet"])
def test_formats(env, fmt):
    tmp, layout, ingest = env
    recs = [{"body": f"document {i}", "link": f"u{i}"} for i in range(5)]
    path = tmp / f"s.{fmt}"
    if fmt == "jsonl.gz":
        path.write_bytes(gzip.compress(jsonl(recs)))
    elif fmt == "jsonl.zst":
        path.write_bytes(zstandard.ZstdCompressor().compress(jsonl(recs)))
    else:
        pq.write_table(pa.Table.from_pylist(recs), path)
    fetch(layout, ingest, src("s", path, fmt, text_field="body"))
    got = raw_records(layout, "s")
    assert [r["text"] for r in got] == [f"document {i}" for i in range(5)]
    if fmt == "parquet":
        assert got[0]["url"] == f"file://{path}#0"  # rows are 0-based


def test_text_files_glob_in_path_order(env):
    tmp, layout, ingest = env
    for name in ["b.txt", "a.txt", "c.md"]:
        (tmp / name).write_text(f"text of {name}")
    fetch(layout, ingest, Source("t", (f"file://{tmp}/*.txt",), "text", "MIT"))
    got = raw_records(layout, "t")
    assert [r["text"] for r in got] == ["text of a.txt", "text of b.txt"]
    assert got[0]["url"] == f"file://{tmp}/a.txt"


def test_parts_split_by_docs(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(jsonl([{"text": f"doc {i}"} for i in range(25)]))
    res = fetch(layout, replace(ingest, part_max_docs=10), src("a", f, "jsonl"))
    paths, docs, _ = raw_parts(layout, "a")
    assert res.parts == 3 and docs == [10, 10, 5] and [p.name for p in paths][-1] == "part-00002.jsonl.zst"


def test_pinned_checksum_ok_and_mismatch_leaves_nothing(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(jsonl([{"text": "x"}]))
    good = hashlib.sha256(f.read_bytes()).hexdigest()
    url = f"file://{f}"
    fetch(layout, ingest, src("ok", f, "jsonl", sha256={url: good}))
    with pytest.raises(ChecksumMismatch) as err:
        fetch(layout, ingest, src("bad", f, "jsonl", sha256={url: "0" * 64}))
    assert "source 'bad'" in str(err.value) and url in str(err.value) and good in str(err.value)
    assert not layout.raw_source("bad").exists() or not any(layout.raw_source("bad").iterdir())


def test_rerun_skips_unchanged_and_refetches_changed(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(jsonl([{"text": "x"}]))
    first = fetch(layout, ingest, src("a", f, "jsonl"))
    again = fetch(layout, ingest, src("a", f, "jsonl"))
    assert (first.files_fetched, again.files_fetched, again.files_skipped, again.unchanged) == (1, 0, 1, True)
    f.write_bytes(jsonl([{"text": "x"}, {"text": "y"}]))
    third = fetch(layout, ingest, src("a", f, "jsonl"))
    assert third.files_fetched == 1 and not third.unchanged and third.docs == 2


def test_bad_lines_are_quarantined_with_reasons(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(
        jsonl([{"text": "fine"}])
        + b"{not json\n"
        + b'{"text": "\xff\xfe bad utf8"}\n'
        + jsonl([{"other": 1}, {"text": 5}, {"text": "   "}, [1, 2]])
        + b"\n"
        + jsonl([{"text": "also fine"}])
    )
    res = fetch(layout, ingest, src("q", f, "jsonl"))
    assert res.docs == 2
    assert res.quarantined == {"empty_text": 1, "invalid_json": 2, "invalid_utf8": 1, "missing_text": 1, "non_string_text": 1}
    q = [json.loads(x) for x in (layout.raw_source("q") / "20261129" / QUARANTINE_FILE).read_text().splitlines()]
    assert [(r["line"], r["reason"]) for r in q] == [
        (2, "invalid_json"), (3, "invalid_utf8"), (4, "missing_text"), (5, "non_string_text"), (6, "empty_text"), (7, "invalid_json"),
    ]
    assert all(r["file"] == f"file://{f}" and r["source_id"] == "q" for r in q)
    assert [r["url"] for r in raw_records(layout, "q")] == [f"file://{f}#1", f"file://{f}#9"]


def test_100mb_document_is_quarantined_not_loaded_into_parts(env):
    tmp, layout, ingest = env
    big = "word " * (20 * 1024 * 1024)  # 100 MiB
    f = tmp / "big.jsonl"
    with open(f, "w") as fh:
        fh.write(json.dumps({"text": "small doc"}) + "\n")
        fh.write(json.dumps({"text": big}) + "\n")
    res = fetch(layout, ingest, src("big", f, "jsonl"))
    assert res.docs == 1 and res.quarantined == {"too_large": 1}
    t = tmp / "t"
    t.mkdir()
    (t / "big.txt").write_text(big)
    res = fetch(layout, ingest, Source("bigtext", (f"file://{t}/*.txt",), "text", "MIT"))
    assert res.docs == 0 and res.quarantined == {"too_large": 1}


def test_100mb_document_accepted_under_a_larger_limit(env):
    tmp, layout, ingest = env
    big = "word " * (20 * 1024 * 1024)
    f = tmp / "big.jsonl"
    f.write_text(json.dumps({"text": big}) + "\n")
    res = fetch(layout, replace(ingest, max_doc_bytes=200 * 1024 * 1024), src("big", f, "jsonl"))
    assert res.docs == 1 and len(raw_records(layout, "big")[0]["text"]) == len(big)


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_zstd_source_fails_with_file_and_line(env, damage):
    tmp, layout, ingest = env
    data = zstandard.ZstdCompressor().compress(jsonl([{"text": f"doc {i} " * 50} for i in range(2000)]))
    f = tmp / "a.jsonl.zst"
    f.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:20] + b"\x00garbage" * 50 + data[420:])
    with pytest.raises(SourceError) as err:
        fetch(layout, ingest, src("z", f, "jsonl.zst"))
    assert "source 'z'" in str(err.value) and f"file://{f}" in str(err.value) and "line" in str(err.value)
    assert not (layout.raw_source("z") / "20261129").exists()
    assert not list(layout.raw_source("z").glob(".*tmp*"))


def test_truncated_gzip_source_fails(env):
    tmp, layout, ingest = env
    data = gzip.compress(jsonl([{"text": f"doc {i} " * 50} for i in range(2000)]))
    f = tmp / "a.jsonl.gz"
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="truncated"):
        fetch(layout, ingest, src("g", f, "jsonl.gz"))


def test_missing_url_and_empty_glob(env):
    tmp, layout, ingest = env
    with pytest.raises(SourceError, match="does not exist"):
        fetch(layout, ingest, Source("m", (f"file://{tmp}/nope.jsonl",), "jsonl", "MIT"))
    with pytest.raises(SourceError, match="no file matches"):
        fetch(layout, ingest, Source("m", (f"file://{tmp}/*.nothing",), "jsonl", "MIT"))


def test_unknown_scheme_is_a_clear_error(env):
    _, layout, ingest = env
    with pytest.raises(SourceError, match="source 'r'"):
        fetch(layout, ingest, Source("r", ("nosuchscheme://bucket/x.jsonl",), "jsonl", "MIT"))


def test_corrupt_raw_part_names_file_and_line(env):
    tmp, layout, ingest = env
    f = tmp / "a.jsonl"
    f.write_bytes(jsonl([{"text": f"doc {i} " * 40} for i in range(500)]))
    fetch(layout, ingest, src("a", f, "jsonl"))
    (part,), _, _ = raw_parts(layout, "a")
    part.write_bytes(part.read_bytes()[:-100])
    with pytest.raises(RawPartError, match=r"part-00000.jsonl.zst, line \d+"):
        list(read_raw_part(part))


def test_remote_fsspec_source_is_cached_and_not_refetched(env):
    """memory:// stands in for a remote store: downloaded once into the cache, skipped on rerun."""
    import fsspec

    _, layout, ingest = env
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/docs.jsonl", jsonl([{"text": "remote doc"}]))
    source = Source("rem", ("memory://bucket/*.jsonl",), "jsonl", "MIT")
    first = fetch(layout, ingest, source)
    second = fetch(layout, ingest, source)
    assert first.files_fetched == 1 and second.files_skipped == 1 and second.unchanged
    assert [r["text"] for r in raw_records(layout, "rem")] == ["remote doc"]
    assert len(list(layout.downloads("rem").iterdir())) == 1


def test_sources_start_largest_first_by_their_last_fetch_else_their_local_files(tmp_path) -> None:
    import json as _json

    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import Source
    from corpus_dagster.ingest.estimate import expected_bytes, largest_first

    (tmp_path / "small.jsonl").write_text("x" * 10)
    (tmp_path / "big").mkdir()
    for i in range(3):
        (tmp_path / "big" / f"{i}.jsonl").write_text("y" * 100)
    layout = Layout(tmp_path / "artifacts", "d", "v")
    small = Source("small", (str(tmp_path / "small.jsonl"),), "jsonl", "MIT")
    big = Source("big", (f"file://{tmp_path}/big/*.jsonl",), "jsonl", "MIT")
    remote = Source("remote", ("https://example.org/x.jsonl",), "jsonl", "MIT")
    tie = Source("tie", (str(tmp_path / "small.jsonl"),), "jsonl", "MIT")
    assert expected_bytes(layout, big) == 300 and expected_bytes(layout, remote) == 0
    assert largest_first(layout, [small, remote, big, tie]) == ["big", "small", "tie", "remote"]
    folder = layout.raw_source("remote")  # a fetched remote source is known by its last fetch
    folder.mkdir(parents=True)
    (folder / "_RECORD.json").write_text(_json.dumps({
        "stage": "ingest", "key": "k", "code_version": "1", "inputs": {}, "settings": {}, "output_dir": ".", "outputs": {},
        "files": {}, "stats": {"bytes_uncompressed": 5000}}))
    assert largest_first(layout, [small, remote, big, tie])[0] == "remote"
    gone = Source("gone", (str(tmp_path / "nothing-*.jsonl"),), "jsonl", "MIT")
    assert largest_first(layout, [small, remote, big, gone])[0] == "gone"  # it fails at once: first


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 20])
def test_size_and_lone_surrogates_in_one_pass(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    from corpus_dagster.ingest import readers

    monkeypatch.setattr(readers, "SIZE_CHUNK", chunk)  # a surrogate on either side of a chunk boundary
    for text in ["plain", "café 🙂 中", "a\ud800b", "é\udfff", "\ud83d\ude00", "🙂" * 5 + "\ud800", ""]:
        want = (len(text.encode("utf-8", errors="surrogatepass")), readers.SURROGATE.search(text) is not None)
        assert readers.utf8_size_and_surrogates(text) == want
        assert readers.has_surrogates(text) == want[1]
