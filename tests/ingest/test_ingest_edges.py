"""Ingest edge cases of the readers: a leading UTF-8 byte order mark, text in another encoding than UTF-8, and
JSON objects with a repeated key."""

from __future__ import annotations

import datetime as dt
import gzip
import json

import pytest
import zstandard

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.driver import QUARANTINE_FILE, fetch_source
from corpus_dagster.ingest.outputs import document_info, raw_parts
from corpus_dagster.ingest.raw_parts import read_raw_part
from corpus_dagster.ingest.readers import DuplicateKey, NotUtf8, parse_json_line

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
BOM = b"\xef\xbb\xbf"
COMPRESS = {"jsonl": lambda b: b, "jsonl.gz": lambda b: gzip.compress(b, mtime=0), "jsonl.zst": zstandard.compress}


@pytest.fixture
def env(tmp_path):
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}})
    return tmp_path, Layout.from_config(settings.resolved), settings.ingest


def fetch(env, sid, path, fmt, **kw):
    tmp, layout, ingest = env
    return fetch_source(Source(sid, (f"file://{path}",), fmt, "MIT", **kw), layout, ingest, now=NOW)


def records(env, sid):
    paths, _, _ = raw_parts(env[1], sid)
    return [rec for p in paths for rec in read_raw_part(p)]


def quarantine(env, sid):
    path = env[1].raw_source(sid) / "20261129" / QUARANTINE_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", sorted(COMPRESS))
def test_leading_bom_is_not_text_in_json_lines(env, fmt):
    tmp = env[0]
    f = tmp / f"bom.{fmt}"
    f.write_bytes(COMPRESS[fmt](BOM + b'{"text": "first"}\n{"text": "second"}\n'))
    res = fetch(env, "b", f, fmt)
    assert (res.docs, res.quarantined) == (2, {})
    assert [r["text"] for r in records(env, "b")] == ["first", "second"]


@pytest.mark.parametrize("fmt", sorted(COMPRESS))
def test_bom_alone_on_the_first_line_is_a_blank_line(env, fmt):
    tmp = env[0]
    f = tmp / f"bom.{fmt}"
    f.write_bytes(COMPRESS[fmt](BOM + b'\n{"text": "second"}\n'))
    res = fetch(env, "b", f, fmt)
    assert (res.docs, res.quarantined) == (1, {})
    assert [r["url"] for r in records(env, "b")] == [f"file://{f}#2"]  # line numbers still count the BOM line


def test_leading_bom_is_not_text_in_a_text_file(env):
    tmp = env[0]
    (tmp / "t").mkdir()
    (tmp / "t" / "a.txt").write_bytes(BOM + "héllo\nworld\n".encode())
    (tmp / "t" / "b.txt").write_bytes(b"no mark \xef\xbb\xbf inside is kept\n")
    (tmp / "t" / "c.txt").write_bytes(BOM + b"  \n")
    res = fetch(env, "t", tmp / "t" / "*.txt", "text")
    assert res.docs == 2 and res.quarantined == {"empty_text": 1}
    assert [r["text"] for r in records(env, "t")] == ["héllo\nworld\n", "no mark \ufeff inside is kept\n"]


def test_parse_json_line_refuses_a_repeated_key_at_any_depth():
    assert parse_json_line(b'{"text": "a", "meta": {"k": 1, "j": [{"k": 2}]}}') == {
        "text": "a", "meta": {"k": 1, "j": [{"k": 2}]},
    }
    for line, key in [
        (b'{"text": "a", "text": "b"}', "text"),
        (b'{"text": "a", "meta": {"k": 1, "k": 1}}', "k"),
        (b'{"text": "a", "rows": [{"x": 1}, {"y": 2, "y": 3}]}', "y"),
    ]:
        with pytest.raises(DuplicateKey) as err:
            parse_json_line(line)
        assert err.value.key == key
    # A UTF-8 BOM at a line start is skipped; bad UTF-8 and bad JSON are refused as json.loads refuses them.
    assert parse_json_line(BOM + b'{"text": "x"}') == {"text": "x"}
    with pytest.raises(UnicodeDecodeError):
        parse_json_line(b'{"text": "\xff"}')
    with pytest.raises(json.JSONDecodeError):
        parse_json_line(b'{"text": ')


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_parse_json_line_reads_utf8_only(encoding):
    line = '{"text": "héllo"}'.encode(encoding)  # "utf-16"/"utf-32" write a byte order mark first
    assert json.loads(line) == {"text": "héllo"}  # what json.detect_encoding let through
    with pytest.raises((UnicodeDecodeError, NotUtf8)):
        parse_json_line(line)


