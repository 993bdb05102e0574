"""The token_streams asset and its checks, run through Dagster on generated shards."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.tokenize import (
    TOKEN_ASSETS,
    TOKEN_CHECKS,
    token_counts_consistent,
    token_sample_decodes,
    token_streams,
    token_streams_reproducible,
)
from corpus_dagster.tokenize.manifest import read_manifest
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe, write_sample_shards


def setup_corpus(tmp_path: Path, tokenize_yaml: str, workers: int = 1) -> CorpusConfig:
    artifacts = tmp_path / "artifacts"
    write_sample_shards(
        sample_texts(30) + ["ünïcödé 😀 <|endoftext|>"],
        artifacts / "corpus" / "demo" / "v1",
        dataset="demo",
        version="v1",
        shard_rows=10,
        val_permille=200,
    )
    config = tmp_path / "corpus.yaml"
    config.write_text(f"dataset: demo\nversion: v1\nworkers: {workers}\ntokenize:\n{tokenize_yaml}")
    return CorpusConfig(config_path=str(config), artifacts=str(artifacts))


def run(resource: CorpusConfig) -> dg.ExecuteInProcessResult:
    return dg.materialize([*TOKEN_ASSETS, *TOKEN_CHECKS], resources={"corpus": resource})


def test_asset_with_a_local_bpe_tokenizer_json(tmp_path):
    bpe = train_sample_bpe(sample_texts(40), tmp_path / "my-bpe" / "tokenizer.json")
    resource = setup_corpus(tmp_path, f"  kind: huggingface\n  path: {bpe}\n  check_sample_docs: 8\n")
    result = run(resource)
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(checks) == {"token_counts_consistent", "token_sample_decodes", "token_streams_reproducible"}
    assert all(e.passed for e in checks.values())
    assert checks["token_sample_decodes"].metadata["decoded"].value == 8
    meta = result.asset_materializations_for_node("token_streams")[0].metadata
    assert meta["tokenizer"].value == "my-bpe" and meta["dtype"].value == "uint16"
    manifest = read_manifest(tmp_path / "artifacts" / "tokens" / "demo" / "v1")
    assert meta["n_tokens"].value == manifest["n_tokens"] > 0
    assert manifest["dataset"] == "demo" and manifest["tokenizer"]["kind"] == "huggingface"
    assert "splits" not in meta and {r.data["split"] for r in meta["split_counts"].records} >= {"train"}


def test_asset_with_the_offline_cl100k_default(tmp_path):
    resource = setup_corpus(tmp_path, "  rebuild_check: false\n")
    result = run(resource)
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert all(e.passed for e in checks.values())
    assert checks["token_streams_reproducible"].metadata["skipped"].value == "tokenize.rebuild_check is false"
    meta = result.asset_materializations_for_node("token_streams")[0].metadata
    assert meta["tokenizer"].value == "cl100k_base" and meta["vocab_size"].value == 100277
    assert meta["dtype"].value == "int32" and meta["eod_id"].value == 100257
    assert meta["workers"].value == 1 and meta["engine"].value in {"tiktoken", "bpe-openai"}


def test_checks_fail_on_damaged_streams(tmp_path):
    resource = setup_corpus(tmp_path, "  engine: tiktoken\n  rebuild_check: true\n  rebuild_check_batches: 0\n")  # the full rebuild
    assert dg.materialize(TOKEN_ASSETS, resources={"corpus": resource}).success
    tokens = tmp_path / "artifacts" / "tokens" / "demo" / "v1"
    data = bytearray((tokens / "train.bin").read_bytes())
    data[4:8] = (15339).to_bytes(4, "little")  # replace the second token of the first document
    (tokens / "train.bin").write_bytes(bytes(data))
    counts = token_counts_consistent(corpus=resource)
    decode = token_sample_decodes(corpus=resource)
    # as if the build had used 2 workers: the check then rebuilds in this process with 1
    rebuild = token_streams_reproducible(
        corpus=CorpusConfig(config_path=resource.config_path, artifacts=resource.artifacts, workers=2)
    )
    assert not counts.passed and "train.bin: sha256 differs" in counts.metadata["details"].value
    assert not decode.passed and "decoded text differs" in decode.metadata["details"].value
    assert not rebuild.passed and "train.bin: differs from a rebuild" in rebuild.metadata["details"].value


def test_definitions_wiring():
    defs = dg.Definitions(
        assets=TOKEN_ASSETS,
        asset_checks=TOKEN_CHECKS,
        resources={"corpus": CorpusConfig(config_path="unused.yaml")},
    )
    graph = defs.resolve_asset_graph()
    key = dg.AssetKey("token_streams")
    node = graph.get(key)
    assert node.group_name == "tokenize"
    assert dg.AssetKey("manifest") in node.parent_keys
    assert node.automation_condition is not None
    assert token_streams.specs_by_key[key].kinds == {"numpy", "parquet"}
    blocking = {spec.name: spec.blocking for c in TOKEN_CHECKS for spec in c.check_specs}
    assert blocking == {
        "token_counts_consistent": True,
        "token_sample_decodes": True,
        "token_streams_reproducible": False,
    }


def test_missing_shards_fail_the_asset_with_a_clear_error(tmp_path):
    config = tmp_path / "corpus.yaml"
    config.write_text("dataset: demo\nversion: v1\n")
    resource = CorpusConfig(config_path=str(config), artifacts=str(tmp_path / "artifacts"))
    with pytest.raises(dg.Failure, match="no shards manifest; materialize `shards`/`manifest` first"):
        dg.materialize(TOKEN_ASSETS, resources={"corpus": resource})


def test_unloadable_tokenizer_fails_the_asset_with_what_to_do(tmp_path):
    resource = setup_corpus(tmp_path, f"  kind: huggingface\n  path: {tmp_path / 'missing'}\n")
    with pytest.raises(dg.Failure, match="Hugging Face tokenizer file not found: .*tokenizer.json"):
        dg.materialize(TOKEN_ASSETS, resources={"corpus": resource})
