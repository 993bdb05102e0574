"""Release ids hash the document's stable key (the ledger's id_field value, else its url, else its text's
sha256 and occurrence): appending a document to one file of a source leaves the ids of every other document
unchanged."""

import json
import random
import uuid

import polars as pl
import pyarrow as pa
import pytest
from release_factory import build_kwargs, document, settings

from corpus_dagster.core.errors import LedgerError, ReleaseError
from corpus_dagster.core.ledger import parse_ledger_lines
from corpus_dagster.release.build import build_release
from corpus_dagster.release.checks import check_release
from corpus_dagster.release.ids import RELEASE_NAMESPACE, file_key, fixed_prefix, release_id

GLOB = "file:///data/delta/*.jsonl"
DELTA = {"source_id": "delta", "urls": [GLOB], "format": "jsonl", "license_spdx": "CC-BY-4.0", "url_field": None}
def test_fixed_prefix_and_file_key_of_a_glob_and_a_plain_url():
    assert fixed_prefix("file:///data/delta/*.jsonl") == "file:///data/delta/"
    assert fixed_prefix("s3://b/dump-*/part?.parquet") == "s3://b/"
    assert fixed_prefix("https://host/x/train.parquet") == "https://host/x/"
    assert file_key("file:///data/delta/b.jsonl", [GLOB]) == "b.jsonl"
    assert file_key("s3://b/dump-1/part3.parquet", ["s3://b/dump-*/part?.parquet"]) == "dump-1/part3.parquet"
    assert file_key("https://host/x/train.parquet", ["https://host/x/train.parquet"]) == "train.parquet"
    # a file no ledger URL names keeps its whole URL
    assert file_key("file:///else/b.jsonl", [GLOB]) == "file:///else/b.jsonl"


def test_release_id_hashes_the_stable_key_and_a_segment_span():
    assert release_id("web:sha256:ab#0") == str(uuid.uuid5(RELEASE_NAMESPACE, "web:sha256:ab#0"))
    assert release_id("web:sha256:ab#0", (3, 9)) == str(uuid.uuid5(RELEASE_NAMESPACE, "web:sha256:ab#0#3-9"))


def delta_docs(n_first: int, n_second: int) -> list[dict]:
    """Documents of one source over two files, shard ids in file then line order (as ingest numbers them);
    the texts depend on (file, line) only, so a rebuild with one more line in the first file is the same
    corpus plus that line."""
    docs = []
    for name, n in (("a.jsonl", n_first), ("b.jsonl", n_second)):
        for line in range(1, n + 1):
            rng = random.Random(f"{name}:{line}")
            text = document(rng, rng.choice([1, 2, 4, 8, 20, 40]))
            docs.append({"text": text, "source_id": "delta", "url": f"file:///data/delta/{name}#{line}"})
    for k, d in enumerate(docs):
        d["id"] = f"delta:{k}"
    return sorted(docs, key=lambda d: d["id"].encode())


def release_rows(root, docs, **kw) -> dict[tuple, str]:
    """(source_file, content, segment, char_span) -> release id of every row of a release built from `docs`."""
    kwargs = build_kwargs(root, docs, sources=[DELTA], settings=settings(per_bucket_cap=10_000), **kw)
    build_release(**kwargs)
    reports = check_release(kwargs["out_dir"], kwargs["settings"])
    assert all(r.passed for r in reports.values()), reports
    rows = pl.read_parquet(sorted(kwargs["out_dir"].glob("data/*/*.parquet")))
    out = {}
    for rid, meta, content in zip(rows["id"].to_list(), rows["metadata"].to_list(), rows["content"].to_list(), strict=True):
        m = json.loads(meta)
        assert "url" not in m  # a source without a url_field publishes no url (ingest's is a local path)
        key = (m["source_file"], content, m.get("segment", -1), tuple(m.get("char_span", ())))
        assert key not in out
        out[key] = rid
    assert len(set(out.values())) == len(out)
    return out


def test_appending_to_the_first_file_keeps_every_other_release_id(tmp_path):
    before = release_rows(tmp_path / "before", delta_docs(6, 8))
    after = release_rows(tmp_path / "after", delta_docs(7, 8))
    second = [k for k in before if k[0] == "b.jsonl"]
    first = [k for k in before if k[0] == "a.jsonl"]
    assert second and first and any(k[2] >= 0 for k in second)  # segments of the second file are compared too
    assert {k: after.get(k) for k in second} == {k: before[k] for k in second}
    assert {k: after.get(k) for k in first} == {k: before[k] for k in first}
    new = set(after) - set(before)
    assert new and all(k[0] == "a.jsonl" for k in new)
    assert len(set(after.values())) == len(after)


def test_id_field_names_rows_by_the_source_own_id(tmp_path):
    docs = delta_docs(3, 3)
    own = DELTA | {"keep_fields": ["uid"], "id_field": "uid"}
    info = pa.table({"_doc_id": [d["id"] for d in docs], "uid": [f"doc-{d['url'][-9:]}" for d in docs]})
    kwargs = build_kwargs(tmp_path, docs, sources=[own], settings=settings(per_bucket_cap=10_000),
                          doc_info=[info])
    build_release(**kwargs)
    rows = pl.read_parquet(sorted(kwargs["out_dir"].glob("data/*/*.parquet")))
    expect = set()
    for meta in rows["metadata"].to_list():
        m = json.loads(meta)
        base = f"delta:{m['uid']}"
        expect.add(release_id(base, tuple(m["char_span"])) if "segment" in m else release_id(base))
    assert set(rows["id"].to_list()) == expect

    dup = pa.table({"_doc_id": [d["id"] for d in docs], "uid": ["same"] * len(docs)})
    with pytest.raises(ReleaseError, match="names more than one document"):
        build_release(**(kwargs | {"doc_info": [dup], "out_dir": tmp_path / "dup"}))
    with pytest.raises(ReleaseError, match="no value of id_field"):
        build_release(**(kwargs | {"doc_info": [], "out_dir": tmp_path / "none"}))


def test_ledger_id_field_is_read_written_and_must_be_kept():
    row = {"source_id": "s", "urls": ["/d/*.jsonl"], "format": "jsonl", "license_spdx": "MIT",
           "keep_fields": ["uid"], "id_field": "uid"}
    (src,) = parse_ledger_lines([json.dumps(row)], "LEDGER.jsonl")
    assert src.id_field == "uid" and src.to_json()["id_field"] == "uid"
    (plain,) = parse_ledger_lines([json.dumps({k: v for k, v in row.items() if k != "id_field"})], "LEDGER.jsonl")
    assert plain.id_field is None and "id_field" not in plain.to_json()
    with pytest.raises(LedgerError, match="id_field"):
        parse_ledger_lines([json.dumps(row | {"keep_fields": []})], "LEDGER.jsonl")
