"""64-bit word and shingle hashes: a vectorized batch form and a scalar reference that agree bit for bit.

Both levels use the same construction, a polynomial modulo 2**64 finished with the MurmurHash3 64-bit
finalizer (fmix64):
- word hash    = fmix64(sum_j byte_j * B**j  xor  n_bytes * L)   over the word's UTF-8 bytes;
- shingle hash = fmix64(sum_j word_j * B**j  xor  n_words * L)   over the word hashes of k words.
Every word and window of a batch is hashed by one compiled pass (`kernels.py`): a window costs k
multiply-adds (k = 13 for decontamination). The scalar functions are what datasketch is
handed as `hashfunc` in the tests, so "our signature equals datasketch's" is checked against an
independent, one-shingle-at-a-time implementation.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from corpus_dagster.core.arrays import concat_ranges
from corpus_dagster.lib.text import WordBatch, lowercase, texts_array, tokenizer_tables

MASK64 = (1 << 64) - 1
# Polynomial base B and the length mixer L.
POLY_BASE = 0x9E3779B97F4A7C15
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


def word_hashes(batch: WordBatch) -> np.ndarray:
    """Hash of every word of a batch (uint64, in word order)."""
    from corpus_dagster.lib.kernels import (
        word_hashes as kernel,  # numba: imported where hashes are computed
    )

    if len(batch.starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    return kernel(batch.data, batch.starts, batch.ends, POLY_BASE, LEN_MIX)


def text_word_hashes(texts: pa.Array | pa.ChunkedArray | list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every word, doc_offsets) of a batch of texts: what `word_hashes(tokenize_batch(texts))` and
    its `doc_offsets` give, in one compiled pass over the texts as written (no lowercased copy, no word
    ranges). The few documents holding a code point whose lowercase is not one code point of its own
    (İ, Σ) are lowercased by polars first, as `tokenize_batch` lowercases every text, and spliced in."""
    from corpus_dagster.core.jit import string_buffers
    from corpus_dagster.lib.kernels import lowered_word_hashes  # numba: imported where hashes are computed

    strings = texts_array(texts)
    tables = tokenizer_tables()
    hashes, doc_offsets, unlowered = lowered_word_hashes(*string_buffers(strings), *tables, POLY_BASE, LEN_MIX)
    if len(unlowered) == 0:
        return hashes, doc_offsets
    lowered = lowercase(strings.take(pa.array(unlowered)))
    more, more_offsets, again = lowered_word_hashes(*string_buffers(lowered), *tables, POLY_BASE, LEN_MIX)
    if len(again):
        raise RuntimeError(f"{len(again)} lowercased document(s) still need lowercasing")
    counts = np.diff(doc_offsets)
    counts[unlowered] = np.diff(more_offsets)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint64)
    is_lowered = np.ones(len(counts), dtype=bool)
    is_lowered[unlowered] = False
    out[concat_ranges(offsets[:-1][is_lowered], counts[is_lowered])] = hashes
    out[concat_ranges(offsets[unlowered], counts[unlowered])] = more
    return out, offsets


def shingle_hashes(
    word_hash_values: np.ndarray, doc_offsets: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of all k-word windows of every document, and their per-document offsets.

    Windows never cross a document boundary; a document with fewer than k words has none.
    Returns (hashes uint64 in document order, offsets int64 of length n_docs + 1).
    """
    from corpus_dagster.lib.kernels import window_hashes

    counts = np.diff(doc_offsets)
    per_doc = np.maximum(counts - (k - 1), 0)
    out_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(per_doc, out=out_offsets[1:])
    if int(out_offsets[-1]) == 0:
        return np.zeros(0, dtype=np.uint64), out_offsets
    powers = np.array([pow(POLY_BASE, j, 1 << 64) for j in range(k)], dtype=np.uint64)
    return window_hashes(word_hash_values, doc_offsets, out_offsets, powers, (k * LEN_MIX) & MASK64), out_offsets
