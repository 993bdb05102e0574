"""Normalization, word/shingle hashes and MinHash signatures: vectorized forms equal the references,
and the signatures equal datasketch's MinHash value for value."""

from __future__ import annotations

import random

import datasketch
import numpy as np
import pytest

from corpus_dagster.lib.minhash import (
    batch_signatures,
    permutations,
    shingle_input_hash,
    signatures_from_hashes,
)
from corpus_dagster.lib.shingle_hashing import shingle_hash64, shingle_hashes, word_hash, word_hashes
from corpus_dagster.lib.text import normalize_text, tokenize_batch, words

# Letters, digits, punctuation, whitespace runs, accented and Greek/Cyrillic/CJK letters, superscripts,
# underscores and combining marks: the cases where "alphanumeric" could be read differently.
ALPHABET = list("abcXYZ0129 ,.;:!?-_'\"()\n\t  ") + list("éÉßøÅΣσςЖж中文²½\u0301") + ["  ", "...", " - "]


def random_text(rng: random.Random, max_len: int = 160) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, max_len)))


def random_docs(seed: int, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    vocab = [
        "alpha",
        "Beta",
        "gamma-ray",
        "δέλτα",
        "x_y",
        "42",
        "naïve",
        "ЖУК",
        "中文",
        "e=mc²",
        "...",
        "don't",
    ]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 60))) for _ in range(n)]
    return docs + [random_text(rng) for _ in range(n)]


def test_normalization_lowercases_and_collapses_non_alphanumeric_runs() -> None:
    assert normalize_text("  Hello,  WORLD!! x_y--z ") == "hello world x y z"
    assert words("ΣΑΣ é2 ½") == ["σας", "é2", "½"]
    assert words(" ... ") == []


def test_batch_tokenizer_matches_the_scalar_reference() -> None:
    rng = random.Random(1)
    texts = [random_text(rng) for _ in range(300)] + ["", "   ", "a"]
    batch = tokenize_batch(texts)
    got = [
        [batch.word_text(i) for i in range(batch.doc_offsets[d], batch.doc_offsets[d + 1])]
        for d in range(len(texts))
    ]
    assert got == [words(t) for t in texts]


def test_null_text_has_no_words() -> None:
    batch = tokenize_batch([None, "a b"])
    assert batch.word_counts().tolist() == [0, 2]


def test_vectorized_word_and_shingle_hashes_match_the_scalar_reference() -> None:
    texts = random_docs(2)
    batch = tokenize_batch(texts)
    wh = word_hashes(batch)
    assert wh.tolist() == [word_hash(w) for t in texts for w in words(t)]
    for k in (1, 3, 5):
        sh, offsets = shingle_hashes(wh, batch.doc_offsets, k)
        expected = []
        for t in texts:
            ws = words(t)
            expected += [shingle_hash64(" ".join(ws[i : i + k])) for i in range(len(ws) - k + 1)]
        assert sh.tolist() == expected
        assert np.diff(offsets).tolist() == [max(len(words(t)) - k + 1, 0) for t in texts]


def test_word_hash_separates_words_and_lengths() -> None:
    assert len({word_hash(w) for w in ["a", "b", "ab", "ba", "aa", "a" * 64, "a" * 65]}) == 7
    assert shingle_hash64("a b") != shingle_hash64("b a")


@pytest.mark.parametrize("scheme", ["affine32", "affine64"])
@pytest.mark.parametrize(("num_perm", "seed"), [(128, 1), (64, 7), (17, 12345)])
def test_permutations_equal_datasketch(scheme: str, num_perm: int, seed: int) -> None:
    a, b = permutations(num_perm, seed, scheme)
    ref = datasketch.MinHash(num_perm, seed, scheme=scheme).permutations
    assert np.array_equal(a, ref[0]) and np.array_equal(b, ref[1])
    assert a.dtype == ref[0].dtype


