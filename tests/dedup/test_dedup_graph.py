"""LSH candidate pairs (every pair of a bucket), banding choice, exact-Jaccard verification store, connected
components."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from dedup_factory import random_doc, shingle_set

from corpus_dagster.core.arrays import concat_ranges
from corpus_dagster.core.settings import NearDupSettings
from corpus_dagster.dedup.components import cluster_keepers
from corpus_dagster.lib.jaccard import ShingleStore, shingle_sets
from corpus_dagster.lib.lsh import (
    band_hashes,
    band_pairs,
    candidate_pairs,
    candidate_probability,
    choose_banding,
    unpack_pairs,
)
from corpus_dagster.lib.near_graph import agreeing, agreement_floor, graph_spec
from corpus_dagster.lib.shingle_hashing import shingle_hash64


def test_a_bucket_yields_every_pair_of_its_members_in_any_row_order() -> None:
    n = 300
    keys = np.full((n, 4), 7, dtype=np.uint64)  # every band: one bucket holding everybody
    gids = np.arange(100, 100 + n, dtype=np.int64)[::-1].copy()  # order of rows must not matter
    pairs = candidate_pairs(keys, gids)
    assert len(pairs) == n * (n - 1) // 2
    assert pairs.tolist() == [[a, b] for a in range(100, 100 + n) for b in range(a + 1, 100 + n)]


def test_candidate_pairs_are_the_union_of_each_bands_pairs() -> None:
    keys = np.array([[1, 5], [1, 6], [2, 6], [1, 7], [3, 6]], dtype=np.uint64)
    pairs = candidate_pairs(keys, np.array([10, 11, 12, 13, 14]))
    # band 0: {10, 11, 13}; band 1: {11, 12, 14}: every pair of each, 12-14 too (neither is the smallest)
    assert pairs.tolist() == [[10, 11], [10, 13], [11, 12], [11, 13], [11, 14], [12, 14]]
    packed, largest = band_pairs(keys[:, 1], np.array([10, 11, 12, 13, 14]))
    assert unpack_pairs(packed).tolist() == [[11, 12], [11, 14], [12, 14]] and largest == 3
    assert candidate_pairs(np.zeros((0, 2), np.uint64), np.zeros(0, np.int64)).shape == (0, 2)


@pytest.mark.parametrize(("threshold", "probability", "expected"),
                         [(0.7, 0.98, (25, 5)), (0.7, 0.995, (32, 4)), (0.8, 0.98, (18, 7)), (0.8, 0.995, (21, 6)),
                          (0.9, 0.98, (11, 11))])
def test_banding_is_the_most_rows_that_reach_the_probability_at_the_threshold(threshold, probability, expected) -> None:
    bands, rows = choose_banding(128, threshold, probability)
    assert (bands, rows) == expected and bands * rows <= 128
    assert candidate_probability(threshold, bands, rows) >= probability
    assert candidate_probability(threshold, 128 // (rows + 1), rows + 1) < probability  # one more row misses it


def test_the_graph_serves_the_lowest_threshold_and_fixed_banding_wins() -> None:
    spec = graph_spec(NearDupSettings(threshold=0.7), 0.8)
    assert (spec.threshold, spec.bands, spec.rows) == (0.7, 32, 4)
    assert graph_spec(NearDupSettings(threshold=0.9), 0.8).threshold == 0.8  # dedup's lower threshold wins
    fixed = graph_spec(NearDupSettings(bands=16, rows=8), 0.8)
    assert (fixed.bands, fixed.rows, fixed.width) == (16, 8, 128)


def test_band_hashes_depend_on_every_row_of_their_band_only() -> None:
    sig = np.arange(32, dtype=np.uint32).reshape(2, 16)
    sig[1] = sig[0]
    sig[1, 5] = 999  # band 1 of 4 (rows 4..7)
    h = band_hashes(sig, 4)
    assert h.shape == (2, 4)
    assert (h[0] == h[1]).tolist() == [True, False, True, True]
    with pytest.raises(ValueError, match="multiple of bands"):
        band_hashes(sig, 5)
    assert (band_hashes(sig[:, :15], 5) == band_hashes(sig[:, :15], 5)).all()  # the first bands x rows values


def test_components_keep_the_smallest_node_and_chain_through_edges() -> None:
    edges = np.array([[3, 5], [5, 8], [1, 2], [6, 7]])
    keepers = cluster_keepers(10, edges)
    assert keepers.tolist() == [0, 1, 1, 3, 4, 3, 6, 6, 3, 9]
    assert cluster_keepers(3, np.zeros((0, 2), np.int64)).tolist() == [0, 1, 2]
    assert cluster_keepers(0, np.zeros((0, 2), np.int64)).tolist() == []


def test_components_scale_without_python_loops() -> None:
    n = 200_000
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)[::-1].copy()  # one long chain
    assert (cluster_keepers(n, edges) == 0).all()


def test_shingle_sets_are_sorted_unique_hashes() -> None:
    texts = ["a b c a b c a b c", "x y", "one two three four"]
    values, lengths = shingle_sets(texts, 3)
    assert lengths.tolist() == [3, 0, 2]  # "a b c", "b c a", "c a b"
    first = values[:3].tolist()
    # 44-bit fingerprints: the top bits of each 64-bit shingle hash
    assert first == sorted({shingle_hash64(s) >> 20 for s in ["a b c", "b c a", "c a b"]})
    assert values.max() < 2**44


def test_concat_ranges() -> None:
    assert concat_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]


@pytest.mark.parametrize(("chunk", "threads"), [(1024, 1), (10_000_000, 1), (1024, 3), (10_000_000, 2)])
def test_store_jaccard_equals_python_sets_in_any_chunking(tmp_path: Path, chunk: int, threads: int) -> None:
    rng = random.Random(9)
    base = [random_doc(rng, rng.randint(5, 80)) for _ in range(40)]
    texts = base + [" ".join(w if rng.random() > 0.1 else "zz" for w in t.split()) for t in base]
    values, lengths = shingle_sets(texts, 5)
    store = ShingleStore(tmp_path / "s.u64", len(texts))
    # written in two appends, out of node order
    half = len(texts) // 2
    order = np.r_[np.arange(half, len(texts)), np.arange(half)]
    starts = np.cumsum(lengths) - lengths
    for part in (order[: len(texts) - half], order[len(texts) - half :]):
        store.append(part, values[concat_ranges(starts[part], lengths[part])], lengths[part])
    store.close()
    a = np.array([rng.randrange(len(texts)) for _ in range(300)] + list(range(40)))
    b = np.array([rng.randrange(len(texts)) for _ in range(300)] + list(range(40, 80)))
    got = store.jaccard(a, b, chunk, threads=threads)
    assert got.tobytes() == store.jaccard(a, b, 1024).tobytes()  # threads and chunking change no bit
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        sx, sy = shingle_set(texts[x]), shingle_set(texts[y])
        want = len(sx & sy) / len(sx | sy) if sx | sy else 0.0
        assert got[i] == pytest.approx(want, abs=1e-12)


def test_store_refuses_to_close_with_missing_nodes(tmp_path: Path) -> None:
    store = ShingleStore(tmp_path / "s.u64", 2)
    store.append(np.array([0]), np.array([1, 2], dtype=np.uint64), np.array([2]))
    with pytest.raises(RuntimeError, match="lacks 1 node"):
        store.close()


def test_exact_duplicates_keep_the_smallest_gid_among_the_eligible() -> None:
    from corpus_dagster.dedup.exact import exact_duplicates

    digests = np.zeros((7, 32), dtype=np.uint8)
    digests[:, 0] = [1, 2, 1, 3, 2, 1, 9]
    digests[:, 31] = [0, 0, 0, 0, 0, 0, 1]
    dropped, kept_as = exact_duplicates(digests, np.array([1, 2, 3, 4, 5, 6]))  # gid 0 is not eligible
    assert dropped.tolist() == [4, 5] and kept_as.tolist() == [1, 2]
    none = exact_duplicates(digests, np.zeros(0, dtype=np.int64))
    assert none[0].tolist() == [] and none[1].tolist() == []


def test_peak_rss_is_per_step_after_a_reset() -> None:
    import mmap

    from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss

    if not reset_peak_rss():
        pytest.skip("this kernel does not allow resetting the peak RSS (VmHWM)")
    before = peak_rss_mb()
    block = mmap.mmap(-1, 40_000_000)  # fresh anonymous pages (a heap allocation may reuse resident memory)
    block.write(b"\1" * 40_000_000)  # 40 MB touched
    during = peak_rss_mb()
    assert during >= before + 30
    block.close()
    assert reset_peak_rss() and peak_rss_mb() < during - 30


def test_intersections_of_sorted_ranges() -> None:
    from corpus_dagster.lib.kernels import intersections

    values = np.array([1, 3, 5, 7, 9, 3, 4, 5, 9, 10, 2], dtype=np.uint64)
    # [1 3 5 7 9] & [3 4 5 9 10] = 3; a set with itself; empty ranges; disjoint
    got = intersections(values, np.array([0, 0, 0, 10]), np.array([5, 5, 0, 1]),
                        np.array([5, 0, 5, 0]), np.array([5, 5, 5, 5]))
    assert got.tolist() == [3, 5, 0, 0]


def test_the_agreement_floor_sets_aside_a_pair_at_the_threshold_with_at_most_the_miss_probability() -> None:
    from fractions import Fraction
    from math import comb

    assert agreement_floor(128, 0.7) == 64 and agreement_floor(128, 0.8) == 79 and agreement_floor(4, 0.5) == 0
    assert agreement_floor(128, 0.7, miss=0.0) == 0 and agreement_floor(128, 1.0) == 128
    for n, t, miss in ((128, 0.7, 1e-6), (64, 0.5, 1e-3), (256, 0.9, 1e-9)):
        k = agreement_floor(n, t, miss)
        p = Fraction(t)
        below = [sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(j)) for j in (k, k + 1)]
        assert below[0] <= miss < below[1], (n, t, k)  # the largest floor within the miss probability

def test_agreeing_keeps_a_pair_with_at_least_the_floor_of_equal_values() -> None:
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 1 << 32, size=(4, 128), dtype=np.uint64).astype(np.uint32)
    sigs[1, :64] = sigs[0, :64]  # 64 values agree: kept; 63: set aside
    sigs[2, :63] = sigs[0, :63]
    keep = agreeing(np.array([[10, 11], [10, 12], [11, 13]]), sigs, np.array([-1] * 10 + [0, 1, 2, 3]), 64, chunk=2)
    assert keep.tolist() == [True, False, False]
