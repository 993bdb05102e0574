"""The real Dagster graph on a small generated corpus: exact output contract and determinism."""

import hashlib
import json
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.config import config_sha256, load_config
from corpus_dagster.core.documents import SHARD_SCHEMA
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources

EXPECTED_COLUMNS = [
    ("id", pa.string()), ("text", pa.string()), ("source_id", pa.string()), ("url", pa.string()),
    ("license_spdx", pa.string()), ("lang", pa.string()), ("n_chars", pa.int32()), ("sha256", pa.binary(32)),
    ("minhash_cluster", pa.int64()), ("pii_redactions", pa.int32()), ("split", pa.string()),
]


def run_all(config_path: Path, artifacts: Path | None = None, workers: int | None = None):
    corpus = CorpusConfig(config_path=str(config_path), artifacts=str(artifacts) if artifacts else None, workers=workers)
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    result = materialize_global(corpus, instance)
    return corpus, result


def output_dir(corpus: CorpusConfig) -> Path:
    return corpus.layout().shards


def read_all(folder: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("shard-*.parquet"))])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("pipe")
    cfg = write_setup(root)
    corpus, result = run_all(cfg)
    return cfg, corpus, result


def test_exact_shard_schema_ids_and_split(built):
    cfg, corpus, _ = built
    folder = output_dir(corpus)
    names = sorted(p.name for p in folder.glob("shard-*.parquet"))
    assert names == [f"shard-{i:05d}-of-00004.parquet" for i in range(4)]  # 92 docs / 25 rows
    for p in folder.glob("shard-*.parquet"):
        schema = pq.read_schema(p)
        assert [(f.name, f.type) for f in schema] == EXPECTED_COLUMNS
        assert pq.ParquetFile(p).metadata.row_group(0).column(0).compression == "ZSTD"
    table = read_all(folder)
    ids = table["id"].to_pylist()
    expected = sorted([f"alpha:{k}" for k in range(40)] + [f"beta:{k}" for k in range(40)] + [f"gamma:{k}" for k in range(12)],
                      key=lambda s: s.encode())
    assert ids == expected
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        digest = hashlib.sha256(row["text"].encode()).digest()
        assert row["sha256"] == digest and row["n_chars"] == len(row["text"])
        assert row["split"] == ("val" if int.from_bytes(digest[:8], "big") % 1000 < 100 else "train")
        assert row["minhash_cluster"] == i and row["pii_redactions"] == 0 and row["lang"] in ("und", "en")
    alpha0 = next(r for r in rows if r["id"] == "alpha:0")
    assert alpha0["url"] == "https://a.example/0" and alpha0["license_spdx"] == "CC-BY-4.0"
    beta3 = next(r for r in rows if r["id"] == "beta:3")
    assert beta3["url"].endswith("beta.jsonl.zst#4") and beta3["source_id"] == "beta"
    assert {r["split"] for r in rows} == {"train", "val"}


def test_manifest_contract(built):
    cfg, corpus, _ = built
    folder = output_dir(corpus)
    manifest = json.loads((folder / "_MANIFEST.json").read_text())
    assert list(manifest)[:5] == ["dataset", "version", "n_docs", "n_shards", "shards"]
    assert list(manifest)[-3:] == ["ledger_ref", "ledger_sha256", "config_sha256"]
    for key in ("filters", "dedup", "pii"):
        assert key in manifest
    assert manifest["dataset"] == "testset" and manifest["version"] == "v1"
    assert manifest["n_docs"] == 92 == sum(s["rows"] for s in manifest["shards"])
    for s in manifest["shards"]:
        assert hashlib.sha256((folder / s["name"]).read_bytes()).hexdigest() == s["sha256"]
        assert pq.ParquetFile(folder / s["name"]).metadata.num_rows == s["rows"]
    assert {"lang", "gopher", "repetition", "ppl"} <= set(manifest["filters"])
    assert list(manifest["dedup"]) == ["exact_dropped", "near_dropped", "decontaminated", "jaccard_threshold", "num_perm", "bands", "ngram"]
    assert list(manifest["pii"]) == ["emails", "phones", "cards", "ips", "keys"]
    ledger = corpus.layout().ledger
    assert manifest["ledger_ref"] == "corpus/LEDGER.jsonl"
    assert manifest["ledger_sha256"] == hashlib.sha256(ledger.read_bytes()).hexdigest()
    assert manifest["config_sha256"] == config_sha256(load_config(cfg))


def test_all_checks_pass(built):
    _, _, result = built
    checks = check_results(result)
    assert {c[1] for c in checks} >= {"shard_schema", "manifest_consistent", "ids_sorted", "split_matches_sha256",
                                       "hashes_match_text", "deterministic_rebuild"}
    assert all(c[2] for c in checks), [c for c in checks if not c[2]]


def test_byte_identical_across_workers_and_runs(built, tmp_path):
    cfg, corpus, _ = built
    ledger = corpus.layout().ledger
    outputs = []
    for i, workers in enumerate([4, 1]):
        art = tmp_path / f"art{i}"
        (art / "corpus").mkdir(parents=True)
        shutil.copy(ledger, art / "corpus" / "LEDGER.jsonl")
        c, _ = run_all(cfg, artifacts=art, workers=workers)
        outputs.append(output_dir(c))
    reference = output_dir(corpus)
    for folder in outputs:
        files = sorted(p.name for p in folder.iterdir())
        assert files == sorted(p.name for p in reference.iterdir())
        for name in files:
            assert (folder / name).read_bytes() == (reference / name).read_bytes(), name


def test_global_before_sources_fails_clearly(tmp_path):
    from corpus_factory import write_setup

    cfg = write_setup(tmp_path)
    corpus = CorpusConfig(config_path=str(cfg))
    with pytest.raises(dg.Failure, match="no source partition has materialized minhash_signatures yet"):
        materialize_global(corpus, dg.DagsterInstance.ephemeral())
    assert not corpus.layout().shards.exists()


def test_row_group_cuts_respect_limit():
    from corpus_dagster.core.parquet import row_group_cuts

    sizes = np.array([10, 10, 10, 50, 10, 100, 5])
    cuts = row_group_cuts(sizes, 30)
    groups = [sizes[a:b].sum() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    assert cuts[0] == 0 and cuts[-1] == len(sizes)
    assert all(g <= 30 or b - a == 1 for g, a, b in zip(groups, cuts[:-1], cuts[1:], strict=True))
    assert cuts == [0, 3, 4, 5, 6, 7]


def test_source_order_matches_byte_order_of_ids():
    from corpus_dagster.publish.shards import source_order

    sids = ["ab", "a", "a.b", "a-b", "a1", "b"]
    ids = [f"{s}:{k}" for s in sids for k in (0, 1, 10, 2)]
    by_bytes = sorted(ids, key=str.encode)
    flattened = [i for s in source_order(sids) for i in sorted((x for x in ids if x.rsplit(":", 1)[0] == s), key=str.encode)]
    assert flattened == by_bytes


def test_shard_schema_constant_matches_contract():
    assert [(f.name, f.type) for f in SHARD_SCHEMA] == EXPECTED_COLUMNS


def test_ledger_written_by_demo_is_valid(tmp_path):
    from corpus_dagster.cli.demo import demo_sources
    from corpus_dagster.core.ledger import write_ledger

    sources = demo_sources(tmp_path)
    write_ledger(tmp_path / "L.jsonl", sources)
    assert [s.source_id for s in load_ledger(tmp_path / "L.jsonl")][:2] == ["pydoc-topics", "pkg-licenses"]
