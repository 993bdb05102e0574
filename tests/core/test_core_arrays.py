"""unique_sorted must equal np.unique on every integer input the pipeline hands it."""

import numpy as np
import pytest

from corpus_dagster.core.arrays import unique_sorted


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.int32, np.uint32, np.uint8])
def test_unique_sorted_equals_np_unique(dtype):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    for size, distinct in [(0, 1), (1, 1), (2, 1), (2, 2), (1000, 10), (100_000, 90_000)]:
        pool = rng.integers(info.min, info.max, distinct, dtype=dtype, endpoint=True)
        values = pool[rng.integers(0, distinct, size)] if size else np.zeros(0, dtype)
        got = unique_sorted(values)
        want = np.unique(values)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_unique_sorted_flattens_and_keeps_the_input():
    pairs = np.array([[3, 1], [1, 2], [3, 3]], dtype=np.int64)
    before = pairs.copy()
    np.testing.assert_array_equal(unique_sorted(pairs), [1, 2, 3])
    np.testing.assert_array_equal(pairs, before)  # sorted a copy, not the caller's array


def test_unique_sorted_extremes_stay_distinct():
    values = np.array([2**64 - 1, 0, 2**63, 2**64 - 1, 0], dtype=np.uint64)
    np.testing.assert_array_equal(unique_sorted(values), np.array([0, 2**63, 2**64 - 1], dtype=np.uint64))


def _packed_sort_oracle(values, offsets):
    """The old shingle-set code: the segment number packed above each value, one global sort, dedupe."""
    doc = np.repeat(np.arange(len(offsets) - 1, dtype=np.uint64), np.diff(offsets))
    key = np.sort((doc << np.uint64(44)) | values)
    keep = np.ones(len(key), dtype=bool)
    keep[1:] = key[1:] != key[:-1]
    key = key[keep]
    lengths = np.bincount((key >> np.uint64(44)).astype(np.int64), minlength=len(offsets) - 1)
    return key & np.uint64((1 << 44) - 1), lengths


def test_sorted_unique_segments_equals_the_packed_global_sort():
    from corpus_dagster.lib.kernels import sorted_unique_segments

    rng = np.random.default_rng(11)
    for n_docs, most in [(1, 0), (1, 5), (3, 0), (50, 40), (400, 3000)]:
        lens = rng.integers(0, most + 1, n_docs)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        pool = rng.integers(0, 1 << 44, max(int(lens.sum()) // 3, 1), dtype=np.uint64)  # many repeats
        values = pool[rng.integers(0, len(pool), int(lens.sum()))]
        want_values, want_lengths = _packed_sort_oracle(values, offsets)
        got_values, got_lengths = sorted_unique_segments(values.copy(), offsets)
        np.testing.assert_array_equal(got_lengths, want_lengths)
        np.testing.assert_array_equal(got_values, want_values)
        assert got_values.dtype == np.uint64 and got_lengths.dtype == np.int64


def test_sorted_unique_segments_no_segments():
    from corpus_dagster.lib.kernels import sorted_unique_segments

    values, lengths = sorted_unique_segments(np.zeros(0, np.uint64), np.zeros(1, np.int64))
    assert values.size == 0 and lengths.size == 0
