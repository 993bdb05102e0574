"""The hot loops of MinHash and n-gram hashing as compiled kernels (numba), each one pass over its input.

- word bounds: maximal runs of alphanumeric characters per document, decoding UTF-8 on the way;
- word hashes: the polynomial of a word's bytes, finished with fmix64, straight from the byte ranges;
- lowered word hashes: the same hashes straight from the texts as written, lowercasing each code point by
  a table on the way (no lowercased copy of the text, no word ranges);
- shingle hashes: the polynomial of k consecutive word hashes per window, finished the same way;
- MinHash minima: per shingle, every permutation's (a * x + b) mod 2**w and its running minimum;
- set intersections: the shared values of two sorted unique arrays, by one merge walk per pair.

numpy formulations of the same arithmetic need a prefix sum over every byte (8 bytes of uint64 per text
byte, several passes) and three passes over the shingles per permutation; these read each input once.
numba compiles on first use and caches the machine code beside this file (or in its user cache when
this folder is read-only), so a process pays the compile once per installation, not per run; with no
writable place at all, each process compiles once (about 2 s).
Unsigned integer arithmetic wraps modulo 2**64 here as in numpy and Python's `& MASK64`, so every value
equals the scalar references in `hashing.py` and datasketch's (the tests compare them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from corpus_dagster.core.jit import compiled as _compiled
from corpus_dagster.core.jit import decode_utf8

_U64 = np.uint64
_FMIX_1 = _U64(0xFF51AFD7ED558CCD)
_FMIX_2 = _U64(0xC4CEB9FE1A85EC53)
_SHIFT = _U64(33)


@njit(inline="always")
def _fmix64(x):  # noqa: ANN001, ANN202 - numba infers the types
    x ^= x >> _SHIFT
    x *= _FMIX_1
    x ^= x >> _SHIFT
    x *= _FMIX_2
    x ^= x >> _SHIFT
    return x


@_compiled
def _word_bounds(data, offsets, ascii_alnum, cp_alnum, starts, ends, doc_words):  # noqa: ANN001
    n = 0
    for d in range(offsets.shape[0] - 1):
        doc_words[d] = n
        i, stop = offsets[d], offsets[d + 1]
        in_word = False
        while i < stop:
            lead = np.int64(data[i])
            if lead < 0x80:
                size = 1
                alnum = ascii_alnum[lead]
            else:
                cp, size = decode_utf8(data, i)
                alnum = cp_alnum[cp]
            if alnum and not in_word:
                starts[n] = i
                in_word = True
            elif not alnum and in_word:
                ends[n] = i
                n += 1
                in_word = False
            i += size
        if in_word:
            ends[n] = stop
            n += 1
    doc_words[offsets.shape[0] - 1] = n
    return n


@_compiled
def _word_hashes(data, starts, ends, base, len_mix, out):  # noqa: ANN001
    for w in range(starts.shape[0]):
        acc = _U64(0)
        power = _U64(1)
        for j in range(starts[w], ends[w]):
            acc += _U64(data[j]) * power
            power *= base
        out[w] = _fmix64(acc ^ (_U64(ends[w] - starts[w]) * len_mix))


@njit(inline="always")
def _feed(acc, power, byte, base):  # noqa: ANN001, ANN202
    return acc + _U64(byte) * power, power * base


@_compiled
def _lowered_word_hashes(data, offsets, ascii_lower, ascii_alnum, cp_lower, cp_alnum, base, len_mix, out,
                         doc_words, unlowered):  # noqa: ANN001
    n = 0
    n_unlowered = 0
    for d in range(offsets.shape[0] - 1):
        doc_words[d] = n
        i, stop = offsets[d], offsets[d + 1]
        in_word = False
        acc = _U64(0)
        power = _U64(1)
        length = 0
        while i < stop:
            lead = data[i]
            if lead < 0x80:
                c = ascii_lower[lead]
                i += 1
                if ascii_alnum[c]:
                    if not in_word:
                        acc, power, length, in_word = _U64(0), _U64(1), 0, True
                    acc, power = _feed(acc, power, c, base)
                    length += 1
                elif in_word:
                    out[n] = _fmix64(acc ^ (_U64(length) * len_mix))
                    n += 1
                    in_word = False
                continue
            cp, size = decode_utf8(data, i)
            i += size
            lc = cp_lower[cp]
            if lc < 0:  # a lowercase that is not one code point, or depends on its neighbours: the
                unlowered[n_unlowered] = d  # caller lowercases this document; it gets no words here
                n_unlowered += 1
                n = doc_words[d]
                in_word = False
                break
            if cp_alnum[lc]:
                if not in_word:
                    acc, power, length, in_word = _U64(0), _U64(1), 0, True
                if lc < 0x80:  # the UTF-8 bytes of the lowercase code point
                    acc, power = _feed(acc, power, lc, base)
                    length += 1
                elif lc < 0x800:
                    acc, power = _feed(acc, power, 0xC0 | (lc >> 6), base)
                    acc, power = _feed(acc, power, 0x80 | (lc & 0x3F), base)
                    length += 2
                elif lc < 0x10000:
                    acc, power = _feed(acc, power, 0xE0 | (lc >> 12), base)
                    acc, power = _feed(acc, power, 0x80 | ((lc >> 6) & 0x3F), base)
                    acc, power = _feed(acc, power, 0x80 | (lc & 0x3F), base)
                    length += 3
                else:
                    acc, power = _feed(acc, power, 0xF0 | (lc >> 18), base)
                    acc, power = _feed(acc, power, 0x80 | ((lc >> 12) & 0x3F), base)
                    acc, power = _feed(acc, power, 0x80 | ((lc >> 6) & 0x3F), base)
                    acc, power = _feed(acc, power, 0x80 | (lc & 0x3F), base)
                    length += 4
            elif in_word:
                out[n] = _fmix64(acc ^ (_U64(length) * len_mix))
                n += 1
                in_word = False
        if in_word:
            out[n] = _fmix64(acc ^ (_U64(length) * len_mix))
            n += 1
    doc_words[offsets.shape[0] - 1] = n
    return n, n_unlowered


@_compiled
def _window_hashes(values, doc_offsets, out_offsets, powers, finish, out):  # noqa: ANN001
    k = powers.shape[0]
    for d in range(doc_offsets.shape[0] - 1):
        first = doc_offsets[d]
        for i in range(out_offsets[d + 1] - out_offsets[d]):
            acc = _U64(0)
            for j in range(k):
                acc += values[first + i + j] * powers[j]
            out[out_offsets[d] + i] = _fmix64(acc ^ finish)


@_compiled
def _min_affine(x, offsets, a, b, width, out):  # noqa: ANN001
    n_perm = a.shape[0]
    for d in range(offsets.shape[0] - 1):
        row = out[d]
        for i in range(offsets[d], offsets[d + 1]):
            v = x[i]
            for p in range(n_perm):
                # numba widens uint32 products to 64 bits; `width` (np.uint32 or np.uint64, a constant of each
                # compiled version) keeps the value modulo 2**w, and under uint32 lets LLVM compute in 32-bit
                # vector lanes (twice as many per instruction as 64-bit)
                row[p] = min(row[p], width(a[p] * v + b[p]))


@_compiled
def _intersections(values, off_a, len_a, off_b, len_b, out):  # noqa: ANN001
    for i in range(off_a.shape[0]):
        p, p_end = off_a[i], off_a[i] + len_a[i]
        q, q_end = off_b[i], off_b[i] + len_b[i]
        shared = 0
        while p < p_end and q < q_end:
            x, y = values[p], values[q]
            if x == y:
                shared += 1
                p += 1
                q += 1
            elif x < y:
                p += 1
            else:
                q += 1
        out[i] = shared


@_compiled
def _sorted_unique_segments(values, offsets, lengths):  # noqa: ANN001
    written = 0  # never ahead of the read position: each value is read before its slot can be written
    for d in range(offsets.shape[0] - 1):
        segment = values[offsets[d]:offsets[d + 1]]
        segment.sort()
        start = written
        if segment.shape[0]:
            prev = segment[0]
            values[written] = prev
            written += 1
            for i in range(1, segment.shape[0]):
                v = segment[i]
                if v != prev:
                    values[written] = v
                    written += 1
                    prev = v
        lengths[d] = written - start
    return written


def sorted_unique_segments(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each segment values[offsets[d]:offsets[d + 1]] sorted ascending without repeats: (the segments'
    values back to back, each segment's length). Sorts segment by segment, in cache, about twice as fast
    as one sort of the whole array with the segment number packed above each value. `values` is reused."""
    lengths = np.empty(max(len(offsets) - 1, 0), dtype=np.int64)
    n = _sorted_unique_segments(values, offsets.astype(np.int64, copy=False), lengths)
    return values[:n].copy(), lengths


