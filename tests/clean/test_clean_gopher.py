"""Gopher quality filter: each reason code just over and just inside its default threshold."""

from __future__ import annotations

import pytest

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.gopher import gopher_quality
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanGopherSettings

# distinct five-letter words: no stop words among them
WORDS = [a + b + c + "ed" for a in "bcdfg" for b in "aeiou" for c in "lmnprst"][:150]


def cfg(**overrides: object) -> CleanGopherSettings:
    return load_settings(None, {"clean": {"gopher": overrides}}).clean.gopher


def run(texts: list[str], section: CleanGopherSettings | None = None) -> list[tuple[str | None, float | None]]:
    v = gopher_quality(DocBatch(texts), section or cfg())
    return [(r, None if r is None else float(x)) for r, x in zip(v.reason.tolist(), v.value.tolist(), strict=True)]


def words(n: int, start: int = 0) -> str:
    """'the and' plus n - 2 distinct five-letter words: n words, two stop words."""
    return " ".join(["the", "and", *WORDS[start:start + n - 2]])


def test_word_count_min() -> None:
    assert run([words(50), words(49)]) == [(None, None), ("gopher_word_count", 49.0)]


def test_punctuation_is_no_word() -> None:
    assert run([words(49) + " , ; ! -- ..."])[0] == ("gopher_word_count", 49.0)


def test_word_count_max() -> None:
    body = " ".join(WORDS[i % 150] for i in range(99_998))
    assert run(["the and " + body, "the and " + body + " extra"], cfg(max_words=100_000)) == [
        (None, None), ("gopher_word_count", 100_001.0)]


def test_word_count_max_off_by_default() -> None:
    """The release segments long documents, so by default no word cap drops them before it can."""
    assert cfg().max_words is None
    body = " ".join(WORDS[i % 150] for i in range(150_000))
    assert run(["the and " + body]) == [(None, None)]


def test_mean_word_length_min() -> None:
    inside = " ".join(["the", "and"] + ["cat"] * 48)  # mean 3.0
    under = " ".join(["the", "and"] + ["cat"] * 47 + ["at"])  # mean 2.98
    assert run([inside, under]) == [(None, None), ("gopher_mean_word_length", pytest.approx(149 / 50))]


def test_mean_word_length_max() -> None:
    inside = " ".join(["the", "and"] + ["abcdefghij"] * 46 + ["abcdefghijklmnopq"] * 2)  # 500 chars / 50
    over = " ".join(["the", "and"] + ["abcdefghij"] * 46 + ["abcdefghijklmnopq", "abcdefghijklmnopqr"])
    assert run([inside, over]) == [(None, None), ("gopher_mean_word_length", pytest.approx(501 / 50))]


@pytest.mark.parametrize("symbol", ["#", "...", "…"])
def test_symbol_ratio(symbol: str) -> None:
    inside = words(89) + f" {symbol}" * 10 + " end"  # 10 of 100 tokens (ends in a word, not an ellipsis)
    over = words(90) + f" {symbol}" * 11 + " end"  # 11 of 102 tokens
    assert run([inside, over]) == [(None, None), ("gopher_symbol_ratio", pytest.approx(11 / 102))]


def lines(count: int, start: int = 0) -> list[str]:
    return [" ".join(WORDS[start + 6 * i:start + 6 * i + 6]) for i in range(count)]


@pytest.mark.parametrize("bullet", ["-", "•", "*"])
def test_bullet_lines(bullet: str) -> None:
    body = lines(10)
    body[0] = "the and " + body[0]
    inside = "\n".join([body[0]] + [f"  {bullet} {x}" for x in body[1:]])  # 9 of 10 lines
    over = "\n".join(f"{bullet} {x}" for x in body)  # 10 of 10
    assert run([inside, over]) == [(None, None), ("gopher_bullet_lines", 1.0)]


def test_bullet_chars_is_configurable() -> None:
    doc = "\n".join(f"* {x}" for x in ["the and " + lines(1)[0]] + lines(9, 6))
    assert run([doc])[0][0] == "gopher_bullet_lines"
    assert run([doc], cfg(bullet_chars="•-")) == [(None, None)]  # datatrove's bullets


@pytest.mark.parametrize("ellipsis", ["...", "…"])
def test_ellipsis_lines(ellipsis: str) -> None:
    body = lines(10)
    body[0] = "the and " + body[0]
    inside = "\n".join(x + (f" {ellipsis}  " if i < 3 else "") for i, x in enumerate(body))  # 3 of 10
    over = "\n".join(x + (f" {ellipsis}" if i < 4 else "") for i, x in enumerate(body))  # 4 of 10
    assert run([inside, over]) == [(None, None), ("gopher_ellipsis_lines", 0.4)]


def test_alpha_words() -> None:
    inside = words(80) + " 123" * 20  # 80 of 100 tokens hold a letter
    under = words(80) + " 123" * 21
    assert run([inside, under]) == [(None, None), ("gopher_alpha_words", pytest.approx(80 / 101))]


def test_stop_words() -> None:
    two = " ".join(["the", "with", *WORDS[:60]])
    one = " ".join(["the", "the", *WORDS[:60]])
    capitalized = " ".join(["The", "And", *WORDS[:60]])  # case-sensitive, as in datatrove
    assert run([two, one, capitalized]) == [(None, None), ("gopher_stop_words", 1.0), ("gopher_stop_words", 0.0)]


def test_first_match_and_null_switch() -> None:
    short = " ".join(WORDS[:10])  # too short and no stop words
    assert run([short])[0][0] == "gopher_word_count"
    assert run([short], cfg(min_words=None))[0][0] == "gopher_stop_words"
    off = cfg(**{k: None for k in ("min_words", "max_words", "min_mean_word_length", "max_mean_word_length",
                                   "max_symbol_word_ratio", "max_bullet_lines_ratio", "max_ellipsis_lines_ratio",
                                   "min_alpha_words_ratio", "min_stop_words")})
    assert run([short, ""], off) == [(None, None), (None, None)]


def test_empty_document_is_too_short() -> None:
    assert run([""]) == [("gopher_word_count", 0.0)]
