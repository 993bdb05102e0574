"""Word tokenizer: reproduces spaCy's English tokenizer, which datatrove's Gopher filters use."""

from __future__ import annotations

import polars as pl
import pytest

from corpus_dagster.clean.word_tokens import tokenize_chunk
from corpus_dagster.clean.words import split_words

# Input and the tokens spacy.blank("en") (spaCy 3.8, via datatrove's split_into_words) produced for it.
SAMPLE = (
    "Hello, world! It's a test... don't e.g. U.S.A. http://x.com/a?b=1 #tag 3.14 1,000 \"quoted\" (paren) end. "
    "well-known foo/bar a--b x_y ``code'' $5 50% C++ can't I'm they're   ©2020 --option -v [1] a.b.c foo.bar() "
    "x=y   * bullet • dot\n\n- dash ... … e-mail: me@x.org <tag> 'single' 1.5m 10km 3rd A.I. Dr. Mr. etc. "
    "file.txt v1.2.3"
)
SPACY = [
    "Hello", ",", "world", "!", "It", "'s", "a", "test", "...", "do", "n't", "e.g.", "U.S.A.",
    "http://x.com/a?b=1", "#", "tag", "3.14", "1,000", '"', "quoted", '"', "(", "paren", ")", "end", ".",
    "well", "-", "known", "foo", "/", "bar", "a", "--", "b", "x_y", "`", "`", "code", "''", "$", "5", "50", "%",
    "C++", "ca", "n't", "I", "'m", "they", "'re", "©", "2020", "--option", "-v", "[", "1", "]", "a.b.c",
    "foo.bar", "(", ")", "x", "=", "y", "*", "bullet", "•", "dot", "-", "dash", "...", "…", "e", "-", "mail",
    ":", "me@x.org", "<", "tag", ">", "'", "single", "'", "1.5", "m", "10", "km", "3rd", "A.I.", "Dr.", "Mr.",
    "etc", ".", "file.txt", "v1.2.3",
]


def test_matches_spacy_on_sample() -> None:
    assert split_words(pl.Series([SAMPLE])).to_list() == [SPACY]


@pytest.mark.parametrize(("chunk", "tokens"), [
    ("journald.conf(5)", ["journald.conf(5", ")"]),  # `(` inside a chunk is no split point
    ("[:alpha:]", ["[:", "alpha", ":]"]),  # punctuation special cases are merged back
    ("cannot", ["can", "not"]),
    ("(Oct.", ["(", "Oct."]),
    ("ABC.", ["ABC", "."]),  # `.` after two capitals is a suffix, after one it is not
    ("J.", ["J."]),
    ("/usr/bin", ["/usr", "/", "bin"]),
    ("GPL-2", ["GPL-2"]),
    ("2020-2021", ["2020", "-", "2021"]),
    ("----------", ["----------"]),
    ("Python's", ["Python", "'s"]),
])
def test_chunks(chunk: str, tokens: list[str]) -> None:
    assert list(tokenize_chunk(chunk)) == tokens
    assert split_words(pl.Series([f"x {chunk} y"])).to_list() == [["x", *tokens, "y"]]


def test_fast_paths_agree_with_the_chunk_tokenizer() -> None:
    # plain and single-affix chunks are split in polars; the result must equal the Python path
    chunks = ["word", "word,", "(word", "(word)", "word.", "Word.", "WORD.", "12.", "(12)", "cannot.", "vs.",
              "e.g.,", "8)", "'s", "«Mot»", "x:", "42"]
    got = split_words(pl.Series([" ".join(chunks)])).to_list()[0]
    assert got == [t for c in chunks for t in tokenize_chunk(c)]
    assert got == ["word", "word", ",", "(", "word", "(", "word", ")", "word", ".", "Word", ".", "WORD", ".", "12",
                   ".", "(", "12", ")", "can", "not", ".", "vs.", "e.g.", ",", "8)", "'s", "«", "Mot", "»", "x",
                   ":", "42"]  # spaCy's output


def test_empty_and_whitespace_documents() -> None:
    assert split_words(pl.Series(["", " \n\t ", "a"])).to_list() == [[], [], ["a"]]


def test_every_fast_path_agrees_with_the_chunk_tokenizer_on_random_chunks() -> None:
    # chunks drawn from every character a rule looks at (affixes, infixes, units, currencies, icons,
    # apostrophes, specials) plus letters, digits and `_`: the polars paths must give tokenize_chunk's tokens
    import random

    rng = random.Random(15)
    alphabet = list("aZé9_0'’.,-–:/=+*^$%()[]<>\"«»#&§•©…") + ["km", "US$", "C$", "kg", "MB", "am", "nt", "'s",
                                                               "cannot", "e.g.", "Dr.", "%", "²", "8)", "x"]
    chunks = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(20_000)})
    got = split_words(pl.Series([" ".join(chunks)])).to_list()[0]
    assert got == [t for c in chunks for t in tokenize_chunk(c)]


@pytest.mark.parametrize("chunk", ["5km", "1am", "US$5", "cannot", "_x", "x_", "a'b", "x©", "+1", "a.", "x+"])
def test_chunks_some_rule_touches_leave_the_inert_fast_path(chunk: str) -> None:
    from corpus_dagster.clean.words import _inert

    assert not _inert(pl.Series([chunk]))[0]
    assert _inert(pl.Series(["x_y9", "5kmx", "naïve", "9a9f0c"])).all()
