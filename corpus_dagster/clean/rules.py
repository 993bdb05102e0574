"""docs1 cleaning rules: each one its own reason code, manifest key, switch and source scope.

symbol_soup  under `min_text_char_ratio` of the characters are letters, digits or whitespace
table_dump   a number table: most non-blank lines hold at most `max_line_words` words and most words are
             numbers (a digit, no letter)
repeated     over `max_repeated_char_ratio` of the characters sit in lines that occur more than once
nav_menu     scraped navigation: most lines are short link-like lines, several of them menu words
non_english  over `max_non_latin_ratio` of the letters are not Latin script
"""

from __future__ import annotations

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.verdict import Verdict, ratio
from corpus_dagster.core.settings import (
    CleanNavMenuSettings,
    CleanNonEnglishSettings,
    CleanRepeatedSettings,
    CleanSymbolSoupSettings,
    CleanTableDumpSettings,
)


def symbol_soup(batch: DocBatch, cfg: CleanSymbolSoupSettings) -> Verdict:
    """Drop documents made mostly of symbols and punctuation."""
    other = batch.series.str.count_matches(r"[^\p{L}\p{M}\p{N}\s]").to_numpy()  # few matches: fast
    share = np.where(batch.n_chars == 0, 1.0, ratio(batch.n_chars - other, batch.n_chars))
    v = Verdict(len(batch))
    v.apply("symbol_soup", share < cfg.min_text_char_ratio, share)
    return v


def table_dump(batch: DocBatch, cfg: CleanTableDumpSettings) -> Verdict:
    """Drop number tables: short lines, numeric words."""
    lines = batch.lines
    text_lines = ~lines.blank
    n_lines = lines.per_doc(text_lines)
    short = lines.per_doc(text_lines & (lines.words <= cfg.max_line_words))
    s = batch.series
    n_words = s.str.count_matches(r"\S+").to_numpy()
    with_digit = s.str.count_matches(r"\S*\p{N}\S*").to_numpy()
    digit_and_letter = s.str.count_matches(r"\S*(?:\p{L}\S*\p{N}|\p{N}\S*\p{L})\S*").to_numpy()
    numeric = ratio(with_digit - digit_and_letter, n_words)
    fired = ((n_lines >= cfg.min_lines) & (ratio(short, n_lines) > cfg.min_short_line_ratio)
             & (numeric > cfg.min_numeric_word_ratio))
    v = Verdict(len(batch))
    v.apply("table_dump", fired, numeric)
    return v


def repeated(batch: DocBatch, cfg: CleanRepeatedSettings) -> Verdict:
    """Drop documents whose text is mostly repeated lines (every copy counts, the first included)."""
    lines = batch.lines
    dup = lines.duplicated_in_doc(~lines.blank)
    share = ratio(lines.per_doc(np.where(dup, lines.length, 0)), batch.n_chars)
    v = Verdict(len(batch))
    v.apply("repeated", share > cfg.max_repeated_char_ratio, share)
    return v


def nav_menu(batch: DocBatch, cfg: CleanNavMenuSettings) -> Verdict:
    """Drop scraped site navigation: many short lines without sentence ends, several menu words."""
    lines = batch.lines
    text_lines = ~lines.blank
    ends_sentence = lines.flat.str.contains(r"[\p{Sentence_Terminal},;:]\s*$").to_numpy()
    link = text_lines & (lines.words <= cfg.max_link_words) & ~ends_sentence
    menu_words = [w.lower() for w in cfg.menu_words]
    menu = link & lines.flat.str.strip_chars().str.to_lowercase().is_in(menu_words).to_numpy()
    n_lines = lines.per_doc(text_lines)
    share = ratio(lines.per_doc(link), n_lines)
    fired = ((n_lines >= cfg.min_lines) & (share > cfg.min_link_line_ratio)
             & (lines.per_doc(menu) >= cfg.min_menu_lines))
    v = Verdict(len(batch))
    v.apply("nav_menu", fired, share)
    return v


def non_english(batch: DocBatch, cfg: CleanNonEnglishSettings) -> Verdict:
    """Drop documents whose letters are mostly outside the Latin script."""
    s = batch.series
    non_latin = s.str.count_matches(r"[\p{L}&&\P{Latin}]").to_numpy()  # rare in Latin text: fast
    share = np.zeros(len(batch), dtype=np.float64)
    some = np.flatnonzero(non_latin)
    if len(some):  # letters are counted only where a non-Latin letter occurs
        letters = s.gather(some).str.count_matches(r"\p{L}").to_numpy()
        share[some] = ratio(non_latin[some], letters)
    v = Verdict(len(batch))
    v.apply("non_english", share > cfg.max_non_latin_ratio, share)
    return v
