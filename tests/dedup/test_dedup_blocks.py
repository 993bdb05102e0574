"""The near-duplicate graph in blocks per pair of sources: a source added, changed or damaged recomputes
only its blocks, and the tables are the bytes of a build from scratch."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dedup_factory import mutate, plant_clean, random_doc

from corpus_dagster.core import records
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.dedup.blocks import (
    BLOCKS,
    Block,
    BlockPairs,
    SourceRows,
    merge_graph,
    plan_blocks,
    reused_parts,
    write_blocks,
)
from corpus_dagster.dedup.driver import DedupResult, run_global_dedup
from corpus_dagster.dedup.exact import exact_duplicates
from corpus_dagster.dedup.key import DEDUP, TABLES
from corpus_dagster.dedup.near import store_jaccard
from corpus_dagster.lib.jaccard import ShingleStore
from corpus_dagster.lib.lsh import band_pairs, unpack_pairs
from corpus_dagster.lib.near_graph import GraphSpec


def block_corpus(seed: int = 11) -> dict[str, list[str]]:
    """Four sources with near-copy families across them, exact copies across them (one text in every
    source) and unrelated documents. `aardvark` sorts first: a text it shares holds its smallest id there."""
    rng = random.Random(seed)
    names = ["aardvark", "alpha", "beta", "gamma"]
    corpus: dict[str, list[str]] = {n: [] for n in names}
    everywhere = random_doc(rng, 70)
    for name in names:
        corpus[name].append(everywhere)
    for f in range(24):
        base = random_doc(rng, rng.randint(50, 100))
        corpus[names[f % 4]].append(base)
        corpus[names[(f + 1) % 4]].append(mutate(rng, base, rng.randint(1, 3)))
        corpus[names[(f + 2) % 4]].append(mutate(rng, base, rng.randint(2, 5)))
        if f % 3 == 0:
            corpus[names[(f + 3) % 4]].append(base)  # an exact copy in a fourth source
        if f % 4 == 0:
            corpus[names[f % 4]].append(mutate(rng, base, 1))  # a near copy within the source
    for _ in range(40):
        corpus[names[rng.randrange(4)]].append(random_doc(rng, rng.randint(30, 90)))
    return corpus


def root_with(path: Path, corpus: dict[str, list[str]]) -> tuple[Layout, Settings]:
    resolved = load_settings(overrides={"paths": {"artifacts": str(path / "artifacts")}, "workers": 1})
    layout = Layout.from_config(resolved.resolved)
    for sid, texts in corpus.items():
        plant_clean(layout, sid, texts)
    return layout, resolved


def table_hashes(layout: Layout) -> dict[str, str]:
    folder = layout.stage(DEDUP)
    key = records.read_record(folder).key
    return {t: hashlib.sha256((folder / key / t).read_bytes()).hexdigest() for t in TABLES}


def block_files(layout: Layout) -> list[Path]:
    return sorted((layout.stage(DEDUP) / BLOCKS).glob("*.parquet"))


def scratch(tmp_path: Path, corpus: dict[str, list[str]]) -> tuple[Layout, DedupResult]:
    layout, resolved = root_with(tmp_path / "scratch", corpus)
    stats = run_global_dedup(layout, resolved, sorted(corpus))
    return layout, stats


def pairs_involving(layout: Layout, source_id: str) -> int:
    """Pairs of a build's blocks with a document of `source_id` (ids are `<source>:<k>`)."""
    total = 0
    for path in block_files(layout):
        table = pq.read_table(path)
        for a, b in zip(table.column("id_a").to_pylist(), table.column("id_b").to_pylist(), strict=True):
            total += a.startswith(f"{source_id}:") or b.startswith(f"{source_id}:")
    return total


def test_adding_a_source_reuses_every_block_between_the_others(tmp_path: Path) -> None:
    corpus = block_corpus()
    ref, ref_stats = scratch(tmp_path, corpus)
    assert ref_stats.blocks == {"computed": 10, "reused": 0}
    assert ref_stats.near_dropped > 0 and ref_stats.exact_dropped > 0

    layout, resolved = root_with(tmp_path / "inc", {k: v for k, v in corpus.items() if k != "aardvark"})
    first = run_global_dedup(layout, resolved, ["alpha", "beta", "gamma"])
    assert first.blocks == {"computed": 6, "reused": 0}
    plant_clean(layout, "aardvark", corpus["aardvark"])
    stats = run_global_dedup(layout, resolved, sorted(corpus))

    assert table_hashes(layout) == table_hashes(ref)
    assert stats.blocks == {"computed": 4, "reused": 6}
    involving = pairs_involving(ref, "aardvark")
    assert involving > 0 and stats.stats["block_pairs"] == involving
    assert stats.stats["generated_pairs"] < ref_stats.stats["generated_pairs"]
    assert stats.stats["scored_this_build"] <= involving < ref_stats.stats["scored_pairs"]
    for key in ("candidate_pairs", "scored_pairs", "near_dropped", "exact_dropped", "pairs_rows"):
        assert stats.stats[key] == ref_stats.stats[key], key
    assert sorted(p.name for p in block_files(layout)) == sorted(p.name for p in block_files(ref))


