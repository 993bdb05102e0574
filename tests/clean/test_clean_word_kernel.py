"""The compiled word splitter gives the tokens of the polars + `tokenize_chunk` implementation it replaced."""

from __future__ import annotations

import random

import polars as pl
import pytest

from corpus_dagster.clean.word_kernel import split_words_arrow
from corpus_dagster.clean.word_tokens import tokenize_chunk
from corpus_dagster.clean.words import (
    _affixed_inert,
    _fallback_tokens,
    _inert,
    _split_words_reference,
    split_words,
)

# every character or piece some rule looks at: affixes, infixes, units, currencies, icons (BMP and astral),
# apostrophes and contractions, specials, URL parts, digits of other scripts, letters of every case,
# combining marks, and a character Python's `\s` counts as space but polars does not (\x1c)
_PIECES = list("aZsSé9_0'’.,-–—~:/=+*^$%()[]<>\"«»#&§•©…;8@?!°FCK²³¹١ßİǅ") + [
    "km", "US$", "C$", "A$", "kg", "MB", "m/s", "am", "nt", "n't", "'s", "'re", "’ll", "'d", "cannot", "e.g.",
    "Dr.", "<3", ":)", "^_^", "0.0", "8)", "--", "---", "——", "..", "x", "ABC", "http", "://", "www", ".com",
    ".org", "user", "8080", "\u0301", "\u00e9", "🙂", "\x1c", "ǈ", "ª",
]
_SPACES = [" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u1680", "\u202f", "\x0b"]


def _chunks(rng: random.Random, pieces: list[str], n: int, longest: int) -> list[str]:
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, longest))) for _ in range(n)]


def _docs(rng: random.Random, chunks: list[str], n_docs: int) -> list[str]:
    docs = []
    for _ in range(n_docs):
        parts = [rng.choice(chunks) for _ in range(rng.randint(0, 40))]
        docs.append(rng.choice(["", " ", "\n"]) + "".join(p + rng.choice(_SPACES) for p in parts))
    return docs


def test_random_documents_match_the_reference() -> None:
    rng = random.Random(21)
    chunks = _chunks(rng, _PIECES, 30_000, 7)
    docs = _docs(rng, chunks, 2_000) + [" ".join(chunks)]
    series = pl.Series("text", docs)
    got = split_words(series)
    assert got.dtype == pl.List(pl.String) and got.name == "words"
    assert got.to_list() == _split_words_reference(series).to_list()


def test_chunks_left_to_the_rules_match_tokenize_chunk() -> None:
    # the chunks the old fast paths did not take, where the kernel runs its port of tokenize_chunk
    import numpy as np

    from corpus_dagster.clean.word_tokens import SPECIAL_CASES

    rng = random.Random(5)
    chunks = pl.Series(sorted(set(_chunks(rng, _PIECES, 40_000, 6))))
    rest = np.flatnonzero(~_inert(chunks))
    _, other, _ = _affixed_inert(chunks, rest, list(SPECIAL_CASES))
    picked = chunks.gather(other).to_list()
    assert len(picked) > 15_000
    assert split_words(pl.Series(picked)).to_list() == [list(tokenize_chunk(c)) for c in picked]


def test_url_like_chunks_match_the_reference() -> None:
    rng = random.Random(8)
    pieces = ["http", "https", "://", "www", ".", "..", "com", "org", "de", "x", "Ab", "é", "_", "-", "@", ":",
              "80", "8080", "123456", "/", "?", "#", "=", "a" * 63, "b" * 64, "«", "ß", "+", "1", "n't", ")", ","]
    chunks = _chunks(rng, pieces, 20_000, 9)
    docs = [" ".join(chunks[i:i + 50]) for i in range(0, len(chunks), 50)]
    series = pl.Series(docs)
    assert split_words(series).to_list() == _split_words_reference(series).to_list()


@pytest.mark.parametrize("chunk", ["12765¹.", "١٢.", "x³.", "(ǅ)", "ǅ.", "a\u0301.", "(8)", "ABC.", "5km.",
                                   "http://x.com/a?b=1", "me@x.org", "a.b@c.de:80/x", "ftp+x://y.org", "foo.bar()",
                                   "[:alpha:]", "don't.", "(can't)", "US$5", "x\x1cy.z", "🙂-a", "a-🙂",
                                   "𝟏.", "(𝐀)", "x𝐀y", "\x1c.", "(\x1c)"])
def test_chunks_where_fast_paths_and_rules_meet(chunk: str) -> None:
    series = pl.Series([f"x {chunk} ({chunk}) {chunk}, y"])
    assert split_words(series).to_list() == _split_words_reference(series).to_list()


def test_empty_null_and_whitespace_only_texts() -> None:
    series = pl.Series("text", ["", "   ", None, "\u3000\u0085\u1680", "a\u2003b", "\n", "c"], dtype=pl.String)
    got = split_words(series)
    assert got.to_list() == _split_words_reference(series).to_list() == [[], [], [], [], ["a", "b"], [], ["c"]]
    assert split_words(pl.Series("text", [], dtype=pl.String)).to_list() == []
    assert split_words(pl.Series("text", [None], dtype=pl.String)).to_list() == [[]]


def test_slices_long_chunks_and_fallback_chunks() -> None:
    # a slice starts inside the Arrow buffers; chunks longer than any scratch guess; astral chunks go to
    # tokenize_chunk (counted) and keep their place among the others
    docs = ["a " * 5 + "x-" * 400 + "y", "🙂 (a) 🙂, b-c 🙂", "(" * 300 + "word" + ")" * 300, "http://a.org " * 3]
    series = pl.Series("text", docs * 3).slice(2, 7)
    lists, fallback, n_tokens = split_words_arrow(series, _fallback_tokens)
    words = pl.Series("words", lists)
    assert words.to_list() == _split_words_reference(series).to_list()
    assert fallback == 3 and n_tokens == sum(len(w) for w in words.to_list())
