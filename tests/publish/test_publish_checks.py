"""Each publish check fails on the damage it exists to catch."""

import json
import shutil

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources
from corpus_dagster.publish import checks as verify


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("checks")
    corpus = CorpusConfig(config_path=str(write_setup(root)))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    materialize_global(corpus, instance)
    return corpus.layout().shards


@pytest.fixture
def copy(published, tmp_path):
    target = tmp_path / "v1"
    shutil.copytree(published, target)
    return target


def first_shard(folder):
    return verify.shard_paths(folder)[0]


def rewrite(path, fn):
    table = pq.read_table(path)
    pq.write_table(fn(table), path, compression="zstd")


def test_clean_output_passes_every_check(published):
    paths = verify.shard_paths(published)
    assert verify.check_schema(paths).passed
    assert verify.check_manifest(published, published / "_MANIFEST.json").passed
    assert verify.check_ids_sorted(paths).passed
    assert verify.check_split(paths, 100).passed
    assert verify.check_hashes(paths).passed


def test_schema_check_catches_wrong_type_and_order(copy):
    rewrite(first_shard(copy), lambda t: t.set_column(6, "n_chars", t["n_chars"].cast(pa.int64())))
    assert any("n_chars is int64" in p for p in verify.check_schema(verify.shard_paths(copy)).problems)
    rewrite(first_shard(copy), lambda t: t.select(["text", "id", *t.column_names[2:]]))
    assert any("columns" in p for p in verify.check_schema(verify.shard_paths(copy)).problems)


def test_manifest_check_catches_changed_bytes_rows_and_schema(copy):
    rewrite(first_shard(copy), lambda t: t.slice(1))
    problems = verify.check_manifest(copy, copy / "_MANIFEST.json").problems
    assert any("sha256" in p for p in problems) and any("rows" in p for p in problems)
    manifest = json.loads((copy / "_MANIFEST.json").read_text())
    del manifest["pii"]
    (copy / "_MANIFEST.json").write_text(json.dumps(manifest))
    assert any("'pii' is a required property" in p for p in verify.check_manifest(copy, copy / "_MANIFEST.json").problems)


def test_manifest_check_catches_extra_file(copy):
    shutil.copy(first_shard(copy), copy / "shard-00009-of-00009.parquet")
    assert any("files on disk" in p for p in verify.check_manifest(copy, copy / "_MANIFEST.json").problems)


def test_ids_check_catches_disorder(copy):
    rewrite(first_shard(copy), lambda t: t.take(pa.array(list(range(t.num_rows))[::-1])))
    assert not verify.check_ids_sorted(verify.shard_paths(copy)).passed


def test_split_check_catches_flipped_split(copy):
    def flip(t):
        flipped = pc.if_else(pc.equal(t["split"], "val"), "train", "val")
        return t.set_column(10, "split", flipped)

    rewrite(first_shard(copy), flip)
    assert not verify.check_split(verify.shard_paths(copy), 100).passed


def test_hash_check_catches_edited_text(copy):
    def edit(t):
        texts = t["text"].to_pylist()
        texts[0] = texts[0] + "!"
        return t.set_column(1, "text", pa.array(texts))

    rewrite(first_shard(copy), edit)
    problems = verify.check_hashes(verify.shard_paths(copy)).problems
    assert any("sha256" in p for p in problems) and any("n_chars" in p for p in problems)


def test_compare_folders(copy, published):
    assert verify.compare_folders(copy, published) == []
    rewrite(first_shard(copy), lambda t: t)
    assert verify.compare_folders(copy, published)


def test_check_batches_stay_inside_a_row_group_and_cover_every_row(copy):
    """pyarrow's batches span row groups, and 8,192 long documents were a whole shard in memory."""
    path = first_shard(copy)
    table = pq.read_table(path)
    pq.write_table(table, path, compression="zstd", row_group_size=3)
    batches = [b for _, b in verify.iter_batches([path], ["id", "text"])]
    assert max(b.num_rows for b in batches) <= 3 and len(batches) == pq.ParquetFile(path).num_row_groups
    assert [i for b in batches for i in b.column(0).to_pylist()] == table["id"].to_pylist()
    assert verify.check_hashes([path]).passed and verify.check_ids_sorted([path]).passed