def test_a_changed_source_recomputes_only_its_blocks_and_old_blocks_are_removed(tmp_path: Path) -> None:
    corpus = block_corpus()
    layout, resolved = root_with(tmp_path / "inc", corpus)
    run_global_dedup(layout, resolved, sorted(corpus))
    before = {p.name for p in block_files(layout)}
    changed = dict(corpus, beta=[mutate(random.Random(3), t, 2) for t in corpus["beta"][:-5]])
    plant_clean(layout, "beta", changed["beta"])
    stats = run_global_dedup(layout, resolved, sorted(changed))

    ref, _ = scratch(tmp_path, changed)
    assert table_hashes(layout) == table_hashes(ref)
    assert stats.blocks == {"computed": 4, "reused": 6}
    after = {p.name for p in block_files(layout)}
    assert len(after) == 10 and len(before & after) == 6  # beta's four old blocks are gone


def test_removing_a_source_generates_no_pair(tmp_path: Path) -> None:
    corpus = block_corpus()
    layout, resolved = root_with(tmp_path / "inc", corpus)
    run_global_dedup(layout, resolved, sorted(corpus))
    stats = run_global_dedup(layout, resolved, ["alpha", "beta", "gamma"])
    ref, _ = scratch(tmp_path, {k: v for k, v in corpus.items() if k != "aardvark"})
    assert table_hashes(layout) == table_hashes(ref)
    assert stats.blocks == {"computed": 0, "reused": 6}
    assert stats.stats["generated_pairs"] == stats.stats["scored_this_build"] == stats.stats["shingled_docs"] == 0


def test_sources_without_documents_last_in_order_have_blocks_too(tmp_path: Path) -> None:
    """Every document of the last sources rejected: they hold no gid, yet their blocks are planned."""
    corpus = dict(block_corpus(), yak=[], zebu=[])
    layout, resolved = root_with(tmp_path / "inc", corpus)
    stats = run_global_dedup(layout, resolved, sorted(corpus))
    assert stats.blocks == {"computed": 21, "reused": 0}
    ref, _ = scratch(tmp_path, {k: v for k, v in corpus.items() if v})
    assert table_hashes(layout) == table_hashes(ref)
    plant_clean(layout, "zebu", corpus["alpha"][:3])  # the empty source gets documents: its blocks only
    assert run_global_dedup(layout, resolved, sorted(corpus)).blocks == {"computed": 6, "reused": 15}


def test_a_damaged_block_is_computed_again(tmp_path: Path) -> None:
    corpus = block_corpus()
    layout, resolved = root_with(tmp_path / "inc", {k: v for k, v in corpus.items() if k != "aardvark"})
    run_global_dedup(layout, resolved, ["alpha", "beta", "gamma"])
    damaged = max(block_files(layout), key=lambda p: p.stat().st_size)
    damaged.write_bytes(damaged.read_bytes()[:-9] + b"corrupted")
    plant_clean(layout, "aardvark", corpus["aardvark"])
    stats = run_global_dedup(layout, resolved, sorted(corpus))
    ref, _ = scratch(tmp_path, corpus)
    assert table_hashes(layout) == table_hashes(ref)
    assert stats.blocks == {"computed": 5, "reused": 5}


def test_band_pairs_of_dirty_documents_are_the_pairs_that_involve_one() -> None:
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 12, size=300).astype(np.uint64)
    gids = rng.permutation(1000)[:300].astype(np.int64)
    dirty = rng.random(300) < 0.2
    every = unpack_pairs(band_pairs(keys, gids)[0])
    is_dirty = set(gids[dirty].tolist())
    want = [p for p in every.tolist() if p[0] in is_dirty or p[1] in is_dirty]
    got = unpack_pairs(band_pairs(keys, gids, dirty)[0]).tolist()
    assert got == want and 0 < len(got) < len(every)
    assert band_pairs(keys, gids, np.zeros(300, bool))[0].size == 0
    assert np.array_equal(band_pairs(keys, gids, np.ones(300, bool))[0], band_pairs(keys, gids)[0])


