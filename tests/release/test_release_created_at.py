"""Stable created_at: a content keeps the created_at of the first build that released it, so a rebuild after
one edited document rewrites only the part files holding it (plus _RELEASE.json and README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_factory import build_kwargs, make_docs

from corpus_dagster.core.errors import ReleaseError
from corpus_dagster.release.build import build_release
from corpus_dagster.release.created import CREATED_NAME, read_created
from corpus_dagster.release.rebuild import file_hashes


def fetched(docs: list[dict], day: int) -> list[pa.Table]:
    return [pa.table({"_doc_id": [d["id"] for d in docs], "_fetched_at": [f"2024-05-{day:02d}T12:00:00Z"] * len(docs)})]


def build(root: Path, docs: list[dict], day: int) -> dict[str, str]:
    kwargs = build_kwargs(root, docs, doc_info=fetched(docs, day),
                          created_at_file=root / "release" / "demo" / CREATED_NAME)
    build_release(**kwargs)
    return file_hashes(kwargs["out_dir"])


def rows(root: Path) -> pl.DataFrame:
    out = root / "release" / "demo" / "v1"
    frames = []
    for part in sorted(out.glob("data/*/*.parquet")):
        t = pl.read_parquet(part)
        frames.append(t.with_columns(pl.lit(str(part.relative_to(out))).alias("part"),
                                     pl.col("metadata").map_elements(lambda m: json.loads(m)["doc_id"],
                                                                     return_dtype=pl.String).alias("doc_id")))
    return pl.concat(frames)


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """A build, then a rebuild of a refetch (every fetch time new) in which one document's paragraphs swapped."""
    root = tmp_path_factory.mktemp("created")
    docs = make_docs(seed=5)
    first = build(root, docs, day=1)
    before = rows(root)
    whole = before.filter(~pl.col("metadata").str.contains('"segment":'))
    by_id = {d["id"]: d for d in docs}
    changed = next(i for i in whole["doc_id"].to_list() if by_id[i]["text"].count("\n\n") >= 2)
    paras = by_id[changed]["text"].split("\n\n")
    edited = [d | {"text": "\n\n".join([paras[1], paras[0], *paras[2:]])} if d["id"] == changed else d for d in docs]
    second = build(root, edited, day=9)
    return root, changed, before, first, second


def test_one_changed_document_rewrites_only_its_part(two_builds):
    root, changed, before, first, second = two_builds
    after = rows(root)
    changed_parts = set(before.filter(pl.col("doc_id") == changed)["part"])
    assert changed_parts == set(after.filter(pl.col("doc_id") == changed)["part"])
    rewritten = {p for p in first if first[p] != second.get(p)}
    parts = {p for p in rewritten if p.startswith("data/")}
    assert parts == changed_parts
    assert len({p for p in first if p.startswith("data/")}) > 5 * len(parts)  # many parts, one rewritten
    assert rewritten - parts <= {"README.md", "_RELEASE.json", "assets/tokens_by_source.png",
                                 "assets/docs_per_bucket.png", "assets/source_mix.png"}


def test_unchanged_contents_keep_the_first_created_at_and_the_new_one_gets_its_own(two_builds):
    root, changed, before, _, _ = two_builds
    after = rows(root)
    day1, day9 = pl.datetime(2024, 5, 1, 12, time_zone="UTC"), pl.datetime(2024, 5, 9, 12, time_zone="UTC")
    assert after.filter(pl.col("doc_id") != changed).select((pl.col("created_at") == day1).all()).item()
    assert after.filter(pl.col("doc_id") == changed).select((pl.col("created_at") == day9).all()).item()
    kept = read_created(root / "release" / "demo" / CREATED_NAME)
    assert kept.height == before.height + after.filter(pl.col("doc_id") == changed).height  # only grows


def test_a_rebuild_with_nothing_new_leaves_the_table_as_it_is(tmp_path):
    docs = make_docs(seed=6, per_source={"alpha": 12, "beta": 6, "gamma": 4})
    build(tmp_path, docs, day=1)
    table = tmp_path / "release" / "demo" / CREATED_NAME
    stamp = table.stat().st_mtime_ns
    again = build(tmp_path, docs, day=3)
    assert table.stat().st_mtime_ns == stamp
    assert build(tmp_path / "fresh", docs, day=1) == again  # same bytes as a first build on the first fetch


