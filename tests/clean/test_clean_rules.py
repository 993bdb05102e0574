"""docs1 rules: symbol_soup, table_dump, repeated, nav_menu, non_english, each at and over its threshold."""

from __future__ import annotations

import pytest

from corpus_dagster.clean import rules
from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.core.config import load_settings


def run(rule: str, texts: list[str], **overrides: object) -> list[tuple[str | None, float | None]]:
    v = getattr(rules, rule)(DocBatch(texts), getattr(load_settings(None, {"clean": {rule: overrides}}).clean, rule))
    return [(r, None if r is None else float(x)) for r, x in zip(v.reason.tolist(), v.value.tolist(), strict=True)]


def test_symbol_soup() -> None:
    inside = "abc def" + "!@#$"  # 7 of 11 characters are letters or space
    assert run("symbol_soup", [inside])[0] == (None, None)
    at = "a" * 59 + " " + "{" * 40  # 60 of 100: not under 0.6
    under = "a" * 58 + " " + "{" * 41  # 59 of 100
    assert run("symbol_soup", [at, under]) == [(None, None), ("symbol_soup", pytest.approx(0.59))]


def test_symbol_soup_counts_digits_marks_and_whitespace() -> None:
    assert run("symbol_soup", ["१२३ हिन्दी\n\t 42", ""]) == [(None, None), (None, None)]


def test_table_dump() -> None:
    table = "Table of values\n" + "\n".join(f"{i}.5 {i * 3}" for i in range(10))
    assert run("table_dump", [table]) == [("table_dump", pytest.approx(20 / 23))]


def test_table_dump_just_inside() -> None:
    half_numeric = "\n".join(f"{i} abc" for i in range(10))  # numeric words 10 of 20: not over 0.5
    half_short = "\n".join(["1 2"] * 5 + ["1 2 3"] * 5)  # short lines 5 of 10: not over 0.5
    too_few = "\n".join(["1 2"] * 4)  # under min_lines
    five = "\n".join(["1 2"] * 5)
    ordinal = "\n".join(["3rd v1"] * 10)  # a digit and a letter: no number
    assert run("table_dump", [half_numeric, half_short, too_few, five, ordinal]) == [
        (None, None), (None, None), (None, None), ("table_dump", 1.0), (None, None)]


def test_repeated() -> None:
    line = "x" * 10
    at = f"{line}\n{line}\n" + "y" * 18  # 20 of 40 characters in repeated lines
    over = f"{line}\n{line}\n" + "y" * 17  # 20 of 39
    assert run("repeated", [at, over]) == [(None, None), ("repeated", pytest.approx(20 / 39))]


def test_repeated_ignores_blank_lines() -> None:
    assert run("repeated", ["\n\n\n\n   \n   \nonly one line"]) == [(None, None)]


SENTENCES = ["This is a long sentence about the company and what it does.",
             "Another sentence tells the reader where the office is located.",
             "A third sentence explains the opening hours of the shop.",
             "The last sentence thanks the visitor for reading this far."]


def test_nav_menu() -> None:
    menu = ["Home", "About us", "Contact", "Blog", "Login", "Privacy Policy", "Terms of Use", "Search"]
    assert run("nav_menu", ["\n".join(menu + SENTENCES[:2])]) == [("nav_menu", pytest.approx(0.8))]


def test_nav_menu_just_inside() -> None:
    at_ratio = "\n".join(["Home", "About us", "Contact", "Jane Doe", "John Roe", "Max Mustermann"] + SENTENCES)
    names = "\n".join(["Jane Doe", "John Roe", "Max Mustermann", "Erika Mustermann", "Home", "Contact",
                       "Ann Lee", "Bo Li"] + SENTENCES[:2])  # link-like but only two menu words
    three = "\n".join(["Jane Doe", "John Roe", "Max Mustermann", "Erika Mustermann", "Home", "Contact",
                       "Blog", "Bo Li"] + SENTENCES[:2])
    too_few = "\n".join(["Home", "About us", "Contact", "Blog"])
    sentences = "\n".join(["Home.", "About us.", "Contact.", "Blog.", "Login."])  # sentence ends: no links
    assert run("nav_menu", [at_ratio, names, three, too_few, sentences]) == [
        (None, None), (None, None), ("nav_menu", pytest.approx(0.8)), (None, None), (None, None)]


def test_non_english() -> None:
    at = "abcd абвг 1234"  # 4 of 8 letters non-Latin
    over = "abc абвг"  # 4 of 7
    assert run("non_english", [at, over, "", "1234 !!"]) == [
        (None, None), ("non_english", pytest.approx(4 / 7)), (None, None), (None, None)]


def test_non_english_counts_cjk_and_marks_latin_accents() -> None:
    assert run("non_english", ["中文段落", "déjà vu Ångström"]) == [("non_english", 1.0), (None, None)]