@pytest.mark.parametrize("scheme", ["affine32", "affine64"])
@pytest.mark.parametrize(("num_perm", "seed", "k"), [(128, 1, 5), (64, 42, 3), (32, 7, 1)])
def test_signatures_equal_datasketch_on_random_documents(
    scheme: str, num_perm: int, seed: int, k: int
) -> None:
    texts = random_docs(seed)
    a, b = permutations(num_perm, seed, scheme)
    sig, n_words, n_shingles = batch_signatures(texts, k, a, b, scheme)
    assert sig.shape == (len(texts), num_perm)
    compared = 0
    for i, text in enumerate(texts):
        ws = words(text)
        assert n_words[i] == len(ws)
        shingles = [" ".join(ws[j : j + k]) for j in range(len(ws) - k + 1)]
        assert n_shingles[i] == len(shingles)
        if not shingles:
            assert (sig[i] == np.iinfo(sig.dtype).max).all()
            continue
        ref = datasketch.MinHash(num_perm, seed, hashfunc=shingle_input_hash(scheme), scheme=scheme)
        ref.update_batch(shingles)
        assert np.array_equal(sig[i], ref.hashvalues), f"document {i}"
        assert sig.dtype == ref.hashvalues.dtype
        compared += 1
    assert compared > len(texts) // 2


def test_default_datasketch_call_is_affine32() -> None:
    """The issue's exact call, MinHash(num_perm, seed, hashfunc=...), with our default scheme."""
    texts = random_docs(5, 10)
    a, b = permutations(128, 1, "affine32")
    sig, _, _ = batch_signatures(texts, 5, a, b, "affine32")
    for i, text in enumerate(texts):
        ws = words(text)
        shingles = [" ".join(ws[j : j + 5]) for j in range(len(ws) - 4)]
        if shingles:
            ref = datasketch.MinHash(128, 1, hashfunc=shingle_input_hash("affine32"))
            ref.update_batch(shingles)
            assert np.array_equal(sig[i], ref.hashvalues)


def test_signature_ignores_shingle_order_and_repeats() -> None:
    a, b = permutations(32, 1)
    h = np.array([5, 9, 5, 1], dtype=np.uint64)
    one = signatures_from_hashes(h, np.array([0, 4]), a, b, "affine32")
    two = signatures_from_hashes(np.array([1, 9, 5], dtype=np.uint64), np.array([0, 3]), a, b, "affine32")
    assert np.array_equal(one, two)


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="scheme"):
        permutations(8, 1, "legacy")


def test_batch_tokenizer_matches_the_reference_across_unicode() -> None:
    """1-, 2-, 3- and 4-byte UTF-8 characters: letters, digits, marks, symbols, punctuation, emoji."""
    rng = random.Random(7)
    pool = [chr(cp) for cp in range(0x20, 0x2FFF) if not 0xD800 <= cp < 0xE000]
    pool += [chr(cp) for cp in range(0x4E00, 0x4F00)] + [chr(cp) for cp in range(0x1F600, 0x1F650)]
    pool += [chr(cp) for cp in range(0x10400, 0x10450)] + [" "] * 200  # Deseret: 4-byte letters with case
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 80))) for _ in range(400)]
    batch = tokenize_batch(texts)
    got = [
        [batch.word_text(i) for i in range(batch.doc_offsets[d], batch.doc_offsets[d + 1])]
        for d in range(len(texts))
    ]
    assert got == [words(t) for t in texts]


def test_alphanumeric_table_equals_str_isalnum_on_every_code_point() -> None:
    from corpus_dagster.lib.text import _alnum_table

    table = _alnum_table()
    assert table.shape == (0x110000,)
    assert table.tolist() == [chr(cp).isalnum() for cp in range(0x110000)]


