"""The ledger's `where` and `keep_fields` while a source is fetched: excluded rows get no id, kept fields
land in `_FIELDS.parquet` keyed by id, and both enter the ingest stage key."""

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core import records
from corpus_dagster.core.config import load_config, load_settings
from corpus_dagster.core.errors import SelectionError, SourceError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest import documents
from corpus_dagster.ingest.driver import FIELDS_FILE, fetch_source
from corpus_dagster.ingest.outputs import document_info, raw_parts, selection_counts
from corpus_dagster.ingest.raw_parts import read_raw_part

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
LATER = dt.datetime(2026, 12, 1, 8, 30, 0, tzinfo=dt.UTC)

# 12 records: int_score cycles 0..5 (one null), titles and repos name the record so values are checkable by id.
ROWS = [
    {
        "text": f"document number {i}",
        "int_score": None if i == 7 else i % 6,
        "title": f"Title {i}",
        "repo": f"org/repo{i}",
    }
    for i in range(12)
]
KEPT = [r for r in ROWS if r["int_score"] is not None and r["int_score"] >= 3]  # 3,4,5,9,10,11


@pytest.fixture
def env(tmp_path):
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}})
    return tmp_path, Layout.from_config(settings.resolved), settings.ingest


def write_parquet_source(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)


def write_jsonl_source(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def src(sid, path, fmt, **kw):
    return Source(sid, (f"file://{path}",), fmt, "MIT", **kw)


def fetch(layout, ingest, source, now=NOW):
    return fetch_source(source, layout, ingest, now=now)


def raw_texts(layout, sid):
    paths, _, _ = raw_parts(layout, sid)
    return [rec for p in paths for rec in read_raw_part(p)]


def folder_bytes(layout, sid):
    folder = layout.raw_source(sid) / "20261129"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_where_excludes_and_counts_ids_stay_dense_kept_fields_by_id(env, fmt):
    tmp, layout, ingest = env
    path = tmp / f"edu.{fmt}"
    (write_parquet_source if fmt == "parquet" else write_jsonl_source)(path, ROWS)
    source = src("edu", path, fmt, where="int_score >= 3", keep_fields=("title", "repo"))
    res = fetch(layout, ingest, source)

    assert (res.docs, res.excluded_by_where, res.quarantined) == (len(KEPT), len(ROWS) - len(KEPT), {})
    raw = raw_texts(layout, "edu")
    assert [r["text"] for r in raw] == [r["text"] for r in KEPT]  # the excluded never became documents
    assert all(list(r) == ["url", "fetched_at", "license_spdx", "text"] for r in raw)  # the raw contract holds
    first_pos = ROWS.index(KEPT[0]) + (0 if fmt == "parquet" else 1)
    assert raw[0]["url"] == f"file://{path}#{first_pos}"  # the URL keeps the source position

    fields = pq.read_table(layout.raw_source("edu") / "20261129" / FIELDS_FILE)
    assert fields.column_names == ["_doc_id", "title", "repo"]
    assert fields.to_pylist() == [
        {"_doc_id": f"edu:{k}", "title": r["title"], "repo": r["repo"]} for k, r in enumerate(KEPT)
    ]
    record = records.read_record(layout.raw_source("edu"))
    assert record.stats["excluded_by_where"] == len(ROWS) - len(KEPT)
    assert record.files["fields"] == [f"20261129/{FIELDS_FILE}"]
    assert f"20261129/{FIELDS_FILE}" in record.outputs and not records.verify_outputs(layout.raw_source("edu"), record)
    assert record.inputs["ledger"]["where"] == "int_score >= 3"
    assert record.inputs["ledger"]["keep_fields"] == ["title", "repo"]


def test_reader_functions_give_counts_and_document_info(env):
    tmp, layout, ingest = env
    write_parquet_source(tmp / "edu.parquet", ROWS)
    write_jsonl_source(tmp / "plain.jsonl", ROWS[:3])
    fetch(layout, ingest, src("edu", tmp / "edu.parquet", "parquet", where="int_score >= 3", keep_fields=("repo",)))
    fetch(layout, ingest, src("plain", tmp / "plain.jsonl", "jsonl"))

    assert selection_counts(layout, ["edu", "plain"]) == {"edu": len(ROWS) - len(KEPT), "plain": 0}
    info = document_info(layout, "edu")
    assert info.column_names == ["_doc_id", "_fetched_at", "repo"]
    assert info.schema.field("_fetched_at").type == pa.string()
    assert info.to_pylist()[1] == {"_doc_id": "edu:1", "_fetched_at": "2026-11-29T12:00:00Z", "repo": KEPT[1]["repo"]}
    plain = document_info(layout, "plain")
    assert plain.column_names == ["_doc_id", "_fetched_at"]
    assert plain["_doc_id"].to_pylist() == ["plain:0", "plain:1", "plain:2"]
    assert not (layout.raw_source("plain") / "20261129" / FIELDS_FILE).exists()


def test_keep_fields_without_where_keeps_every_document_and_nulls_missing_values(env):
    tmp, layout, ingest = env
    rows = [{"text": "a", "title": "A", "meta": {"lang": "en"}}, {"text": "b"}, {"text": "c", "title": 3}]
    write_jsonl_source(tmp / "s.jsonl", rows)
    res = fetch(layout, ingest, src("s", tmp / "s.jsonl", "jsonl", keep_fields=("title", "meta")))
    assert (res.docs, res.excluded_by_where) == (3, 0)
    info = document_info(layout, "s")
    # mixed string/number values become one string column; nested values become JSON text
    assert info.schema.field("title").type == pa.string()
    assert info["title"].to_pylist() == ["A", None, "3"]
    assert info["meta"].to_pylist() == ['{"lang": "en"}', None, None]


def test_quarantined_records_stay_quarantined_and_are_not_counted_as_excluded(env):
    tmp, layout, ingest = env
    f = tmp / "q.jsonl"
    f.write_text(
        json.dumps({"text": "keep me", "int_score": 4}) + "\n"
        + "{not json\n"
        + json.dumps({"text": "", "int_score": 5}) + "\n"
        + json.dumps({"text": "too low", "int_score": 1}) + "\n"
        + json.dumps({"text": "keep me too", "int_score": 3}) + "\n"
    )
    res = fetch(layout, ingest, src("q", f, "jsonl", where="int_score >= 3"))
    assert res.quarantined == {"empty_text": 1, "invalid_json": 1}
    assert (res.docs, res.excluded_by_where) == (2, 1)
    assert [r["text"] for r in raw_texts(layout, "q")] == ["keep me", "keep me too"]


def test_results_do_not_depend_on_the_batch_size(env, tmp_path, monkeypatch):
    _, layout, ingest = env
    rows = [{"text": f"doc {i}", "int_score": i % 5, "title": None if i % 4 else f"t{i}"} for i in range(50)]
    write_jsonl_source(tmp_path / "b.jsonl", rows)
    source = src("b", tmp_path / "b.jsonl", "jsonl", where="int_score >= 2", keep_fields=("title",))
    fetch(layout, ingest, source)
    whole = folder_bytes(layout, "b")
    other = Layout.from_config(load_config(None, {"paths": {"artifacts": str(tmp_path / "art2")}}))
    monkeypatch.setattr(documents, "BATCH_ROWS", 3)  # batches whose titles are all null, batches that span
    fetch(other, ingest, source)
    assert folder_bytes(other, "b") == whole
    assert document_info(other, "b").num_rows == sum(1 for r in rows if r["int_score"] >= 2)


@pytest.mark.parametrize(
    ("fmt", "where", "keep", "expect"),
    [
        ("parquet", "int_score >>= 3", (), r"`where` 'int_score >>= 3': does not parse as a row predicate"),
        ("jsonl", "int_score >>= 3", (), r"`where` 'int_score >>= 3': does not parse as a row predicate"),
        ("parquet", "int_scor >= 3", (), r"`where` 'int_scor >= 3' names field\(s\) \['int_scor'\] the file lacks"),
        ("jsonl", "int_scor >= 3", (), r"`where` 'int_scor >= 3' names field\(s\) \['int_scor'\] that no record"),
        ("parquet", "title >= 3", (), r"`where` 'title >= 3' cannot be evaluated on the source's fields \(title\)"),
        ("jsonl", "int_score + 1", (), r"`where` 'int_score \+ 1' gives Int64 values, not true/false"),
        ("parquet", None, ("path",), r"keep_fields \['path'\] not found in the file"),
        ("jsonl", None, ("path",), r"keep_fields \['path'\] not found in any record"),
        ("jsonl", None, ("_doc_id",), r"keep_fields \['_doc_id'\] clash with the document info columns"),
    ],
)
def test_bad_selection_is_a_one_line_source_error_and_writes_nothing(env, fmt, where, keep, expect):
    tmp, layout, ingest = env
    path = tmp / f"edu.{fmt}"
    (write_parquet_source if fmt == "parquet" else write_jsonl_source)(path, ROWS)
    with pytest.raises(SelectionError, match=expect) as err:
        fetch(layout, ingest, src("edu", path, fmt, where=where, keep_fields=keep))
    message = str(err.value)
    assert isinstance(err.value, SourceError) and message.startswith("source 'edu'") and "\n" not in message
    folder = layout.raw_source("edu")
    assert not folder.exists() or not list(folder.iterdir())  # no parts, no temp folder, no record


@pytest.mark.parametrize("row", [{"where": "int_score >= 3"}, {"keep_fields": ("title",)}])
def test_selection_on_a_text_source_is_refused(env, row):
    tmp, layout, ingest = env
    (tmp / "a.txt").write_text("a plain text document")
    with pytest.raises(SelectionError, match=r"source 't': the ledger row sets .*a `text` source has no fields"):
        fetch(layout, ingest, Source("t", (f"file://{tmp}/a.txt",), "text", "MIT", **row))


def test_changing_where_changes_the_key_and_refetches_that_source_only(env):
    tmp, layout, ingest = env
    write_parquet_source(tmp / "edu.parquet", ROWS)
    write_jsonl_source(tmp / "web.jsonl", ROWS)
    edu = src("edu", tmp / "edu.parquet", "parquet", where="int_score >= 3", keep_fields=("title",))
    web = src("web", tmp / "web.jsonl", "jsonl", where="int_score >= 3")
    fetch(layout, ingest, edu)
    fetch(layout, ingest, web)
    keys = {sid: raw_parts(layout, sid)[2].key for sid in ("edu", "web")}

    again = [fetch(layout, ingest, s, now=LATER) for s in (edu, web)]  # an unchanged rerun
    assert all(r.unchanged for r in again) and again[0].excluded_by_where == len(ROWS) - len(KEPT)
    assert again[0].date == "20261129"  # nothing was rewritten under the later date

    stricter = src("edu", tmp / "edu.parquet", "parquet", where="int_score >= 5", keep_fields=("title",))
    changed, same = fetch(layout, ingest, stricter, now=LATER), fetch(layout, ingest, web, now=LATER)
    assert not changed.unchanged and same.unchanged
    assert raw_parts(layout, "edu")[2].key != keys["edu"] and raw_parts(layout, "web")[2].key == keys["web"]
    assert (changed.docs, changed.excluded_by_where) == (2, len(ROWS) - 2)
    assert document_info(layout, "edu")["title"].to_pylist() == ["Title 5", "Title 11"]
    assert [p.name for p in layout.raw_source("edu").iterdir() if p.is_dir()] == ["20261201"]

    fewer = src("edu", tmp / "edu.parquet", "parquet", where="int_score >= 5")  # keep_fields is in the key too
    res = fetch(layout, ingest, fewer, now=LATER)
    assert not res.unchanged and document_info(layout, "edu").column_names == ["_doc_id", "_fetched_at"]


def test_sources_without_a_selection_keep_their_key_shape(env):
    tmp, layout, ingest = env
    write_jsonl_source(tmp / "p.jsonl", ROWS[:2])
    fetch(layout, ingest, src("p", tmp / "p.jsonl", "jsonl"))
    record = raw_parts(layout, "p")[2]
    assert sorted(record.inputs["ledger"]) == ["format", "license_spdx", "text_field", "url_field"]
    assert record.stats["excluded_by_where"] == 0 and "fields" not in record.files


def test_a_damaged_fields_table_is_refetched_not_trusted(env):
    tmp, layout, ingest = env
    write_parquet_source(tmp / "edu.parquet", ROWS)
    source = src("edu", tmp / "edu.parquet", "parquet", where="int_score >= 3", keep_fields=("title",))
    fetch(layout, ingest, source)
    table = layout.raw_source("edu") / "20261129" / FIELDS_FILE
    good = table.read_bytes()
    table.write_bytes(good[:40])
    res = fetch(layout, ingest, source)
    assert not res.unchanged and table.read_bytes() == good
