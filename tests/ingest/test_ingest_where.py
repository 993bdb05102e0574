"""Ledger `where` predicates and `keep_fields` on a Parquet source carrying extra columns."""

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.ledger import parse_ledger_lines
from corpus_dagster.ingest.selection import (
    Selection,
    SelectionError,
    apply_where,
    document_ids,
    keep_fields_table,
    kept_column,
    unify_chunks,
    where_fields,
)


@pytest.fixture
def source(tmp_path):
    t = pa.table(
        {
            "text": ["a", "b", "c", "d", "e"],
            "int_score": [1, 3, 4, None, 5],
            "minhash_cluster_size": [1, 2, 1, 1, 1],
            "title": ["A", "B", None, "D", "E"],
            "repo": ["r1", "r2", "r3", "r4", "r5"],
        }
    )
    pq.write_table(t, tmp_path / "src.parquet")
    return pq.read_table(tmp_path / "src.parquet")


def test_where_keeps_matching_rows_in_order_and_counts_the_rest(source):
    kept, excluded = apply_where(source, "int_score >= 3 AND minhash_cluster_size = 1", "edu")
    assert kept["text"].to_pylist() == ["c", "e"]
    assert excluded == 3  # the null score is excluded, not kept


def test_where_on_json_records_returns_the_records_themselves():
    recs = [{"text": "x", "int_score": 2}, {"text": "y", "int_score": 3, "extra": 1}]
    kept, excluded = apply_where(recs, "int_score >= 3", "edu")
    assert kept == [recs[1]] and excluded == 1
    assert apply_where(recs, None, "edu") == (recs, 0)


def test_bad_where_names_the_source_and_the_fields(source):
    with pytest.raises(SelectionError, match=r"source 'edu'.*int_scor.*text, int_score"):
        apply_where(source, "int_scor >= 3", "edu")
    with pytest.raises(SelectionError, match="not true/false"):
        apply_where(source, "int_score + 1", "edu")


def test_keep_fields_table_keyed_by_document_id(source):
    t = keep_fields_table(source, [f"edu:{k}" for k in range(5)], ["title", "repo"], "edu")
    assert t.column_names == ["_doc_id", "title", "repo"]
    assert t.to_pylist()[2] == {"_doc_id": "edu:2", "title": None, "repo": "r3"}
    with pytest.raises(SelectionError, match="keep_fields.*'path'"):
        keep_fields_table(source, [f"edu:{k}" for k in range(5)], ["path"], "edu")


def test_ledger_rows_accept_the_selection_fields():
    line = (
        '{"source_id": "edu", "urls": ["x.parquet"], "format": "parquet", "license_spdx": "ODC-By-1.0", '
        '"where": "int_score >= 3", "keep_fields": ["title"], "hub_dataset": "org/edu", "category": "web"}'
    )
    (src,) = parse_ledger_lines([line], "LEDGER.jsonl")
    assert (src.where, src.keep_fields, src.hub_dataset, src.category) == ("int_score >= 3", ("title",), "org/edu", "web")
    assert src.to_json()["keep_fields"] == ["title"]


def test_errors_stay_on_one_line(source):
    for where in ("int_scor >= 3", "text >= 3", "int_score >>= 3"):
        with pytest.raises(SelectionError) as err:
            apply_where(source, where, "edu")
        assert "\n" not in str(err.value) and where in str(err.value)


def test_where_fields_in_the_order_the_predicate_names_them():
    assert where_fields("minhash_cluster_size = 1 AND int_score >= 3 OR int_score IS NULL", "edu") == (
        "minhash_cluster_size",
        "int_score",
    )


def test_selection_counts_and_collects_kept_fields_across_batches():
    sel = Selection("edu", "int_score >= 3", ["title"])
    assert sel.fields == ("int_score", "title")
    assert sel.select([{"int_score": 4, "title": "A"}, {"int_score": 1, "title": "B"}, {"title": "C"}]) == [
        True, False, False,
    ]
    assert sel.select([{"int_score": None}, {"int_score": None}]) == [False, False]  # an all-null batch
    assert sel.select([{"int_score": 3.5}]) == [True]  # another batch, another inferred type
    sel.check_seen()
    assert (sel.excluded, sel.kept, sel.readable) == (4, 2, 6)
    assert sel.fields_table().to_pylist() == [{"_doc_id": "edu:0", "title": "A"}, {"_doc_id": "edu:1", "title": None}]


def test_selection_names_fields_no_record_had():
    sel = Selection("edu", None, ["title", "repo"])
    sel.select([{"title": "A"}])
    with pytest.raises(SelectionError, match=r"keep_fields \['repo'\] not found in any record"):
        sel.check_seen()
    Selection("edu", None, ["repo"]).check_seen()  # an empty source has nothing to say about its fields


def test_a_constant_predicate_applies_to_every_row():
    sel = Selection("edu", "1 = 0", [])
    assert sel.select([{}, {}, {}]) == [False, False, False]


def test_kept_values_are_json_scalars_with_one_type_per_column():
    assert kept_column([1, None, 2]).type == pa.int64()
    assert kept_column([True, False]).type == pa.bool_()
    assert kept_column([1, 2.5]).to_pylist() == [1.0, 2.5]
    assert kept_column(["a", 1, True, {"k": [1]}]).to_pylist() == ["a", "1", "true", '{"k": [1]}']
    assert kept_column([float("nan"), dt.date(2024, 5, 1)]).to_pylist() == [None, "2024-05-01"]
    assert kept_column([2**70]).to_pylist() == [str(2**70)]  # beyond int64: kept as text, not truncated
    # batches unify: null batches take the others' type, ints and floats meet in float64, else text
    assert unify_chunks([pa.nulls(2), kept_column([1])]).type == pa.int64()
    assert unify_chunks([kept_column([1]), kept_column([0.5])]).to_pylist() == [1.0, 0.5]
    assert unify_chunks([kept_column([1]), kept_column(["x"]), kept_column([False])]).to_pylist() == ["1", "x", "false"]
    assert unify_chunks([pa.nulls(1)]).type == pa.string()


def test_document_ids_are_dense_and_prefixed():
    assert document_ids("web", 3).to_pylist() == ["web:0", "web:1", "web:2"]
    assert document_ids("web", 0).to_pylist() == []
