"""64-bit word and shingle hashes: a vectorized batch form and a scalar reference that agree bit for bit.

Both levels use the same construction, a polynomial modulo 2**64 finished with the MurmurHash3 64-bit
finalizer (fmix64):
- word hash    = fmix64(sum_j byte_j * B**j  xor  n_bytes * L)   over the word's UTF-8 bytes;
- shingle hash = fmix64(sum_j word_j * B**j  xor  n_words * L)   over the word hashes of k words.
A polynomial over a whole batch is one prefix sum, so every word or window of a batch costs a few array
operations, whatever k is (k = 13 for decontamination). The scalar functions are what datasketch is
handed as `hashfunc` in the tests, so "our signature equals datasketch's" is checked against an
independent, one-shingle-at-a-time implementation.
"""

from __future__ import annotations

import numpy as np

from corpus_dagster.dedup.text import WordBatch

MASK64 = (1 << 64) - 1
# Polynomial base B (odd, so it has an inverse modulo 2**64) and the length mixer L.
POLY_BASE = 0x9E3779B97F4A7C15
POLY_BASE_INV = pow(POLY_BASE, -1, 1 << 64)
LEN_MIX = 0xC2B2AE3D27D4EB4F

_U64 = np.uint64


def fmix64_int(x: int) -> int:
    """MurmurHash3 64-bit finalizer on a Python int (scalar reference)."""
    x &= MASK64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK64
    x ^= x >> 33
    return x


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 64-bit finalizer over a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> _U64(33))
    x *= _U64(0xFF51AFD7ED558CCD)
    x ^= x >> _U64(33)
    x *= _U64(0xC4CEB9FE1A85EC53)
    x ^= x >> _U64(33)
    return x


def _poly_int(values: list[int]) -> int:
    acc, power = 0, 1
    for v in values:
        acc = (acc + v * power) & MASK64
        power = (power * POLY_BASE) & MASK64
    return acc


def word_hash(word: str) -> int:
    """Scalar reference hash of one normalized word."""
    data = word.encode("utf-8")
    return fmix64_int(_poly_int(list(data)) ^ ((len(data) * LEN_MIX) & MASK64))


def shingle_hash64(shingle: str) -> int:
    """Scalar reference hash of one shingle: its normalized words joined by single spaces."""
    ws = shingle.split(" ")
    return fmix64_int(_poly_int([word_hash(w) for w in ws]) ^ ((len(ws) * LEN_MIX) & MASK64))


def _power_table(base: int, size: int) -> np.ndarray:
    """base**i modulo 2**64 for i in [0, size), by a wrapping cumulative product."""
    steps = np.full(size, base, dtype=np.uint64)
    steps[0] = 1
    return np.cumprod(steps, dtype=np.uint64)


class _Powers:
    """Grow-only cache of POLY_BASE**i and POLY_BASE**-i modulo 2**64 (deterministic, shared per process)."""

    def __init__(self) -> None:
        self.fwd = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.fwd) < n:
            extra = max(n, 2 * len(self.fwd)) - len(self.fwd)
            self.fwd = self._extend(self.fwd, POLY_BASE, extra)
            self.inv = self._extend(self.inv, POLY_BASE_INV, extra)
        return self.fwd[:n], self.inv[:n]

    @staticmethod
    def _extend(table: np.ndarray, base: int, extra: int) -> np.ndarray:
        """Append base**len .. base**(len + extra - 1), continuing from the last power (no recomputation)."""
        tail = _power_table(base, extra + 1)[1:]
        tail *= table[-1]
        return np.concatenate([table, tail])


_POWERS = _Powers()


def _window_polys(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """sum_j values[s + j] * B**j for every window [s, s + length), from one prefix sum (uint64, wrapping)."""
    fwd, inv = _POWERS.get(len(values) + 1)
    prefix = np.zeros(len(values) + 1, dtype=np.uint64)
    terms = values.astype(np.uint64)
    terms *= fwd[: len(values)]
    np.cumsum(terms, out=prefix[1:])
    acc = prefix[starts + lengths] - prefix[starts]
    acc *= inv[starts]
    return acc


def word_hashes(batch: WordBatch) -> np.ndarray:
    """Hash of every word of a batch (uint64, in word order)."""
    if len(batch.starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    lengths = batch.ends - batch.starts
    acc = _window_polys(batch.data, batch.starts, lengths)
    return fmix64(acc ^ (lengths.astype(np.uint64) * _U64(LEN_MIX)))


def shingle_hashes(
    word_hash_values: np.ndarray, doc_offsets: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of all k-word windows of every document, and their per-document offsets.

    Windows never cross a document boundary; a document with fewer than k words has none.
    Returns (hashes uint64 in document order, offsets int64 of length n_docs + 1).
    """
    counts = np.diff(doc_offsets)
    per_doc = np.maximum(counts - (k - 1), 0)
    out_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(per_doc, out=out_offsets[1:])
    total = int(out_offsets[-1])
    if total == 0:
        return np.zeros(0, dtype=np.uint64), out_offsets
    # Index of the first word of every window, vectorized.
    doc_of_window = np.repeat(np.arange(len(counts)), per_doc)
    starts = np.arange(total, dtype=np.int64) - out_offsets[doc_of_window] + doc_offsets[doc_of_window]
    acc = _window_polys(word_hash_values, starts, np.full(total, k, dtype=np.int64))
    return fmix64(acc ^ _U64((k * LEN_MIX) & MASK64)), out_offsets