def test_a_damaged_table_is_refused(tmp_path):
    bad = tmp_path / CREATED_NAME
    pq.write_table(pa.table({"content_sha256": [b"x" * 32], "created_at": ["2024-01-01"]}), bad)
    with pytest.raises(ReleaseError, match="schema"):
        read_created(bad)
    bad.write_bytes(b"not parquet")
    with pytest.raises(ReleaseError, match="not a readable Parquet"):
        read_created(bad)
    dup = pa.table({"content_sha256": pa.array([b"x" * 32] * 2, pa.binary(32)),
                    "created_at": pa.array([0, 1], pa.timestamp("us", tz="UTC"))})
    pq.write_table(dup, bad)
    with pytest.raises(ReleaseError, match="repeated"):
        read_created(bad)


def test_date_field_dates_new_content_and_a_value_that_is_no_date_keeps_the_fetch_time(tmp_path):
    from release_factory import SOURCES

    docs = make_docs(seed=7, per_source={"alpha": 12, "beta": 6, "gamma": 4})
    alpha = [d for d in docs if d["source_id"] == "alpha"]
    values = ["2021-03-04", "2021-03-04T05:06:07Z", "2021-03-04T07:06:07+02:00", "not a date", None]
    published = {d["id"]: values[i % 5] for i, d in enumerate(alpha)}
    info = fetched(docs, 2)[0]
    info = info.append_column("published", pa.array([published.get(i) for i in info["_doc_id"].to_pylist()], pa.string()))
    sources = [SOURCES[0] | {"date_field": "published", "keep_fields": ["published"]}, *SOURCES[1:]]
    kwargs = build_kwargs(tmp_path, docs, sources=sources, doc_info=[info],
                          created_at_file=tmp_path / "release" / "demo" / CREATED_NAME)
    build_release(**kwargs)
    got = rows(tmp_path)
    by_doc = dict(zip(got["doc_id"], got["created_at"], strict=True))
    fetched_at = pl.datetime(2024, 5, 2, 12, time_zone="UTC")
    expected = {0: (2021, 3, 4, 0, 0, 0), 1: (2021, 3, 4, 5, 6, 7), 2: (2021, 3, 4, 5, 6, 7)}
    seen = set()
    for i, d in enumerate(alpha):
        if d["id"] not in by_doc:
            continue
        moment = by_doc[d["id"]]
        if i % 5 in expected:
            assert moment.timetuple()[:6] == expected[i % 5], (d["id"], values[i % 5])
        else:
            assert pl.select(pl.lit(moment) == fetched_at).item()
        seen.add(i % 5)
    assert len(seen) >= 3
    others = got.filter(~pl.col("doc_id").str.starts_with("alpha:"))
    assert others.height and pl.select((others["created_at"] == fetched_at).all()).item()


def test_ledger_date_field_is_read_written_and_must_be_kept():
    from corpus_dagster.core.errors import LedgerError
    from corpus_dagster.core.ledger import parse_ledger_lines

    row = {"source_id": "s", "urls": ["https://x/a.jsonl"], "format": "jsonl", "license_spdx": "MIT",
           "keep_fields": ["day"], "date_field": "day", "homepage": "https://x/"}
    (source,) = parse_ledger_lines([json.dumps(row)], "LEDGER.jsonl")
    assert source.date_field == "day" and source.homepage == "https://x/"
    assert source.to_json()["date_field"] == "day" and source.to_json()["homepage"] == "https://x/"
    with pytest.raises(LedgerError, match="date_field"):
        parse_ledger_lines([json.dumps(row | {"keep_fields": []})], "LEDGER.jsonl")
    with pytest.raises(LedgerError, match="homepage"):
        parse_ledger_lines([json.dumps(row | {"homepage": "javascript:alert(1)"})], "LEDGER.jsonl")
