"""End to end: shards -> release folder; loading with `datasets`, the card against the files, checks,
determinism across runs and worker counts, token-count reuse, metadata of segments."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_factory import build_kwargs, make_docs, settings

from corpus_dagster.release.build import build_release
from corpus_dagster.release.checks import check_release
from corpus_dagster.release.rebuild import check_rebuild, file_hashes

LEN = "length_tokens_cl100k_base"


def doc_info(docs):
    """Per source one document info table: fetch times for every document (as RFC 3339 strings), and for
    alpha the repairs and a kept `title` field."""
    tables = []
    for sid in sorted({d["source_id"] for d in docs}):
        mine = [(i, d) for i, d in enumerate(docs) if d["source_id"] == sid]
        cols = {"_doc_id": [d["id"] for _, d in mine],
                "_fetched_at": [f"2024-05-{1 + i % 28:02d}T12:00:00Z" for i, _ in mine]}
        if sid == "alpha":
            cols |= {"title": [f"Title {d['id']}" for _, d in mine],
                     "_cleaned": [["control"] if j % 5 == 0 else [] for j, _ in enumerate(mine)]}
        tables.append(pa.table(cols))
    return tables


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("rel")
    docs = make_docs()
    kwargs = build_kwargs(root, docs, doc_info=doc_info(docs), selection_excluded={"alpha": 7})
    stats = build_release(**kwargs)
    return kwargs, stats, docs


def read_all(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(sorted(folder.glob("data/*/*.parquet")))


def test_layout_schema_and_checks(built):
    kwargs, stats, _ = built
    out = kwargs["out_dir"]
    assert (out / "README.md").is_file() and all(Path(f).is_file() for f in stats["figures"])
    parts = sorted(p.relative_to(out).as_posix() for p in out.glob("data/*/*.parquet"))
    assert parts and all(re.fullmatch(r"data/b\d\d_\d+-\d+/part-\d{5}\.parquet", p) for p in parts)
    assert stats["parts"] == len(parts) > stats["buckets"] - 1  # part_tokens is small: some buckets have several
    schema = pq.read_schema(out / parts[0])
    assert schema.names == ["id", "created_at", "source_type", "metadata", "content", LEN, "tags"]
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field(LEN).type == pa.int32() and schema.field("tags").type == pa.list_(pa.string())
    reports = check_release(out, kwargs["settings"])
    assert all(r.passed for r in reports.values()), reports


def test_load_with_datasets_whole_release_one_bucket_and_token_filter(built):
    import datasets

    kwargs, stats, _ = built
    out = kwargs["out_dir"]
    ds = datasets.load_dataset("parquet", data_files=str(out / "data/*/*.parquet"), split="train")
    assert ds.num_rows == stats["docs"]
    folder = next(f for f, n in stats["docs_per_bucket"].items() if n)
    one = datasets.load_dataset("parquet", data_files=str(out / f"data/{folder}/*.parquet"), split="train")
    assert one.num_rows == stats["docs_per_bucket"][folder]
    short = ds.filter(lambda row: 64 <= row[LEN] < 192)
    assert short.num_rows == sum(n for f, n in stats["docs_per_bucket"].items() if f.startswith(("b00_", "b01_")))


def test_card_front_matter_and_tables_match_the_files(built):
    from huggingface_hub import DatasetCard

    kwargs, stats, _ = built
    out = kwargs["out_dir"]
    card = DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    rows = read_all(out)
    assert meta["license"] == "cc-by-4.0" and meta["language"] == ["en"] and meta["size_categories"] == ["n<1K"]
    for cfg in meta["configs"]:
        pattern = cfg["data_files"][0]["path"]
        assert list(out.glob(pattern)), pattern
    bucket_cfgs = [c["config_name"] for c in meta["configs"] if c["config_name"] != "default"]
    assert bucket_cfgs == sorted(p.name for p in (out / "data").iterdir())
    text = card.text

    def cell(label):
        return re.search(rf"^\| {re.escape(label)} \| ([^|]+) \|$", text, re.M).group(1).strip()

    assert int(cell("documents").replace(",", "")) == rows.height
    assert int(cell("tokens (cl100k_base)").replace(",", "")) == rows[LEN].sum()
    lo, hi = (int(x.replace(",", "")) for x in cell("length range (tokens)").split(" to "))
    assert (lo, hi) == (rows[LEN].min(), rows[LEN].max())
    per_bucket = {p.name: pl.read_parquet(list(p.glob("*.parquet"))).height for p in (out / "data").iterdir()}
    for folder, n in per_bucket.items():
        assert re.search(rf"^\| {folder} \| [^|]+ \| {n:,} \|", text, re.M), folder
    meta_rows = [json.loads(m) for m in rows["metadata"]]
    for sid in ("alpha", "beta", "gamma"):
        n = sum(m["source_id"] == sid for m in meta_rows)
        assert re.search(rf"^\| {sid} \| [^|]+ \| [^|]* \| {n:,} \|", text, re.M), sid
    assert text.count("where (alpha)") == 1 and "| left out by where (alpha) | 7 |" in text  # once, outside fetched
    assert "| dropped by filter gopher | 5 |" in text and "filter ppl" not in text  # only rules that dropped
    assert "![Documents per length bucket](assets/docs_per_bucket.png)" in text


def test_rows_lie_in_their_buckets_and_caps_hold(built):
    kwargs, _, _ = built
    out = kwargs["out_dir"]
    for p in out.glob("data/*/*.parquet"):
        lo, hi = map(int, p.parent.name.split("_")[1].split("-"))
        n = pq.read_table(p, columns=[LEN])[LEN].to_pylist()
        assert all(lo <= x <= hi for x in n)
    rows = read_all(out)
    assert rows["id"].n_unique() == rows.height
    counts = pl.DataFrame({"folder": [], "sid": []}, schema={"folder": pl.String, "sid": pl.String})
    for p in out.glob("data/*/*.parquet"):
        m = pq.read_table(p, columns=["metadata"])["metadata"].to_pylist()
        counts = pl.concat([counts, pl.DataFrame({"folder": [p.parent.name] * len(m),
                                                  "sid": [json.loads(x)["source_id"] for x in m]})])
    assert counts.group_by("folder", "sid").len()["len"].max() <= kwargs["settings"].per_bucket_cap


def test_segments_carry_their_span_and_parent(built):
    kwargs, _, docs = built
    texts = {d["id"]: d["text"] for d in docs}
    rows = read_all(kwargs["out_dir"])
    segs = 0
    for content, meta, created in zip(rows["content"], rows["metadata"], rows["created_at"], strict=True):
        m = json.loads(meta)
        parent = texts[m["doc_id"]]
        if "segment" in m:
            segs += 1
            a, b = m["char_span"]
            assert content == parent[a:b] and m["parent_id"] and m["segment"] >= 0
            assert content and not content[-1].isspace() and (b == len(parent) or parent[b].isspace())
        else:
            assert content == parent
        assert created.year == 2024  # the fetch time from doc_info, not the fallback
        if m["source_id"] == "alpha":
            assert m["title"] == f"Title {m['doc_id']}"
        if m["source_id"] == "beta":
            assert m["source_file"] and "#" not in m["source_file"]  # file URL without the row anchor
    assert segs > 0


def test_rebuild_with_other_worker_count_is_byte_identical(built):
    kwargs, _, _ = built
    report = check_rebuild(kwargs["out_dir"], kwargs, workers=2)
    assert report.passed, report
    assert report.metadata["files"] > 5


def test_same_seed_same_bytes_other_seed_other_selection(tmp_path):
    docs = make_docs(seed=3)
    a = build_kwargs(tmp_path / "a", docs)
    build_release(**a)
    b = build_kwargs(tmp_path / "b", docs)
    build_release(**b)
    assert file_hashes(a["out_dir"]) == file_hashes(b["out_dir"])
    ids_a = set(read_all(a["out_dir"])["id"])
    c = build_kwargs(tmp_path / "c", docs, settings=settings(seed=99))
    build_release(**c)
    ids_c = set(read_all(c["out_dir"])["id"])
    assert ids_a != ids_c and len(ids_a & ids_c) > 0  # same document ids where the same rows were chosen


def test_jobs_read_a_row_group_at_a_time_and_the_release_does_not_depend_on_the_cut(tmp_path, monkeypatch,
                                                                                    count_row_group_reads):
    """Shards in one row group and in row groups of 3 rows give the same release (segments, samples, parts);
    the jobs read every text group by group, never a shard's whole column."""
    docs = make_docs(seed=5)
    info = doc_info(docs)
    whole = build_kwargs(tmp_path / "whole", docs, doc_info=info)
    build_release(**whole)
    read_groups = count_row_group_reads()
    read_table = pq.read_table

    def no_whole_texts(path, *args, columns=None, **kwargs):  # noqa: ANN001, ANN202
        if columns is None or "text" in columns:
            pytest.fail(f"the whole text column of {path} was read")
        return read_table(path, *args, columns=columns, **kwargs)

    monkeypatch.setattr(pq, "read_table", no_whole_texts)
    cut = build_kwargs(tmp_path / "cut", docs, row_group_rows=3, doc_info=info)
    stats = build_release(**cut, units_file=tmp_path / "units.jsonl")
    assert read_groups and stats["segments"] > 0
    monkeypatch.undo()
    data = {k: v for k, v in file_hashes(whole["out_dir"]).items() if k.startswith("data/")}
    assert data and data == {k: v for k, v in file_hashes(cut["out_dir"]).items() if k.startswith("data/")}
    assert check_rebuild(cut["out_dir"], cut, workers=1).passed


