"""FineWeb rules, with inclusive thresholds ("at most", "at least")."""

from __future__ import annotations

import pytest

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.fineweb import fineweb_quality
from corpus_dagster.core.config import load_config, load_settings

WORDS = [a + b + c + d + "ing" for a in "bcdfghklm" for b in "aeiou" for c in "lmnprst" for d in "aeiou"]


def run(texts: list[str], **overrides: object) -> list[tuple[str | None, float | None]]:
    v = fineweb_quality(DocBatch(texts), load_settings(None, {"clean": {"fineweb": overrides}}).clean.fineweb)
    return [(r, None if r is None else float(x)) for r, x in zip(v.reason.tolist(), v.value.tolist(), strict=True)]


def long_line(i: int, end: str = ".") -> str:
    """A distinct line of eight words (well over 30 characters)."""
    return " ".join(WORDS[8 * i:8 * i + 8]) + end


def test_off_by_default() -> None:
    assert load_config()["clean"]["fineweb"]["enabled"] is False


def test_line_punct_at_most() -> None:
    at = "\n".join(long_line(i, "." if i < 3 else "") for i in range(25))  # 3 of 25 = 0.12: dropped
    above = "\n".join(long_line(i, "." if i < 4 else "") for i in range(25))  # 0.16: kept
    assert run([at, above]) == [("fineweb_line_punct", pytest.approx(0.12)), (None, None)]


def test_line_punct_uses_terminal_punctuation_of_any_script() -> None:
    doc = "\n".join(long_line(i, end) for i, end in enumerate(["。", "？", "!", "।", "؟"]))
    assert run([doc]) == [(None, None)]


def test_short_lines_at_least() -> None:
    short = [f"Short {WORDS[i]}." for i in range(67)]
    at = "\n".join(short + [long_line(i) for i in range(10, 43)])  # 67 of 100 short: dropped
    below = "\n".join(short[:66] + [long_line(i) for i in range(10, 44)])  # 66 of 100: kept
    assert run([at, below]) == [("fineweb_short_lines", pytest.approx(0.67)), (None, None)]


def test_dup_line_chars_at_least() -> None:
    dup = "Same line."  # 10 characters, repeated once
    body = [long_line(i) for i in range(10)]
    pad = 1000 - 2 * len(dup) - sum(map(len, body))  # the pad line makes 1000 characters without newlines
    at = "\n".join([dup, *body, "x" * (pad - 1) + ".", dup])  # 10 / 1000 = 0.01: dropped
    below = "\n".join([dup, *body, "x" * pad + ".", dup])  # 10 / 1001: kept
    assert len(at) - at.count("\n") == 1000
    assert run([at, below]) == [("fineweb_dup_line_chars", pytest.approx(0.01)), (None, None)]


def test_newline_ratio_over() -> None:
    lines = [f"{WORDS[2 * i] * 3} {WORDS[2 * i + 1] * 3}." for i in range(10)]  # 3 tokens, over 30 chars
    at = "\n".join(lines)  # 9 newlines / 30 tokens = 0.3: kept
    over = at + "\n"  # 10 / 30: dropped
    assert run([at, over]) == [(None, None), ("fineweb_newline_ratio", pytest.approx(1 / 3))]


def test_null_switches_and_order() -> None:
    doc = "\n".join(["a", "b", "c", "a"])  # no punctuation, short lines, repeats, many newlines
    assert run([doc])[0][0] == "fineweb_line_punct"
    assert run([doc], max_line_punct_ratio=None)[0][0] == "fineweb_short_lines"
    off = {k: None for k in ("max_line_punct_ratio", "min_short_line_ratio", "min_dup_line_char_ratio",
                             "max_newline_word_ratio")}
    assert run([doc], **off) == [(None, None)]


def test_long_line_over_and_off_without_a_default() -> None:
    assert "max_line_chars" not in load_config()["clean"]["fineweb"]  # no default: off, not in the resolved config
    prose = [long_line(i) for i in range(6)]  # punctuated, long lines: no other rule fires
    at = "\n".join([*prose, "y" * 99 + "."])  # the longest line has 100 characters: kept
    over = "\n".join([*prose, "y" * 100 + "."])  # 101: dropped
    assert run([at, over]) == [(None, None), (None, None)]
    assert run([at, over], max_line_chars=100) == [(None, None), ("fineweb_long_line", 101.0)]