def intersections(values: np.ndarray, off_a: np.ndarray, len_a: np.ndarray, off_b: np.ndarray,
                  len_b: np.ndarray) -> np.ndarray:
    """|A_i ∩ B_i| for A_i = values[off_a[i]:off_a[i] + len_a[i]] and B_i likewise: each range sorted
    ascending and without repeats (int64 counts)."""
    out = np.empty(len(off_a), dtype=np.int64)
    i64 = np.int64
    _intersections(values, off_a.astype(i64, copy=False), len_a.astype(i64, copy=False),
                   off_b.astype(i64, copy=False), len_b.astype(i64, copy=False), out)
    return out


def word_bounds(data: np.ndarray, offsets: np.ndarray, ascii_alnum: np.ndarray,
                cp_alnum: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, doc_offsets) of the words of UTF-8 `data`: maximal runs of characters that
    ascii_alnum (by byte, < 0x80) or cp_alnum (by code point) call alphanumeric, never crossing a
    document boundary (`offsets`: byte offsets, length n_docs + 1). cp_alnum may be empty when every
    byte is ASCII."""
    # a document of L bytes holds at most L // 2 + 1 words (separated by at least one byte)
    most = len(data) // 2 + len(offsets)
    starts = np.empty(most, dtype=np.int64)
    ends = np.empty(most, dtype=np.int64)
    doc_words = np.empty(len(offsets), dtype=np.int64)
    n = _word_bounds(data, offsets.astype(np.int64, copy=False), ascii_alnum, cp_alnum, starts, ends, doc_words)
    return starts[:n].copy(), ends[:n].copy(), doc_words


def word_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, base: int, len_mix: int) -> np.ndarray:
    """fmix64(sum_j data[s + j] * base**j  xor  (e - s) * len_mix) for every byte range [s, e) (uint64)."""
    out = np.empty(len(starts), dtype=np.uint64)
    _word_hashes(data, starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False),
                 _U64(base), _U64(len_mix), out)
    return out


def lowered_word_hashes(data: np.ndarray, offsets: np.ndarray, ascii_lower: np.ndarray, ascii_alnum: np.ndarray,
                        cp_lower: np.ndarray, cp_alnum: np.ndarray, base: int,
                        len_mix: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(word hashes, doc_offsets, unlowered) of UTF-8 `data` as `word_hashes` gives them for the lowercased
    text: words are runs of code points whose lowercase (`ascii_lower` below 0x80, `cp_lower` above) is
    alphanumeric, hashed over the lowercase's UTF-8 bytes. A document holding a code point whose
    `cp_lower` is negative (no one-code-point lowercase) gets no words; `unlowered` lists those documents.
    """
    offsets = offsets.astype(np.int64, copy=False)
    # as in word_bounds: words are separated by at least one byte (counted over the batch's own bytes: the
    # buffer of a sliced array holds its neighbours' too)
    most = int(offsets[-1] - offsets[0]) // 2 + len(offsets) if len(offsets) else 0
    out = np.empty(most, dtype=np.uint64)
    doc_words = np.empty(len(offsets), dtype=np.int64)
    unlowered = np.empty(max(len(offsets) - 1, 0), dtype=np.int64)
    n, n_unlowered = _lowered_word_hashes(data, offsets, ascii_lower, ascii_alnum,
                                          cp_lower, cp_alnum, _U64(base), _U64(len_mix), out, doc_words, unlowered)
    return out[:n], doc_words, unlowered[:n_unlowered]


