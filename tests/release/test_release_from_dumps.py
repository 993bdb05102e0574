"""A release built from Hub-style dumps through the Dagster graph: a Parquet dump whose `id` column is the
ledger's id_field and a kept field, a url-only JSON Lines source, a text-only jsonl.gz source keeping other
fields, and a folder of .md/.txt files. Every row's metadata equals the ingest tables, no file names the
build machine, and excluding an earlier row upstream moves no other document's release id or keeper."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from corpus_factory import document, write_jsonl

from corpus_dagster.core.config import load_settings
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources
from corpus_dagster.ingest import outputs as ingest_outputs
from corpus_dagster.release import driver as release_driver

RELEASE = {"bucket_width": 64, "min_tokens": 32, "max_tokens": 512, "max_segments": 3, "per_bucket_cap": 1000}
N = 24
DUP_FIRST, DUP_SECOND = 9, 10  # one text twice: positional ids sort "dump:10" before "dump:9"


def texts(seed: str, n: int) -> list[str]:
    rng = random.Random(seed)
    return [document(rng, rng.choice([6, 8, 12, 60])) for _ in range(n)]  # 60 sentences: over max_tokens, segmented


def write_sources(root: Path, revised: bool) -> list[dict[str, Any]]:
    """The four sources; `revised`: the dump marks its row 1 a duplicate (the `where` excludes it), the web and
    lines files lose their row 1 and the notes folder its first file, as a new revision upstream would."""
    src = root / "sources"
    src.mkdir(parents=True, exist_ok=True)
    dump = texts("dump", N)
    dump[DUP_SECOND] = dump[DUP_FIRST]
    pq.write_table(pa.table({
        "text": dump,
        "id": [f"doc-{i:03d}" for i in range(N)],
        "url": [f"https://hub.example/page/{i}" for i in range(N)],
        "token_count": [len(t.split()) for t in dump],
        "minhash_cluster_size": [2 if revised and i == 1 else 1 for i in range(N)],
    }), src / "dump.parquet")
    web = [{"text": t, "link": f"https://web.example/{i}"} for i, t in enumerate(texts("web", N))]
    lines = [{"content": t, "title": f"Line {i}", "score": i / 4} for i, t in enumerate(texts("lines", N))]
    if revised:
        del web[1], lines[1]
    write_jsonl(src / "web.jsonl", web)
    with gzip.open(src / "lines.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in lines)
    notes = src / "notes" / "sub"
    notes.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(texts("notes", 8)):
        path = notes / f"note{i}.{'md' if i % 2 else 'txt'}"
        path.unlink(missing_ok=True)
        if not (revised and i == 0):
            path.write_text(t, encoding="utf-8")
    return [
        {"source_id": "dump", "urls": [f"file://{src}/dump.parquet"], "format": "parquet", "url_field": "url",
         "id_field": "id", "keep_fields": ["id", "token_count"], "where": "minhash_cluster_size = 1",
         "license_spdx": "ODC-By-1.0"},
        {"source_id": "web", "urls": [str(src / "web.jsonl")], "format": "jsonl", "url_field": "link",
         "license_spdx": "CC-BY-4.0"},
        {"source_id": "lines", "urls": [str(src / "lines.jsonl.gz")], "format": "jsonl.gz", "text_field": "content",
         "keep_fields": ["title", "score"], "license_spdx": "MIT"},
        {"source_id": "notes", "urls": [f"file://{src}/notes/**/*.md", f"file://{src}/notes/**/*.txt"],
         "format": "text", "license_spdx": "CC0-1.0"},
    ]


def build(root: Path, revised: bool) -> dict[str, Any]:
    """Write the sources, ledger and config under `root`, build everything through Dagster."""
    artifacts = root / "artifacts"
    write_jsonl(artifacts / "corpus" / "LEDGER.jsonl", write_sources(root, revised))
    cfg = {"dataset": "dumps", "version": "v1", "shard_rows": 40, "workers": 1, "paths": {"artifacts": str(artifacts)},
           "release": RELEASE}
    (root / "corpus.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    corpus = CorpusConfig(config_path=str(root / "corpus.yaml"))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    result = materialize_global(corpus, instance)
    settings, layout = load_settings(root / "corpus.yaml"), corpus.layout()
    out = layout.release(release_driver.release_name(settings))
    rows = pl.read_parquet(sorted(out.glob("data/*/*.parquet")))
    metas = [json.loads(m) for m in rows["metadata"].to_list()]
    return {"root": root, "result": result, "layout": layout, "settings": settings, "out": out, "rows": rows,
            "metas": metas}


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> dict[str, Any]:
    return build(tmp_path_factory.mktemp("dumps"), revised=False)


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> dict[str, Any]:
    return build(tmp_path_factory.mktemp("dumps-revised"), revised=True)


def test_the_build_succeeds_with_every_release_check_passing(first):
    assert first["result"].success
    checks = {name: passed for asset, name, passed, _ in check_results(first["result"]) if asset == "release"}
    assert checks["release_metadata_matches_ingest"] and checks["release_no_machine_paths"], checks
    assert all(checks.values()), checks
    assert {m["source_id"] for m in first["metas"]} == {"dump", "web", "lines", "notes"}


def test_every_row_metadata_equals_the_ingest_tables(first):
    layout = first["layout"]
    info = {sid: {r["_doc_id"]: r for r in ingest_outputs.document_info(layout, sid).to_pylist()}
            for sid in ("dump", "web", "lines", "notes")}
    for created, meta in zip(first["rows"]["created_at"].to_list(), first["metas"], strict=True):
        row = info[meta["source_id"]][meta["doc_id"]]
        assert created.isoformat().replace("+00:00", "Z") == row["_fetched_at"]  # never the 1970 fallback
        assert isinstance(meta["cleaned"], list)
        for name, value in row.items():
            if not name.startswith("_"):
                assert meta.get(name) == value, (meta, name)
    dump = [m for m in first["metas"] if m["source_id"] == "dump"]
    assert dump and all(m["id"].startswith("doc-") and isinstance(m["token_count"], int) for m in dump)
    lines = [m for m in first["metas"] if m["source_id"] == "lines"]
    assert lines and all(m["title"].startswith("Line ") and "score" in m for m in lines)


def test_the_metadata_check_fails_on_a_row_that_lost_its_fields(first):
    from corpus_dagster.release.checks import check_metadata

    expected = release_driver.expected_metadata(first["layout"], first["settings"])
    rows = release_driver._release_rows(first["out"])
    assert check_metadata(rows, expected).passed
    lines_row = next(i for i, m in enumerate(rows["metadata"].to_list()) if m["source_id"] == "lines")
    broken = [dict(m) for m in rows["metadata"].to_list()]
    del broken[lines_row]["title"]
    broken[lines_row]["cleaned"] = None
    report = check_metadata(rows.with_columns(pl.Series("metadata", broken, dtype=pl.Object)), expected)
    assert not report.passed and any("title=None" in p for p in report.problems), report.problems


def test_no_file_names_the_build_machine(first):
    root = str(first["root"])
    for path in first["out"].rglob("*"):
        if path.is_file() and path.suffix != ".png":
            data = path.read_bytes()
            if path.suffix == ".parquet":
                data = json.dumps(pl.read_parquet(path).drop("content", strict=False).to_dicts(), default=str).encode()
            assert b"file://" not in data and root.encode() not in data, path
    notes = sorted({m["source_file"] for m in first["metas"] if m["source_id"] == "notes"})
    assert notes and all(n.startswith("sub/note") for n in notes)  # relative to the glob's fixed folder
    assert all("url" not in m for m in first["metas"] if m["source_id"] in ("lines", "notes"))
    assert all(m["url"].startswith("https://") for m in first["metas"] if m["source_id"] in ("dump", "web"))


def test_the_machine_path_check_names_a_leaked_path(first, tmp_path):
    from corpus_dagster.release.checks import check_no_machine_paths

    (tmp_path / "README.md").write_text(f"see {first['root']}/artifacts and file:///x\n", encoding="utf-8")
    report = check_no_machine_paths(tmp_path, [str(first["root"])])
    assert len(report.problems) == 2 and "file:// URL" in report.problems[0], report.problems


def test_the_release_loads_offline_with_datasets_and_polars(first, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    ds = datasets.load_dataset("parquet", data_files=sorted(str(p) for p in first["out"].glob("data/*/*.parquet")),
                               split="train")
    assert ds.num_rows == first["rows"].height and "content" in ds.column_names
    assert pl.scan_parquet(str(first["out"] / "data" / "*" / "*.parquet")).select(pl.len()).collect().item() == ds.num_rows


def by_document(built: dict[str, Any]) -> dict[tuple, str]:
    """(source_id, content, segment) -> release id."""
    return {(m["source_id"], c, m.get("segment", -1)): rid
            for rid, c, m in zip(built["rows"]["id"].to_list(), built["rows"]["content"].to_list(), built["metas"],
                                 strict=True)}


@pytest.mark.parametrize("source_id", ["dump", "web", "lines", "notes"])
def test_an_upstream_exclusion_moves_no_other_release_id(first, second, source_id):
    before = {k: v for k, v in by_document(first).items() if k[0] == source_id}
    after = {k: v for k, v in by_document(second).items() if k[0] == source_id}
    assert after and set(after) <= set(before)  # the revision removed a document, added none
    assert {k: before[k] for k in after} == after


def test_the_revision_removed_a_released_document_of_every_source(first, second):
    def removed(m: dict) -> bool:
        return (m.get("id") == "doc-001" or m.get("url") == "https://web.example/1" or m.get("title") == "Line 1"
                or m.get("source_file") == "sub/note0.txt")

    assert {m["source_id"] for m in first["metas"] if removed(m)} == {"dump", "web", "lines", "notes"}
    assert not [m for m in second["metas"] if removed(m)]


def test_the_kept_duplicate_follows_the_stable_key_not_the_row_position(first, second):
    for built in (first, second):
        kept = {m["id"] for m in built["metas"] if m["source_id"] == "dump"}
        assert f"doc-{DUP_FIRST:03d}" in kept and f"doc-{DUP_SECOND:03d}" not in kept


def test_explain_takes_a_release_id_and_shows_bucket_segment_and_span(first, capsys):
    from corpus_dagster.cli.explain import main
    from corpus_dagster.explain.journey import DocumentNotFound, explain

    rows = first["rows"]
    seg = next(i for i, m in enumerate(first["metas"]) if "segment" in m)
    meta, rid = first["metas"][seg], rows["id"][seg]
    answer = explain(first["layout"], first["settings"], rid)
    assert answer["id"] == meta["doc_id"] and answer["release_id"] == rid and answer["left_at"] is None
    step = answer["steps"]["release"]
    asked = step["rows"][0]
    assert asked["release_id"] == rid and asked["segment"] == meta["segment"] and asked["char_span"] == meta["char_span"]
    part = next(p for p in first["out"].glob("data/*/*.parquet") if rid in pl.read_parquet(p, columns=["id"])["id"].to_list())
    assert asked["bucket"] == part.parent.name and asked["file"] == part.relative_to(first["out"]).as_posix()
    start, end = meta["char_span"]
    assert f"segment {meta['segment']} chars {start}..{end} in {part.parent.name}" in step["summary"]
    # the parent id the segments share names the whole document too
    by_parent = explain(first["layout"], first["settings"], meta["parent_id"])
    assert by_parent["id"] == meta["doc_id"] and len(by_parent["steps"]["release"]["rows"]) >= 2
    assert main([rid, "--config", str(first["root"] / "corpus.yaml")]) == 0
    assert f"release {step['summary']}" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(DocumentNotFound, match="no release row"):
        explain(first["layout"], first["settings"], "00000000-0000-5000-8000-000000000000")


def test_the_analysis_reads_the_release_folder_by_its_content_column(first, tmp_path):
    from corpus_dagster.analysis.cli import main

    out = tmp_path / "analysis"
    assert main(["--corpus-dir", str(first["out"]), "--out-dir", str(out)]) == 0  # `content`, found by itself
    lengths = next(out.rglob("*.parquet"))
    assert lengths.is_file()
    report = (out / "REPORT.md") if (out / "REPORT.md").is_file() else next(out.rglob("*.md"))
    assert f"{first['rows'].height:,}" in report.read_text(encoding="utf-8") or str(first["rows"].height) in report.read_text(encoding="utf-8")
    assert main(["--corpus-dir", str(first["out"]), "--out-dir", str(tmp_path / "x"), "--text-column", "nope",
                 "--dry-run"]) == 2
