"""Building token streams from shards: contents, determinism across workers, file cuts, bad input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.config import load_config
from corpus_dagster.core.errors import TokenStreamError
from corpus_dagster.core.settings import Settings, TokenizeSettings
from corpus_dagster.lib.tokenizers import load_tokenizer
from corpus_dagster.tokenize.indexed import read_index, read_sequence
from corpus_dagster.tokenize.manifest import manifest_violations, read_manifest
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe, write_sample_shards
from corpus_dagster.tokenize.streams import build_token_streams, resolve_parallelism

EXTRA = ["hello <|endoftext|> world", "", "ünïcödé 😀 日本語", "x" * 5000]


def tok_cfg(**over) -> TokenizeSettings:
    return Settings.from_resolved(load_config(None, {"tokenize": over})).tokenize


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """60 documents in 5 shards (12 rows each), about 15% of them in split val."""
    folder = tmp_path_factory.mktemp("shards")
    write_sample_shards(sample_texts(56) + EXTRA, folder, shard_rows=12, val_permille=150)
    return folder


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory) -> Path:
    return train_sample_bpe(sample_texts(40), tmp_path_factory.mktemp("bpe") / "tiny" / "tokenizer.json")


def shard_rows(folder: Path) -> list[dict]:
    manifest = json.loads((folder / "_MANIFEST.json").read_text())
    rows = []
    for s in manifest["shards"]:
        rows += pq.read_table(folder / s["name"], columns=["id", "text", "split"]).to_pylist()
    return rows


def file_hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_streams_hold_every_document_in_id_order(corpus, tmp_path):
    cfg = tok_cfg(engine="tiktoken")
    result = build_token_streams(corpus, tmp_path / "tok", cfg)
    manifest = read_manifest(tmp_path / "tok")
    assert manifest_violations(manifest) == []
    assert manifest == result.manifest
    rows = shard_rows(corpus)
    tok = load_tokenizer(cfg)
    for split in ("train", "val"):
        expected = [r for r in rows if r["split"] == split]
        assert manifest["splits"][split]["n_docs"] == len(expected) > 0
        index = read_index(tmp_path / "tok" / f"{split}.idx")
        assert index.lengths.size == len(expected)
        for i, row in enumerate(expected):
            seq = read_sequence(tmp_path / "tok" / f"{split}.bin", index, i)
            assert tok.decode_text(seq) == row["text"], row["id"]
    assert manifest["n_docs"] == len(rows)
    assert manifest["dtype"] == "int32"
    assert manifest["source"]["n_shards"] == 5
    assert (
        manifest["source"]["manifest_sha256"]
        == hashlib.sha256((corpus / "_MANIFEST.json").read_bytes()).hexdigest()
    )
    assert result.text_bytes == sum(len(r["text"].encode()) for r in rows)


def test_counts_table_is_exact_and_in_id_order(corpus, tmp_path):
    cfg = tok_cfg(engine="tiktoken")
    build_token_streams(corpus, tmp_path / "tok", cfg)
    table = pq.read_table(tmp_path / "tok" / "token_counts.parquet")
    assert table.schema.names == ["id", "n_tokens", "tokenizer", "split"]
    assert table.schema.field("n_tokens").type == pa.int32()
    rows = shard_rows(corpus)
    assert table.column("id").to_pylist() == [r["id"] for r in rows]
    assert table.column("split").to_pylist() == [r["split"] for r in rows]
    assert set(table.column("tokenizer").to_pylist()) == {"cl100k_base"}
    enc = load_tokenizer(cfg).impl
    # n_tokens is the sequence length in the stream: the text's tokens plus the end-of-document token
    assert table.column("n_tokens").to_pylist() == [len(enc.encode_texts([r["text"]])[0]) + 1 for r in rows]
    assert sum(table.column("n_tokens").to_pylist()) == read_manifest(tmp_path / "tok")["n_tokens"]


def test_byte_identical_across_runs_and_worker_counts(corpus, bpe_file, tmp_path):
    cfg = tok_cfg(kind="huggingface", path=str(bpe_file), max_file_bytes=4096, batch_docs=7)
    hashes = []
    for i, workers in enumerate([1, 2, 4, 1]):
        result = build_token_streams(corpus, tmp_path / f"run{i}", cfg, workers=workers)
        assert result.workers == workers
        hashes.append(file_hashes(tmp_path / f"run{i}"))
    assert len(hashes[0]) > 6  # several parts per split
    assert all(h == hashes[0] for h in hashes[1:])


def test_engines_and_thread_counts_give_identical_files(corpus, tmp_path):
    a = build_token_streams(corpus, tmp_path / "a", tok_cfg(engine="tiktoken", threads_per_worker=1))
    b = build_token_streams(corpus, tmp_path / "b", tok_cfg(engine="auto", threads_per_worker=2))
    assert a.threads == 1 and b.threads == 2
    assert file_hashes(tmp_path / "a") == file_hashes(tmp_path / "b")


def test_large_splits_are_cut_into_several_files(corpus, bpe_file, tmp_path):
    cfg = tok_cfg(kind="huggingface", path=str(bpe_file), max_file_bytes=10_000)
    manifest = build_token_streams(corpus, tmp_path / "tok", cfg).manifest
    files = manifest["splits"]["train"]["files"]
    assert len(files) > 2 and manifest["dtype"] == "uint16"
    assert [f["prefix"] for f in files] == [f"train-{i:05d}-of-{len(files):05d}" for i in range(len(files))]
    for f in files:
        size = (tmp_path / "tok" / f["bin"]["name"]).stat().st_size
        assert size == f["bin"]["bytes"]
        assert size <= 10_000 or f["n_docs"] == 1
    assert sum(f["n_docs"] for f in files) == manifest["splits"]["train"]["n_docs"]
    assert sum(f["n_tokens"] for f in files) == manifest["splits"]["train"]["n_tokens"]


def test_bos_is_prepended_when_configured(corpus, bpe_file, tmp_path):
    cfg = tok_cfg(kind="huggingface", path=str(bpe_file), prepend_bos=True, bos_token="<s>")
    manifest = build_token_streams(corpus, tmp_path / "tok", cfg).manifest
    assert manifest["tokenizer"]["special_tokens"]["bos"] == {"token": "<s>", "id": 1}
    index = read_index(tmp_path / "tok" / "train.idx")
    for i in range(index.lengths.size):
        seq = read_sequence(tmp_path / "tok" / "train.bin", index, i)
        assert seq[0] == 1 and seq[-1] == 0


def test_empty_corpus_writes_empty_streams(tmp_path):
    write_sample_shards([], tmp_path / "shards")
    manifest = build_token_streams(tmp_path / "shards", tmp_path / "tok", tok_cfg(engine="tiktoken")).manifest
    assert manifest["n_docs"] == 0 and manifest["n_tokens"] == 0
    assert (tmp_path / "tok" / "train.bin").stat().st_size == 0


def test_resolve_parallelism_caps_workers_and_splits_cores():
    assert resolve_parallelism(tok_cfg(), 4, 2)[0] == 2
    assert resolve_parallelism(tok_cfg(threads_per_worker=3), 2, 10) == (2, 3)
    assert resolve_parallelism(tok_cfg(), 8, 0)[0] == 1


def _copy_corpus(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_missing_manifest_is_reported(tmp_path):
    with pytest.raises(TokenStreamError, match="no shards manifest"):
        build_token_streams(tmp_path, tmp_path / "tok", tok_cfg())


def test_missing_shard_is_named(corpus, tmp_path):
    folder = _copy_corpus(corpus, tmp_path / "c")
    (folder / "shard-00002-of-00005.parquet").unlink()
    with pytest.raises(TokenStreamError, match="shard-00002-of-00005.parquet: shard listed"):
        build_token_streams(folder, tmp_path / "tok", tok_cfg())


def test_changed_shard_fails_its_checksum(corpus, tmp_path):
    folder = _copy_corpus(corpus, tmp_path / "c")
    shard = folder / "shard-00001-of-00005.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, 11), shard, compression="zstd")
    with pytest.raises(TokenStreamError, match="shard-00001-of-00005.parquet: sha256 .* differs"):
        build_token_streams(folder, tmp_path / "tok", tok_cfg(engine="tiktoken"))


def _rewrite_shard(folder: Path, name: str, table: pa.Table) -> None:
    """Replace a shard and update its manifest entry, so only the content rule is broken."""
    pq.write_table(table, folder / name, compression="zstd")
    manifest = json.loads((folder / "_MANIFEST.json").read_text())
    for s in manifest["shards"]:
        if s["name"] == name:
            s["sha256"] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
            s["rows"] = table.num_rows
    (folder / "_MANIFEST.json").write_text(json.dumps(manifest))


def test_unknown_split_value_is_named(tmp_path):
    write_sample_shards(["a", "b"], tmp_path / "c", shard_rows=2)
    name = "shard-00000-of-00001.parquet"
    table = pq.read_table(tmp_path / "c" / name)
    table = table.set_column(10, "split", pa.array(["train", "test"]))
    _rewrite_shard(tmp_path / "c", name, table)
    with pytest.raises(TokenStreamError, match="document 'sample:1' has split outside"):
        build_token_streams(tmp_path / "c", tmp_path / "tok", tok_cfg(engine="tiktoken"))


def test_unsorted_ids_are_rejected(tmp_path):
    write_sample_shards(["a", "b", "c"], tmp_path / "c", shard_rows=3)
    name = "shard-00000-of-00001.parquet"
    table = pq.read_table(tmp_path / "c" / name)
    _rewrite_shard(tmp_path / "c", name, table.take([1, 0, 2]))
    with pytest.raises(TokenStreamError, match="not strictly increasing"):
        build_token_streams(tmp_path / "c", tmp_path / "tok", tok_cfg(engine="tiktoken"))


def test_ids_out_of_order_across_shards_are_rejected(tmp_path):
    write_sample_shards(["a", "b", "c", "d"], tmp_path / "c", shard_rows=2)
    manifest = json.loads((tmp_path / "c" / "_MANIFEST.json").read_text())
    manifest["shards"].reverse()
    (tmp_path / "c" / "_MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(TokenStreamError, match="shard ids out of order"):
        build_token_streams(tmp_path / "c", tmp_path / "tok", tok_cfg(engine="tiktoken"))


def test_row_count_mismatch_is_reported(tmp_path):
    write_sample_shards(["a", "b"], tmp_path / "c", shard_rows=2)
    manifest = json.loads((tmp_path / "c" / "_MANIFEST.json").read_text())
    manifest["shards"][0]["rows"] = 3
    (tmp_path / "c" / "_MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(TokenStreamError, match="2 rows, _MANIFEST.json says 3"):
        build_token_streams(tmp_path / "c", tmp_path / "tok", tok_cfg(engine="tiktoken"))


def test_failed_build_keeps_the_previous_output_and_leaves_no_temp(corpus, tmp_path):
    out = tmp_path / "tokens" / "v0"
    build_token_streams(corpus, out, tok_cfg(engine="tiktoken"))
    before = file_hashes(out)
    folder = _copy_corpus(corpus, tmp_path / "c")
    (folder / "shard-00004-of-00005.parquet").write_bytes(b"garbage")
    with pytest.raises(TokenStreamError):
        build_token_streams(folder, out, tok_cfg(engine="tiktoken"))
    assert file_hashes(out) == before
    assert [p.name for p in out.parent.iterdir()] == ["v0"]


def test_worker_errors_reach_the_caller(corpus, tmp_path):
    folder = _copy_corpus(corpus, tmp_path / "c")
    (folder / "shard-00003-of-00005.parquet").write_bytes(b"garbage")
    with pytest.raises(TokenStreamError, match="shard-00003-of-00005.parquet: sha256"):
        build_token_streams(folder, tmp_path / "tok", tok_cfg(engine="tiktoken"), workers=2)
    assert not (tmp_path / "tok").exists()


def test_sample_shards_follow_the_split_rule(corpus):
    for row in shard_rows(corpus):
        digest = hashlib.sha256(row["text"].encode()).digest()
        assert row["split"] == ("val" if int.from_bytes(digest[:8], "big") % 1000 < 150 else "train")
    ids = [r["id"].encode() for r in shard_rows(corpus)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == 60
