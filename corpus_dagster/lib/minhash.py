"""MinHash signatures computed a whole batch at a time, equal value for value to datasketch's MinHash.

datasketch (>= 2.0) permutes each input hash h as a * fmix(h) + b modulo 2**w (a odd, so a bijection),
with (a, b) drawn from numpy's RandomState(seed) and w = 32 ("affine32", its default) or 64
("affine64"). We draw the same (a, b), feed the same shingle hashes (`shingle_input_hash`), and take
the same minimum. The loop is one compiled kernel (numba, `kernels.min_affine`): per shingle, every
permutation's value and running minimum, so the shingle array is read once instead of three times per
permutation as a numpy formulation must (multiply, add, `minimum.reduceat`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from corpus_dagster.lib.shingle_hashing import MASK64, shingle_hash64, shingle_hashes, text_word_hashes

SCHEMES = ("affine32", "affine64")
_WIDTH = {"affine32": 32, "affine64": 64}
_DTYPE = {"affine32": np.uint32, "affine64": np.uint64}


def signature_dtype(scheme: str) -> type[np.unsignedinteger]:
    """numpy dtype of one signature value under `scheme`."""
    _check_scheme(scheme)
    return _DTYPE[scheme]


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"dedup.scheme must be one of {SCHEMES}, got {scheme!r}")


def permutations(num_perm: int, seed: int, scheme: str = "affine32") -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) permutation parameters datasketch.MinHash(num_perm, seed, scheme=scheme) draws."""
    _check_scheme(scheme)
    width, dtype = _WIDTH[scheme], _DTYPE[scheme]
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << (width - 1), num_perm, dtype=dtype) * dtype(2) + dtype(1)
    b = gen.randint(0, 1 << width, num_perm, dtype=dtype)
    return a.astype(dtype), b.astype(dtype)


def shingle_input_hash(scheme: str) -> Callable[[str], int]:
    """The scalar shingle hash to give datasketch as `hashfunc` (top 32 bits under affine32)."""
    _check_scheme(scheme)
    if scheme == "affine32":
        return lambda shingle: shingle_hash64(shingle) >> 32
    return lambda shingle: shingle_hash64(shingle) & MASK64


def _fmix32(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(33))
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


def premix(hashes64: np.ndarray, scheme: str) -> np.ndarray:
    """Shingle hashes as datasketch sees them after its input fmix (uint32 or uint64)."""
    if scheme == "affine32":
        return _fmix32((hashes64 >> np.uint64(32)).astype(np.uint32))
    return _fmix64(hashes64.copy())


def signatures_from_hashes(
    hashes64: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, scheme: str
) -> np.ndarray:
    """MinHash of each document's shingle hashes; rows of documents without shingles hold the max value.

    hashes64: uint64 shingle hashes in document order; offsets: int64, length n_docs + 1.
    Returns an (n_docs, num_perm) array of the scheme's dtype.
    """
    from corpus_dagster.lib.kernels import min_affine  # numba: imported where hashes are computed

    dtype = _DTYPE[scheme]
    out = np.full((len(offsets) - 1, len(a)), np.iinfo(dtype).max, dtype=dtype)
    if len(hashes64):
        min_affine(premix(hashes64, scheme), np.ascontiguousarray(offsets, dtype=np.int64),
                   a.astype(dtype), b.astype(dtype), out)
    return out


def batch_signatures(
    texts: pa.Array | list[str | None], shingle_size: int, a: np.ndarray, b: np.ndarray, scheme: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Signatures of a batch of texts: (signatures (n_docs, num_perm), n_words, n_shingles)."""
    wh, doc_offsets = text_word_hashes(texts)
    hashes, offsets = shingle_hashes(wh, doc_offsets, shingle_size)
    sig = signatures_from_hashes(hashes, offsets, a, b, scheme)
    return sig, np.diff(doc_offsets), np.diff(offsets)
