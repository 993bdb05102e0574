"""docs1 cleaning rules: each one its own reason code, manifest key, switch and source scope.

symbol_soup  under `min_text_char_ratio` of the characters are letters, digits or whitespace
table_dump   a number table: most non-blank lines hold at most `max_line_words` words and most words are
             numbers (a digit, no letter)
repeated     over `max_repeated_char_ratio` of the characters sit in lines that occur more than once
nav_menu     scraped navigation: most lines are short link-like lines, several of them menu words
non_english  over `max_non_latin_ratio` of the letters are not Latin script
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.declare import Filter, Measures, rule
from corpus_dagster.clean.verdict import Verdict, ratio
from corpus_dagster.core.settings import (
    CleanNavMenuSettings,
    CleanNonEnglishSettings,
    CleanRepeatedSettings,
    CleanSymbolSoupSettings,
    CleanTableDumpSettings,
)


class SymbolSoupMeasures(Measures):
    @cached_property
    def text_char_share(self) -> np.ndarray:
        batch = self.batch
        other = batch.series.str.count_matches(r"[^\p{L}\p{M}\p{N}\s]").to_numpy()  # few matches: fast
        return np.where(batch.n_chars == 0, 1.0, ratio(batch.n_chars - other, batch.n_chars))


class TableDumpMeasures(Measures):
    @cached_property
    def n_lines(self) -> np.ndarray:
        lines = self.batch.lines
        return lines.per_doc(~lines.blank)

    @cached_property
    def short_line_share(self) -> np.ndarray:
        lines = self.batch.lines
        return ratio(lines.per_doc(~lines.blank & (lines.words <= self.cfg.max_line_words)), self.n_lines)

    @cached_property
    def numeric_share(self) -> np.ndarray:
        s = self.batch.series
        n_words = s.str.count_matches(r"\S+").to_numpy()
        with_digit = s.str.count_matches(r"\S*\p{N}\S*").to_numpy()
        digit_and_letter = s.str.count_matches(r"\S*(?:\p{L}\S*\p{N}|\p{N}\S*\p{L})\S*").to_numpy()
        return ratio(with_digit - digit_and_letter, n_words)


class RepeatedMeasures(Measures):
    @cached_property
    def repeated_share(self) -> np.ndarray:
        lines = self.batch.lines
        dup = lines.duplicated_in_doc(~lines.blank)
        return ratio(lines.per_doc(np.where(dup, lines.length, 0)), self.batch.n_chars)


class NavMenuMeasures(Measures):
    @cached_property
    def link(self) -> np.ndarray:
        lines = self.batch.lines
        ends_sentence = lines.flat.str.contains(r"[\p{Sentence_Terminal},;:]\s*$").to_numpy()
        return ~lines.blank & (lines.words <= self.cfg.max_link_words) & ~ends_sentence

    @cached_property
    def n_lines(self) -> np.ndarray:
        lines = self.batch.lines
        return lines.per_doc(~lines.blank)

    @cached_property
    def link_share(self) -> np.ndarray:
        return ratio(self.batch.lines.per_doc(self.link), self.n_lines)

    @cached_property
    def menu_lines(self) -> np.ndarray:
        lines = self.batch.lines
        menu_words = [w.lower() for w in self.cfg.menu_words]
        return lines.per_doc(self.link & lines.flat.str.strip_chars().str.to_lowercase().is_in(menu_words).to_numpy())


class NonEnglishMeasures(Measures):
    @cached_property
    def non_latin_share(self) -> np.ndarray:
        s = self.batch.series
        non_latin = s.str.count_matches(r"[\p{L}&&\P{Latin}]").to_numpy()  # rare in Latin text: fast
        share = np.zeros(len(self.batch), dtype=np.float64)
        some = np.flatnonzero(non_latin)
        if len(some):  # letters are counted only where a non-Latin letter occurs
            letters = s.gather(some).str.count_matches(r"\p{L}").to_numpy()
            share[some] = ratio(non_latin[some], letters)
        return share


SYMBOL_SOUP = Filter("symbol_soup", (
    rule("symbol_soup", "share of characters that are letters, digits or whitespace",
         ("<", "min_text_char_ratio", "text_char_share")),
), measures=SymbolSoupMeasures, base=False, enabled=True)

TABLE_DUMP = Filter("table_dump", (
    rule("table_dump", "share of words that are numbers", (">", "min_numeric_word_ratio", "numeric_share"),
         also=((">=", "min_lines", "n_lines"), "max_line_words", (">", "min_short_line_ratio", "short_line_share"))),
), measures=TableDumpMeasures, base=False, enabled=True)

REPEATED = Filter("repeated", (
    rule("repeated", "share of characters in lines that occur more than once",
         (">", "max_repeated_char_ratio", "repeated_share")),
), measures=RepeatedMeasures, base=False, enabled=True)

NAV_MENU = Filter("nav_menu", (
    rule("nav_menu", "share of non-blank lines that are link-like", (">", "min_link_line_ratio", "link_share"),
         also=((">=", "min_lines", "n_lines"), "max_link_words", (">=", "min_menu_lines", "menu_lines"))),
), measures=NavMenuMeasures, base=False, enabled=True)

NON_ENGLISH = Filter("non_english", (
    rule("non_english", "share of letters outside the Latin script", (">", "max_non_latin_ratio", "non_latin_share")),
), measures=NonEnglishMeasures, base=False, enabled=True)


def symbol_soup(batch: DocBatch, cfg: CleanSymbolSoupSettings) -> Verdict:
    """Drop documents made mostly of symbols and punctuation."""
    return SYMBOL_SOUP.verdict(batch, cfg)


def table_dump(batch: DocBatch, cfg: CleanTableDumpSettings) -> Verdict:
    """Drop number tables: short lines, numeric words."""
    return TABLE_DUMP.verdict(batch, cfg)


def repeated(batch: DocBatch, cfg: CleanRepeatedSettings) -> Verdict:
    """Drop documents whose text is mostly repeated lines (every copy counts, the first included)."""
    return REPEATED.verdict(batch, cfg)


def nav_menu(batch: DocBatch, cfg: CleanNavMenuSettings) -> Verdict:
    """Drop scraped site navigation: many short lines without sentence ends, several menu words."""
    return NAV_MENU.verdict(batch, cfg)


def non_english(batch: DocBatch, cfg: CleanNonEnglishSettings) -> Verdict:
    """Drop documents whose letters are mostly outside the Latin script."""
    return NON_ENGLISH.verdict(batch, cfg)