def test_a_nul_inside_a_json_string_is_bad_json_and_outside_one_not_utf8():
    with pytest.raises(json.JSONDecodeError, match="Invalid control character"):
        parse_json_line(b'{"text": "a\x00b"}')
    with pytest.raises(NotUtf8, match="a NUL byte outside a JSON string at column 2"):
        parse_json_line(b'{\x00"text": "a"}')
    assert parse_json_line(b'{"text": "a\\u0000b"}') == {"text": "a\x00b"}  # an escaped NUL is JSON text


@pytest.mark.parametrize("fmt", sorted(COMPRESS))
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_utf16_or_utf32_file_publishes_nothing_every_line_invalid_utf8(env, fmt, encoding):
    tmp = env[0]
    f = tmp / f"wide.{fmt}"
    body = "".join(json.dumps({"text": f"document {i} héllo"}, ensure_ascii=False) + "\n" for i in range(4))
    f.write_bytes(COMPRESS[fmt](body.encode(encoding)))
    res = fetch(env, "w", f, fmt)
    assert res.docs == 0 and records(env, "w") == []
    q = quarantine(env, "w")
    assert set(res.quarantined) == {"invalid_utf8"} and {r["reason"] for r in q} == {"invalid_utf8"}
    assert {r["line"] for r in q} >= {1, 2, 3, 4}  # every line (the NUL after the last newline is one more)


def test_a_utf32_line_inside_a_utf8_file_is_quarantined_and_the_rest_kept(env):
    tmp = env[0]
    f = tmp / "mixed.jsonl"
    wide = json.dumps({"text": "smuggled"}).encode("utf-32-le")  # no byte order mark: only its NULs tell
    f.write_bytes(b'{"text": "first"}\n' + wide + b'\n{"text": "third"}\n')
    res = fetch(env, "x", f, "jsonl")
    assert [r["text"] for r in records(env, "x")] == ["first", "third"]
    (q,) = quarantine(env, "x")
    assert (q["line"], q["reason"]) == (2, "invalid_utf8") and "NUL byte outside a JSON string" in q["detail"]
    assert res.quarantined == {"invalid_utf8": 1}


def test_repeated_key_is_quarantined_and_ids_skip_it_as_for_a_malformed_line(env):
    tmp = env[0]
    good = [b'{"text": "one"}', b'{"text": "three", "u": "https://x/3"}', b'{"text": "five"}']
    dup = tmp / "dup.jsonl"
    dup.write_bytes(b"\n".join([
        good[0], b'{"text": "two", "text": "deux"}', good[1], b'{"text": "four", "meta": {"a": 1, "a": 2}}', good[2],
    ]) + b"\n")
    res = fetch(env, "d", dup, "jsonl", url_field="u")
    assert res.docs == 3 and res.quarantined == {"duplicate_key": 2}
    q = quarantine(env, "d")
    assert [(r["file"], r["line"], r["reason"]) for r in q] == [
        (f"file://{dup}", 2, "duplicate_key"), (f"file://{dup}", 4, "duplicate_key"),
    ]
    assert q[0]["detail"] == "key 'text' appears more than once in one object"
    assert q[0]["excerpt"] == '{"text": "two", "text": "deux"}'
    docs = records(env, "d")
    assert [(r["url"], r["text"]) for r in docs] == [
        (f"file://{dup}#1", "one"), ("https://x/3", "three"), (f"file://{dup}#5", "five"),
    ]
    ids = document_info(env[1], "d").column("_doc_id").to_pylist()
    assert ids == ["d:0", "d:1", "d:2"]  # quarantined lines get no id; k counts the documents kept

    bad = tmp / "bad.jsonl"  # the same file with malformed lines in their place: the same ids and URLs
    bad.write_bytes(b"\n".join([good[0], b"{not json", good[1], b'{"text": ', good[2]]) + b"\n")
    res_bad = fetch(env, "m", bad, "jsonl", url_field="u")
    assert res_bad.quarantined == {"invalid_json": 2}
    assert document_info(env[1], "m").column("_doc_id").to_pylist() == ["m:0", "m:1", "m:2"]
    assert [r["url"].replace(str(bad), str(dup)) for r in records(env, "m")] == [r["url"] for r in docs]