def _numpy_signatures(hashes64: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, scheme: str) -> np.ndarray:
    """The numpy formulation the kernel replaced: per permutation, multiply, add and `minimum.reduceat`."""
    from corpus_dagster.lib.minhash import premix, signature_dtype

    dtype = signature_dtype(scheme)
    out = np.full((len(a), len(offsets) - 1), np.iinfo(dtype).max, dtype=dtype)
    have = np.flatnonzero(np.diff(offsets) > 0)
    if len(have):
        x = premix(hashes64, scheme)
        for p in range(len(a)):
            out[p, have] = np.minimum.reduceat(x * a[p] + b[p], offsets[have])
    return out.T


@pytest.mark.parametrize("scheme", ["affine32", "affine64"])
def test_kernel_equals_the_numpy_formulation(scheme: str) -> None:
    """Random shingle hashes over documents of 0 to 300 shingles (empty ones first, last and between)."""
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 300, 200)
    counts[[0, 7, 8, 199]] = 0
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    hashes = rng.integers(0, 2**64 - 1, int(offsets[-1]), dtype=np.uint64, endpoint=True)
    a, b = permutations(128, 11, scheme)
    got = signatures_from_hashes(hashes, offsets, a, b, scheme)
    assert got.dtype == np.dtype(np.uint32 if scheme == "affine32" else np.uint64)
    assert np.array_equal(got, _numpy_signatures(hashes, offsets, a, b, scheme))
    assert (got[counts == 0] == np.iinfo(got.dtype).max).all()


def test_signatures_of_a_batch_without_shingles_are_all_max() -> None:
    a, b = permutations(16, 1)
    got = signatures_from_hashes(np.zeros(0, dtype=np.uint64), np.zeros(4, dtype=np.int64), a, b, "affine32")
    assert got.shape == (3, 16) and (got == np.iinfo(np.uint32).max).all()


def test_kernel_refuses_mixed_dtypes_and_wrong_shapes() -> None:
    from corpus_dagster.lib.kernels import min_affine

    x = np.arange(4, dtype=np.uint32)
    a = b = np.ones(8, dtype=np.uint32)
    with pytest.raises(TypeError, match="share uint32 or uint64"):
        min_affine(x, np.array([0, 4]), a.astype(np.uint64), b, np.zeros((1, 8), dtype=np.uint32))
    with pytest.raises(ValueError, match="C-contiguous"):
        min_affine(x, np.array([0, 4]), a, b, np.zeros((8, 1), dtype=np.uint32))


def test_one_letter_documents_each_hold_a_word() -> None:
    """Words end at document boundaries without a separator byte: as many words as bytes."""
    texts = ["a", "b", "", "é", "c", "7", "d"]
    batch = tokenize_batch(texts)
    assert [batch.word_text(i) for i in range(len(batch.starts))] == ["a", "b", "é", "c", "7", "d"]
    assert batch.word_counts().tolist() == [1, 1, 0, 1, 1, 1, 1]
    assert [words(t) for t in texts] == [["a"], ["b"], [], ["é"], ["c"], ["7"], ["d"]]


def test_kernels_compile_without_a_cache_location(monkeypatch) -> None:
    """A read-only install with no user cache folder: numba refuses cache=True; compile uncached instead
    (core.jit.compiled, which the MinHash and word-split kernels are compiled with)."""
    from corpus_dagster.core import jit

    real = jit.njit
    asked = []

    def njit(**options):  # noqa: ANN202
        asked.append(options.get("cache", False))
        if options.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real(**options)

    monkeypatch.setattr(jit, "njit", njit)
    add_one = jit.compiled(lambda x: x + 1)
    assert asked == [True, False] and add_one(41) == 42


def _unicode_texts(seed: int, specials: bool) -> list[str]:
    rng = random.Random(seed)
    pool = [chr(cp) for cp in range(0x20, 0x2FFF) if not 0xD800 <= cp < 0xE000]
    pool += [chr(cp) for cp in range(0x10400, 0x10450)] + [chr(0x1E900), chr(0x212A), chr(0x023A)] + [" "] * 200
    if not specials:
        pool = [c for c in pool if c not in ("Σ", "İ")]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 80))) for _ in range(300)]


