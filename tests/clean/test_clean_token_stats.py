"""The compiled Gopher token statistics equal the polars passes they replaced, astral tokens included."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pyarrow as pa

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.token_stats import LETTER_PATTERN, SYMBOL_ONLY_PATTERN, token_stats
from corpus_dagster.clean.words import flatten, split_word_lists

STOP = ["the", "be", "to", "of", "and", "that", "have", "with"]


def _reference(words: pl.Series, stop_words: list[str]) -> dict[str, np.ndarray]:
    """The polars implementation the kernel replaced (gopher_stats before it)."""
    n = len(words)
    flat, doc, offsets = flatten(words)
    symbol = flat.str.contains(SYMBOL_ONLY_PATTERN).to_numpy()
    length = flat.str.len_chars().to_numpy().astype(np.int64)
    alpha = flat.str.contains(LETTER_PATTERN).to_numpy()
    stops = list(dict.fromkeys(stop_words))
    n_stop = np.zeros(n, dtype=np.int64)
    stop_pos = np.flatnonzero(flat.is_in(stops).to_numpy()) if stops else np.zeros(0, np.int64)
    if len(stop_pos):
        which = flat.gather(stop_pos).replace_strict(stops, list(range(len(stops))), return_dtype=pl.Int64).to_numpy()
        pairs = np.unique(doc[stop_pos] * len(stops) + which)
        n_stop = np.bincount(pairs // len(stops), minlength=n)
    return {
        "n_tokens": np.diff(offsets),
        "n_words": np.bincount(doc, weights=~symbol, minlength=n),
        "word_chars": np.bincount(doc, weights=np.where(symbol, 0, length), minlength=n),
        "n_alpha": np.bincount(doc, weights=alpha, minlength=n),
        "n_stop": n_stop,
    }


def _assert_same(words: pa.Array, stop_words: list[str]) -> None:
    got = token_stats(words, stop_words)
    want = _reference(pl.Series("words", words), stop_words)
    for name, expected in want.items():
        assert np.array_equal(getattr(got, name), expected.astype(np.int64)), name


# letters of several scripts and cases, digits, punctuation, symbols (BMP and astral), marks, emoji
_PIECES = list("aZé9_'’.,-–—~:/=+*^$%()[]<>\"«»#&§•©…;@?!°²١ßİǅ中ж") + [
    "the", "The", "and", "of", "to", "that", "with", "have", "be", "🙂", "𝔘", "𐍈", "\u0301", "...", "--", "e.g.",
    "𝟘", "🏳️", "\U0001F1E9\U0001F1EA", "ª", "\u200d", "\x1c",
]


def _docs(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) + rng.choice([" ", "  ", "\n", "", "\t"]) for _ in range(rng.randint(0, 60)))
            for _ in range(n)]


def test_random_documents_match_the_polars_passes() -> None:
    words = split_word_lists(pl.Series("text", _docs(3, 3_000)))
    _assert_same(words, STOP)


def test_tokens_built_by_hand_cover_every_class() -> None:
    # tokens need not come from the splitter: symbol-only tokens of astral code points, mixed ones, letters
    # outside the BMP, a repeated stop word counted once, a stop word that is a prefix of a token
    docs = [["🙂", "🙂a", "𝔘", "#", "#a", "...", "the", "the", "them", "The", ""], [], ["𐍈𐍈", "a🙂", "-🙂-"],
            ["and", "with", "that", "have", "to", "be", "of", "x"]]
    _assert_same(pa.array(docs, pa.large_list(pa.large_string())), STOP)


def test_sliced_and_taken_arrays() -> None:
    words = split_word_lists(pl.Series("text", _docs(5, 400)))
    _assert_same(words.slice(37, 200), STOP)
    _assert_same(words.take(pa.array([5, 3, 399, 0, 0, 120])), STOP)
    _assert_same(pa.array([["a", "b"], None, ["the"]], pa.list_(pa.string())), STOP)  # other list types, a null


def test_stop_word_lists() -> None:
    words = split_word_lists(pl.Series("text", _docs(9, 500)))
    for stops in ([], ["the", "the", "of"], ["", "a"], ["中", "é", "🙂"], ["e.g."]):
        _assert_same(words, stops)


def test_doc_batch_takes_token_lists_without_a_polars_copy() -> None:
    texts = _docs(11, 50)
    batch = DocBatch(texts)
    lists = batch.word_lists
    sub = batch.take(np.array([4, 2, 40]))
    assert sub._words is None and sub._word_lists is not None  # noqa: SLF001 - the lazy path under test
    assert sub.words.to_list() == [lists[i].as_py() for i in (4, 2, 40)]
    assert DocBatch([texts[i] for i in (4, 2, 40)]).words.to_list() == sub.words.to_list()
