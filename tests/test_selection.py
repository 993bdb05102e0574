"""Ledger `where` predicates and `keep_fields` on a Parquet source carrying extra columns."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.ledger import parse_ledger_lines
from corpus_dagster.ingest.selection import SelectionError, apply_where, keep_fields_table


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
    assert t.column_names == ["id", "title", "repo"]
    assert t.to_pylist()[2] == {"id": "edu:2", "title": None, "repo": "r3"}
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