def window_hashes(values: np.ndarray, doc_offsets: np.ndarray, out_offsets: np.ndarray, powers: np.ndarray,
                  finish: int) -> np.ndarray:
    """fmix64(sum_j values[s + j] * powers[j]  xor  finish) for every window of len(powers) values that
    starts at s inside one document (windows of document d are out[out_offsets[d]:out_offsets[d + 1]])."""
    out = np.empty(int(out_offsets[-1]), dtype=np.uint64)
    _window_hashes(values.astype(np.uint64, copy=False), doc_offsets.astype(np.int64, copy=False),
                   out_offsets.astype(np.int64, copy=False), powers.astype(np.uint64, copy=False), _U64(finish), out)
    return out


def min_affine(x: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out[d, p] = min(out[d, p], min over i in [offsets[d], offsets[d+1]) of (a[p] * x[i] + b[p]) mod 2**w).

    x, a, b and out share one unsigned dtype (uint32: w = 32, uint64: w = 64); out is (n_docs, n_perm),
    C-contiguous, and is updated in place (fill it with the dtype's max first).
    """
    if not (x.dtype == a.dtype == b.dtype == out.dtype) or out.dtype not in (np.uint32, np.uint64):
        raise TypeError(f"min_affine: x, a, b and out must share uint32 or uint64, got "
                        f"{x.dtype}, {a.dtype}, {b.dtype}, {out.dtype}")
    if out.shape != (len(offsets) - 1, len(a)) or not out.flags.c_contiguous:
        raise ValueError(f"min_affine: out must be C-contiguous ({len(offsets) - 1}, {len(a)}), got {out.shape}")
    _min_affine(x, offsets.astype(np.int64, copy=False), a, b, out.dtype.type, out)