@pytest.mark.parametrize("specials", [False, True])
def test_word_hashes_from_texts_equal_those_of_the_tokenized_batch(specials: bool) -> None:
    """One pass over the texts as written gives the hashes and word offsets of lowercase-then-tokenize;
    with Σ or İ in the batch (whose lowercase is not a one-to-one code point) the batch is lowercased first."""
    from corpus_dagster.lib.shingle_hashing import text_word_hashes

    texts = _unicode_texts(3, specials) + ["", None, "ΟΔΟΣ ΣΑΣ", "a"] + random_docs(4)
    if not specials:
        texts = [t for t in texts if t is None or ("Σ" not in t and "İ" not in t)]
    batch = tokenize_batch(texts)
    hashes, doc_offsets = text_word_hashes(texts)
    assert hashes.tolist() == word_hashes(batch).tolist()
    assert doc_offsets.tolist() == batch.doc_offsets.tolist()
    assert hashes.tolist() == [word_hash(w) for t in texts if t for w in words(t)]


def test_word_hashes_from_texts_read_arrow_slices_and_chunks() -> None:
    import pyarrow as pa

    from corpus_dagster.lib.shingle_hashing import text_word_hashes

    texts = ["Alpha BETA", "gamma", None, "Ünïcode wörds", "x"]
    whole = pa.chunked_array([pa.array(texts[:2]), pa.array(texts[2:])])
    for arg in (whole, pa.array(texts).slice(1, 3), pa.array(texts, type=pa.large_string()).slice(2)):
        expected = arg.to_pylist()
        hashes, offsets = text_word_hashes(arg)
        assert hashes.tolist() == [word_hash(w) for t in expected if t for w in words(t)]
        assert np.diff(offsets).tolist() == [len(words(t or "")) for t in expected]


def test_final_sigma_is_lowercased_by_its_position() -> None:
    """Σ becomes ς at the end of a word and σ inside one: a per-character table cannot say which."""
    from corpus_dagster.lib.shingle_hashing import text_word_hashes

    hashes, _ = text_word_hashes(["ΟΔΟΣ ΣΑΣ"])
    assert hashes.tolist() == [word_hash("οδος"), word_hash("σας")]


def test_lowered_word_kernel_leaves_documents_without_a_table_lowercase_to_the_caller() -> None:
    from corpus_dagster.core.jit import string_buffers
    from corpus_dagster.lib.kernels import lowered_word_hashes
    from corpus_dagster.lib.shingle_hashing import LEN_MIX, POLY_BASE
    from corpus_dagster.lib.text import texts_array, tokenizer_tables

    texts = ["plain", "two words", "with İ inside", "after", "ΣΑΣ", "last one"]
    data, offsets = string_buffers(texts_array(texts))
    hashes, doc_offsets, unlowered = lowered_word_hashes(data, offsets, *tokenizer_tables(), POLY_BASE, LEN_MIX)
    assert unlowered.tolist() == [2, 4]
    assert np.diff(doc_offsets).tolist() == [1, 2, 0, 1, 0, 2]
    assert hashes.tolist() == [word_hash(w) for w in ["plain", "two", "words", "after", "last", "one"]]


def test_lowercase_table_equals_polars_on_every_code_point() -> None:
    """The kernel's per-character lowercase is the batch lowercasing's, character by character; -1 marks
    the characters it must leave to the batch lowercasing (Σ, and any whose lowercase is not one
    character), and lowercasing a lowercase changes nothing (a lowercased batch needs no second pass)."""
    import polars as pl

    from corpus_dagster.lib.text import _lower_table

    table = _lower_table()
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    lowered = pl.Series([chr(cp) for cp in cps]).str.to_lowercase().to_list()
    expected = np.arange(0x110000, dtype=np.int64)
    for cp, low in zip(cps, lowered, strict=True):
        expected[cp] = ord(low) if len(low) == 1 else -1
    expected[0x03A3] = -1
    assert np.array_equal(table.astype(np.int64), expected)
    mapped = table[table >= 0]
    assert np.array_equal(table[mapped], mapped)
