"""FineWeb quality rules (Penedo et al. 2024), off by default; thresholds inclusive ("at most", "at least").

Rules in this fixed order, over the non-blank lines (split on `\\n`):
fineweb_line_punct   share of lines ending in terminal punctuation at most `max_line_punct_ratio`
fineweb_short_lines  share of lines of at most `short_line_chars` characters at least `min_short_line_ratio`
fineweb_dup_line_chars  characters of repeated lines (copies after the first) at least
                     `min_dup_line_char_ratio` of the text without newlines
fineweb_newline_ratio   newlines per word over `max_newline_word_ratio`
fineweb_long_line    a non-blank line of over `max_line_chars` characters (no default: off)
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.declare import Filter, Measures, rule
from corpus_dagster.clean.verdict import Verdict, ratio
from corpus_dagster.core.settings import CleanFinewebSettings


class FinewebMeasures(Measures):
    """Shares of the non-blank lines, and newlines per word."""

    @cached_property
    def text_lines(self) -> np.ndarray:
        return ~self.batch.lines.blank

    @cached_property
    def n_lines(self) -> np.ndarray:
        return self.batch.lines.per_doc(self.text_lines)

    @cached_property
    def n_newlines(self) -> np.ndarray:
        return self.batch.series.str.count_matches("\n", literal=True).to_numpy()

    @cached_property
    def line_punct(self) -> np.ndarray:
        lines = self.batch.lines
        punct = self.text_lines & lines.flat.str.contains(r"\p{Sentence_Terminal}$").to_numpy()
        return ratio(lines.per_doc(punct), self.n_lines)

    @cached_property
    def short_lines(self) -> np.ndarray:
        lines = self.batch.lines
        return ratio(lines.per_doc(self.text_lines & (lines.length <= self.cfg.short_line_chars)), self.n_lines)

    @cached_property
    def dup_line_chars(self) -> np.ndarray:
        lines = self.batch.lines
        dup = self.text_lines & ~lines.first_in_doc(self.text_lines)
        return ratio(lines.per_doc(np.where(dup, lines.length, 0)), self.batch.n_chars - self.n_newlines)

    @cached_property
    def newline_ratio(self) -> np.ndarray:
        return ratio(self.n_newlines, self.batch.words.list.len().to_numpy())

    @cached_property
    def longest_line(self) -> np.ndarray:
        lines = self.batch.lines
        out = np.zeros(len(self.batch), dtype=np.float64)
        np.maximum.at(out, lines.doc[self.text_lines], lines.length[self.text_lines])
        return out


FINEWEB = Filter("fineweb", (
    rule("fineweb_line_punct", "share of non-blank lines ending in terminal punctuation",
         ("<=", "max_line_punct_ratio", "line_punct")),
    rule("fineweb_short_lines", "share of non-blank lines that are short",
         (">=", "min_short_line_ratio", "short_lines"), also=("short_line_chars",)),
    rule("fineweb_dup_line_chars", "share of the characters (newlines left out) in lines repeating an earlier one",
         (">=", "min_dup_line_char_ratio", "dup_line_chars")),
    rule("fineweb_newline_ratio", "newlines per word", (">", "max_newline_word_ratio", "newline_ratio")),
    rule("fineweb_long_line", "characters of the longest non-blank line", (">", "max_line_chars", "longest_line")),
), measures=FinewebMeasures, base=False, enabled=False)


def fineweb_quality(batch: DocBatch, cfg: CleanFinewebSettings) -> Verdict:
    """First failing FineWeb rule per document (a null threshold switches that rule off)."""
    return FINEWEB.verdict(batch, cfg)
