"""The token-stream checks pass on a good build and fail, naming the problem, on each kind of damage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.config import load_config
from corpus_dagster.core.settings import Settings, TokenizeSettings
from corpus_dagster.tokenize.checks import (
    check_counts,
    check_decode_sample,
    check_rebuild,
    check_rebuild_sample,
    other_worker_count,
    sample_positions,
)
from corpus_dagster.tokenize.indexed import encode_index
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe, write_sample_shards
from corpus_dagster.tokenize.streams import build_token_streams


def tok_cfg(**over) -> TokenizeSettings:
    return Settings.from_resolved(load_config(None, {"tokenize": {"engine": "tiktoken", **over}})).tokenize


@pytest.fixture()
def built(tmp_path) -> tuple[Path, Path, dict]:
    shards = tmp_path / "shards"
    write_sample_shards(sample_texts(24) + ["ünïcödé 😀"], shards, shard_rows=8, val_permille=200)
    cfg = tok_cfg(max_file_bytes=20_000, check_sample_docs=100)
    build_token_streams(shards, tmp_path / "tok", cfg)
    return shards, tmp_path / "tok", cfg


def _manifest(tok: Path) -> dict:
    return json.loads((tok / "_TOKENS.json").read_text())


def _save(tok: Path, manifest: dict) -> None:
    (tok / "_TOKENS.json").write_text(json.dumps(manifest, indent=2))


def test_all_checks_pass_on_a_good_build(built):
    shards, tok, cfg = built
    counts = check_counts(tok)
    assert counts.passed, counts.problems
    assert counts.metadata["n_docs"] == 25
    decode = check_decode_sample(shards, tok, cfg)
    assert decode.passed, decode.problems
    assert decode.metadata == {"sampled": 25, "decoded": 25}
    rebuild = check_rebuild(shards, tok, cfg, workers=1)
    assert rebuild.passed, rebuild.problems
    assert rebuild.metadata["rebuild_workers"] == 2
    assert not [p for p in tok.parent.iterdir() if p.name.startswith(".")]  # scratch removed


def test_counts_check_catches_a_changed_bin_byte(built):
    _, tok, _ = built
    part = _manifest(tok)["splits"]["train"]["files"][0]["bin"]["name"]
    data = bytearray((tok / part).read_bytes())
    data[10] ^= 0xFF
    (tok / part).write_bytes(bytes(data))
    report = check_counts(tok)
    assert not report.passed
    assert report.problems == [f"{part}: sha256 differs from the manifest"]


def test_counts_check_catches_a_wrong_manifest_total(built):
    _, tok, _ = built
    manifest = _manifest(tok)
    manifest["n_tokens"] += 1
    manifest["splits"]["val"]["n_tokens"] += 1
    _save(tok, manifest)
    report = check_counts(tok)
    assert any("split val: .idx sizes sum to" in p for p in report.problems)
    assert any("token_counts.parquet: n_tokens sums to" in p for p in report.problems)


def test_counts_check_catches_an_idx_that_disagrees_with_the_counts(built):
    _, tok, _ = built
    manifest = _manifest(tok)
    part = manifest["splits"]["val"]["files"][0]
    idx = tok / part["idx"]["name"]
    from corpus_dagster.tokenize.indexed import read_index

    lengths = read_index(idx).lengths.copy()
    lengths[0] += 1
    lengths[1] -= 1  # same total, different per-document sizes
    idx.write_bytes(encode_index(lengths, np.dtype(manifest["dtype"])))
    report = check_counts(tok)
    assert not report.passed
    assert any(
        "per-document counts in token_counts.parquet differ from the .idx sizes" in p for p in report.problems
    )


def test_counts_check_catches_a_broken_document_index(built):
    _, tok, _ = built
    idx = tok / "val.idx"
    data = bytearray(idx.read_bytes())
    data[-8:] = (999).to_bytes(8, "little")  # last document-index entry
    idx.write_bytes(bytes(data))
    report = check_counts(tok)
    assert any("document index is not" in p for p in report.problems)


def test_counts_check_catches_a_changed_counts_table(built):
    _, tok, _ = built
    path = tok / "token_counts.parquet"
    table = pq.read_table(path)
    n = table.column("n_tokens").to_pylist()
    n[0] += 5
    pq.write_table(table.set_column(1, "n_tokens", pa.array(n, pa.int32())), path)
    report = check_counts(tok)
    assert any("n_tokens sums to" in p for p in report.problems)
    assert any("sha256 differs" in p or "per-document counts" in p for p in report.problems)


def test_counts_check_reports_a_missing_manifest_or_file(built):
    _, tok, _ = built
    (tok / "val.bin").unlink()
    assert "val.bin: missing" in check_counts(tok).problems
    (tok / "_TOKENS.json").unlink()
    report = check_counts(tok)
    assert not report.passed and "no token manifest" in report.problems[0]


def test_counts_check_rejects_a_manifest_breaking_its_schema(built):
    _, tok, _ = built
    manifest = _manifest(tok)
    manifest["dtype"] = "float32"
    _save(tok, manifest)
    report = check_counts(tok)
    assert not report.passed and "breaks tokens-manifest.schema.json" in report.problems[0]


def test_decode_check_catches_a_changed_token(built):
    shards, tok, cfg = built
    manifest = _manifest(tok)
    name = manifest["splits"]["train"]["files"][0]["bin"]["name"]
    data = np.frombuffer((tok / name).read_bytes(), dtype="<i4").copy()
    data[3] = 15339 if data[3] != 15339 else 1917  # another real token
    (tok / name).write_bytes(data.tobytes())
    report = check_decode_sample(shards, tok, cfg)
    assert not report.passed
    assert "decoded text differs from the shard text at character" in report.problems[0]


def test_decode_check_catches_a_missing_end_of_document_token(built):
    shards, tok, cfg = built
    manifest = _manifest(tok)
    name = manifest["splits"]["val"]["files"][0]["bin"]["name"]
    data = np.frombuffer((tok / name).read_bytes(), dtype="<i4").copy()
    data[data == 100257] = 13  # '.'
    (tok / name).write_bytes(data.tobytes())
    report = check_decode_sample(shards, tok, cfg)
    assert any("does not end with the end-of-document token" in p for p in report.problems)


def test_decode_check_refuses_another_tokenizer(built, tmp_path):
    shards, tok, _ = built
    bpe = train_sample_bpe(sample_texts(10), tmp_path / "other" / "tokenizer.json", vocab_size=500)
    other = Settings.from_resolved(load_config(None, {"tokenize": {"kind": "huggingface", "path": str(bpe)}})).tokenize
    report = check_decode_sample(shards, tok, other)
    assert report.problems == [
        "configured tokenizer 'other' (500 ids) is not the one in _TOKENS.json "
        "('cl100k_base'); rematerialize token_streams"
    ]


def test_rebuild_check_catches_a_file_that_differs(built):
    shards, tok, cfg = built
    table = pq.read_table(tok / "token_counts.parquet")
    pq.write_table(table, tok / "token_counts.parquet", compression="snappy")  # same rows, other bytes
    report = check_rebuild(shards, tok, cfg, workers=2)
    assert report.problems == ["token_counts.parquet: differs from a rebuild with workers=1"]


def test_rebuild_check_reports_a_failed_rebuild(built):
    shards, tok, cfg = built
    (shards / "shard-00000-of-00004.parquet").write_bytes(b"changed")
    report = check_rebuild(shards, tok, cfg, workers=2)  # rebuilds in-process with 1 worker
    assert not report.passed and report.problems[0].startswith("rebuild failed:")


def test_sample_positions_and_other_worker_count():
    assert sample_positions(0, 5) == []
    assert sample_positions(3, 10) == [0, 1, 2]
    picks = sample_positions(1000, 5)
    assert picks[0] == 0 and picks[-1] == 999 and len(picks) == 5
    assert other_worker_count(1) == 2 and other_worker_count(4) == 1


def test_checks_read_only_the_row_groups_of_the_rows_they_sample(tmp_path, count_row_group_reads):
    """A shard is bounded in rows, not bytes: the decode check and the sampled rebuild read the row groups
    that hold their rows, not the whole shard, and pass as they do on shards of one row group."""
    shards = tmp_path / "shards"
    write_sample_shards(sample_texts(40), shards, shard_rows=20, val_permille=200, row_group_rows=2)
    cfg = tok_cfg(check_sample_docs=3, batch_docs=3)
    build_token_streams(shards, tmp_path / "tok", cfg)
    reads = count_row_group_reads()
    decode = check_decode_sample(shards, tmp_path / "tok", cfg)
    assert decode.passed, decode.problems
    assert decode.metadata == {"sampled": 3, "decoded": 3}
    assert sorted(reads) == [0, 0, 9]  # rows 0 and 39 (shard 1, row 19) and 20 (shard 1, row 0)
    reads.clear()
    sampled = check_rebuild_sample(shards, tmp_path / "tok", cfg, workers=2, sample_batches=1, seed="s")
    assert sampled.passed, sampled.problems
    assert sampled.metadata["mode"] == "sample" and sampled.metadata["batches_rebuilt"] == 1
    assert len(reads) == 2  # a unit of 3 rows spans at most 2 row groups of 2 rows


def test_a_sampled_rebuild_catches_a_changed_token_in_a_shard_of_small_row_groups(tmp_path):
    shards = tmp_path / "shards"
    write_sample_shards(sample_texts(12), shards, shard_rows=12, val_permille=0, row_group_rows=2)
    cfg = tok_cfg(batch_docs=3)
    tok = tmp_path / "tok"
    build_token_streams(shards, tok, cfg)
    name = _manifest(tok)["splits"]["train"]["files"][0]["bin"]["name"]
    data = np.frombuffer((tok / name).read_bytes(), dtype="<i4").copy()
    data[-2] = 15339 if data[-2] != 15339 else 1917  # a token of the last document
    (tok / name).write_bytes(data.tobytes())
    report = check_rebuild_sample(shards, tok, cfg, workers=2, sample_batches=3, seed="s")
    assert report.problems == [
        "shard-00000-of-00001.parquet rows 9..11: train tokens differ from a rebuild with workers=1"
    ]