def test_exact_duplicates_within_groups_compare_only_documents_of_one_group() -> None:
    digests = np.zeros((5, 32), np.uint8)
    digests[[0, 1, 2, 3], 0] = 7  # gids 0-3 share a text, gid 4 does not
    source = np.array([1, 0, 1, 0, 0])
    dropped, kept_as = exact_duplicates(digests, np.arange(5), within=source)
    assert dropped.tolist() == [2, 3] and kept_as.tolist() == [0, 1]
    assert exact_duplicates(digests, np.arange(5))[0].tolist() == [1, 2, 3]


def test_blocks_that_disagree_about_a_pair_are_refused() -> None:
    key = np.array([(1 << 32) | 2], np.uint64)
    one = (key, np.array([True]), np.array([5]), np.array([9]))
    assert merge_graph([one, one]).pairs.tolist() == [[1, 2]]
    with pytest.raises(DedupInputError, match="disagree"):
        merge_graph([one, (key, np.array([True]), np.array([6]), np.array([9]))])


def _store(path: Path, sets: list[list[int]]) -> ShingleStore:
    store = ShingleStore(path, len(sets))
    store.append(np.arange(len(sets)), np.concatenate([np.array(s, np.uint64) for s in sets]),
                 np.array([len(s) for s in sets]))
    store.close()
    return store


def test_chain_jaccard_reads_the_store_and_builds_one_for_documents_it_lacks(tmp_path: Path) -> None:
    sets = {10: [1, 2, 3, 4], 20: [1, 2, 3, 5], 30: [1, 2, 6, 7]}  # gid -> sorted shingle fingerprints
    store = _store(tmp_path / "store.u64", [sets[10], sets[20]])
    built: list[list[int]] = []

    def build(gids: np.ndarray) -> ShingleStore:  # as the finish does: the texts of those gids, shingled
        built.append(gids.tolist())
        return _store(tmp_path / "extra.u64", [sets[g] for g in gids.tolist()])

    jaccard = store_jaccard(store, np.array([10, 20]), 1 << 10, build)
    assert jaccard(np.array([10]), np.array([20])).tolist() == [3 / 5] and built == []
    assert jaccard(np.array([10, 20]), np.array([30, 30])).tolist() == [2 / 6, 2 / 6]
    assert built == [[10, 20, 30]]  # the documents a reused block's pairs brought in
    assert store_jaccard(None, np.zeros(0, np.int64), 1 << 10, build)(np.array([10]), np.array([30])).tolist() == [2 / 6]


def test_a_block_written_then_read_back_names_the_same_pairs_when_ids_sort_against_sources(tmp_path: Path) -> None:
    # Source 0 holds gids 3, 4 (its ids sort after source 1's), source 1 holds gids 0, 1, 2.
    where = SourceRows(np.array([3, 4, 0, 1, 2]), np.array([0, 2, 5]))
    source_of_gid = np.array([1, 1, 1, 0, 0])
    ids = pa.array([f"doc-{g}" for g in range(5)])
    node_of_gid = np.arange(5)
    computed = BlockPairs(np.array([[0, 3], [1, 2], [3, 4], [2, 4]]), np.array([True, True, False, True]),
                          np.array([5, 7, 0, 2]), np.array([9, 8, 0, 6]))
    blocks = plan_blocks([("s0", "c0"), ("s1", "c1")], GraphSpec(0.7, 32, 4, 128, 5), [])
    write_blocks(tmp_path, blocks, computed, ids, source_of_gid, where)
    first = merge_graph([computed.as_graph_part(node_of_gid)])
    reused = [Block(b.a, b.b, b.key, True) for b in blocks]
    again = merge_graph(reused_parts(tmp_path, reused, where, node_of_gid))
    assert np.array_equal(first.candidates, again.candidates) and np.array_equal(first.pairs, again.pairs)
    assert again.pairs.tolist() == [[0, 3], [1, 2], [2, 4]] and again.intersection.tolist() == [5, 7, 2]
    cross = pq.read_table(tmp_path / blocks[1].name)  # block (s0, s1): s0's document in column a
    assert cross.column("id_a").to_pylist() == ["doc-3", "doc-4"] and cross.column("row_a").to_pylist() == [0, 1]
    assert cross.column("id_b").to_pylist() == ["doc-0", "doc-2"] and cross.column("row_b").to_pylist() == [0, 2]
