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


def test_documents_sharing_chunks_get_their_own_tokens_in_order() -> None:
    # each distinct chunk is split once and gathered back: repeats across and within documents, in any order
    import random

    rng = random.Random(7)
    pool = ["well-known", "(x)", "a", "foo.bar()", "don't", "5km", "e.g.", "C++", "x", ""]
    docs = [" ".join(rng.choice(pool) for _ in range(rng.randint(0, 12))) for _ in range(300)]
    assert split_words(pl.Series(docs)).to_list() == [[t for c in d.split() for t in tokenize_chunk(c)] for d in docs]


def test_distinct_values_and_concat_ranges() -> None:
    import numpy as np

    from corpus_dagster.clean.words import distinct_values
    from corpus_dagster.core.arrays import concat_ranges

    codes, distinct = distinct_values(pl.Series(["b", "a", "b", "c", "a"]))
    assert distinct.to_list() == ["b", "a", "c"] and codes.tolist() == [0, 1, 0, 2, 1]
    assert concat_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert concat_ranges(np.array([4, 2]), np.array([1, 1])).tolist() == [4, 2]
    assert concat_ranges(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


def _prefix_len_spec(s: str) -> int:
    """spaCy's English prefix rules as written in the rules, one after another (no fast paths)."""
    import unicodedata

    from corpus_dagster.clean.word_tokens import MULTI_CURRENCY, PREFIX_CHARS

    c = s[0]
    if c == "+":
        return 0 if len(s) > 1 and "0" <= s[1] <= "9" else 1
    if c in PREFIX_CHARS:
        return 1
    if c == ".":
        run = len(s) - len(s.lstrip("."))
        return run if run >= 2 else 0
    for cur in MULTI_CURRENCY:
        if s.startswith(cur):
            return len(cur)
    return 1 if unicodedata.category(c) == "So" else 0


def _suffix_len_spec(s: str) -> int:
    """spaCy's English suffix rules as written in the rules: of all that match up to the end, the leftmost wins."""
    import unicodedata

    from corpus_dagster.clean.word_tokens import _DOT_AFTER, SUFFIX_CHARS, SUFFIX_UNITS

    n, best, c = len(s), len(s), s[-1]
    if c in SUFFIX_CHARS or unicodedata.category(c) == "So":
        best = n - 1
    if c == ".":
        run = n - len(s.rstrip("."))
        if run >= 2:
            best = min(best, n - run)
        elif n >= 2:
            b = s[-2]
            cat = unicodedata.category(b)
            if ("0" <= b <= "9" or cat in ("Ll", "Lo") or b in _DOT_AFTER
                    or (n >= 3 and cat in ("Lu", "Lo") and unicodedata.category(s[-3]) in ("Lu", "Lo"))
                    or (n >= 3 and s[-3] == "°" and b in "FfCcKk")):
                best = min(best, n - 1)
    elif c == "+" and n >= 2 and "0" <= s[-2] <= "9":
        best = min(best, n - 1)
    if n >= 2 and s[-2] in "'’" and c in "sS":
        best = min(best, n - 2)
    for k in range(1, min(max(map(len, SUFFIX_UNITS)), n - 1) + 1):
        if "0" <= s[-k - 1] <= "9":
            if s[-k:] in SUFFIX_UNITS:
                best = min(best, n - k)
            break
    return n - best


def test_prefix_and_suffix_fast_paths_follow_the_rules() -> None:
    # _prefix_len/_suffix_len skip rules that cannot match an ASCII letter or digit: same lengths as the rules
    import random

    from corpus_dagster.clean.word_tokens import _prefix_len, _suffix_len

    rng = random.Random(3)
    alphabet = list("aZsSé9_0'’.,-–:/=+*^$%()[]<>\"«»#&§•©…°FCK²UCA") + ["km", "US$", "C$", "A$", "m/s", "MB", "'s"]
    chunks = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(30_000)})
    assert [_prefix_len(c) for c in chunks] == [_prefix_len_spec(c) for c in chunks]
    assert [_suffix_len(c) for c in chunks] == [_suffix_len_spec(c) for c in chunks]


def test_an_affix_around_an_inert_core_is_split_in_polars_like_the_chunk_tokenizer() -> None:
    import numpy as np

    from corpus_dagster.clean.word_tokens import SPECIAL_CASES
    from corpus_dagster.clean.words import _affixed_inert

    chunks = ["(foo_bar)", "docs.c:", "51.7]", "bpo-34246:", "_x9", "<3,", "(cannot)", "(a-b)", "x.", "(8)", ":)", "«é_1»",
              "(word)", "word.", "12.", "WORD.", "a_b."]
    series = pl.Series(chunks)
    took, rest, (pre, core, suf) = _affixed_inert(series, np.arange(len(chunks)), list(SPECIAL_CASES))
    assert [chunks[i] for i in took] == ["(foo_bar)", "docs.c:", "51.7]", "bpo-34246:", "_x9", "«é_1»", "(word)",
                                         "word.", "12."]
    assert [[p, c, s] for p, c, s in zip(pre, core, suf, strict=True)] == [
        ["(", "foo_bar", ")"], ["", "docs.c", ":"], ["", "51.7", "]"], ["", "bpo-34246", ":"], ["_", "x9", ""],
        ["«", "é_1", "»"], ["(", "word", ")"], ["", "word", "."], ["", "12", "."]]
    # a special case on the way (`<3`, `cannot`, `x.`), an infix in the core, a `.` after upper case or `_`:
    # left to tokenize_chunk
    assert [chunks[i] for i in rest] == ["<3,", "(cannot)", "(a-b)", "x.", "(8)", ":)", "WORD.", "a_b."]
    got = split_words(pl.Series([" ".join(chunks)])).to_list()[0]
    assert got == [t for c in chunks for t in tokenize_chunk(c)]


def test_tokens_concatenate_to_their_chunk() -> None:
    # the merge of punctuation special cases is skipped unless one occurs inside the chunk: that relies on this
    import random

    from corpus_dagster.clean.word_tokens import SPECIAL_CASES

    assert all("".join(parts) == key for key, parts in SPECIAL_CASES.items())
    rng = random.Random(11)
    alphabet = list("aZé9_0'’.,-–:/=+*^$%()[]<>\"«»#&§•©…;8") + [":)", "<3", "^_^", "cannot", "e.g.", "US$", "km"]
    for _ in range(20_000):
        chunk = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        assert "".join(tokenize_chunk(chunk)) == chunk, chunk