def test_token_counts_are_reused_when_the_tokenizer_matches(tmp_path, built):
    from corpus_dagster.release.inputs import release_tokenizer_cfg
    from corpus_dagster.release.jobs import tokenizer

    kwargs, stats, docs = built
    tok = tokenizer(release_tokenizer_cfg(kwargs["settings"], kwargs["tokenize_cfg"]))
    counts = [len(ids) + 1 for ids in tok.encode_texts([d["text"] for d in docs])]  # streams count EOD
    tdir = tmp_path / "tokens"
    tdir.mkdir()
    pq.write_table(pa.table({"id": [d["id"] for d in docs], "n_tokens": pa.array(counts, pa.int32()),
                             "tokenizer": [tok.name] * len(docs), "split": ["train"] * len(docs)}),
                   tdir / "token_counts.parquet")
    man = {"tokenizer": {"name": tok.name, "vocab_sha256": tok.vocab_sha256(), "special_tokens": {"bos": None}}}
    (tdir / "_TOKENS.json").write_text(json.dumps(man))
    again = build_kwargs(tmp_path / "r", docs, doc_info=doc_info(docs), selection_excluded={"alpha": 7},
                         token_counts=tdir / "token_counts.parquet")
    res = build_release(**again)
    assert res["counts_reused"] == "reused" and res["documents_tokenized"] == 0
    assert stats["documents_tokenized"] == len(docs)
    assert file_hashes(again["out_dir"]) == file_hashes(kwargs["out_dir"])
    man["tokenizer"]["name"] = "other"
    (tdir / "_TOKENS.json").write_text(json.dumps(man))
    res = build_release(**(again | {"out_dir": tmp_path / "r2"}))
    assert res["documents_tokenized"] == len(docs) and "other" in res["counts_reused"]


def test_a_source_without_documents_adds_no_document_info(monkeypatch):
    # a source whose fetch found no documents has no clean files: nothing to describe (was: concat of nothing)
    from corpus_dagster.release import driver

    monkeypatch.setattr(driver, "clean_doc_files", lambda layout, sid: [])
    monkeypatch.setattr(driver.ingest_outputs, "document_info", lambda layout, sid: pa.table({"_doc_id": pa.array([], pa.string())}))
    assert driver._document_info(None, [SimpleNamespace(source_id="empty")]) == []
