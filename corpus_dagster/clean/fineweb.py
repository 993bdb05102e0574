"""FineWeb quality rules (Penedo et al. 2024), off by default; thresholds inclusive ("at most", "at least").

Rules in this fixed order, over the non-blank lines (split on `\\n`):
fineweb_line_punct   share of lines ending in terminal punctuation at most `max_line_punct_ratio`
fineweb_short_lines  share of lines of at most `short_line_chars` characters at least `min_short_line_ratio`
fineweb_dup_line_chars  characters of repeated lines (copies after the first) at least
                     `min_dup_line_char_ratio` of the text without newlines
fineweb_newline_ratio   newlines per word over `max_newline_word_ratio`
"""

from __future__ import annotations

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.verdict import Verdict, ratio
from corpus_dagster.core.settings import CleanFinewebSettings


def fineweb_quality(batch: DocBatch, cfg: CleanFinewebSettings) -> Verdict:
    """First failing FineWeb rule per document (a null threshold switches that rule off)."""
    lines = batch.lines
    text_lines = ~lines.blank
    n_lines = lines.per_doc(text_lines)
    v = Verdict(len(batch))
    if cfg.max_line_punct_ratio is not None:
        punct = text_lines & lines.flat.str.contains(r"\p{Sentence_Terminal}$").to_numpy()
        share = ratio(lines.per_doc(punct), n_lines)
        v.apply("fineweb_line_punct", share <= cfg.max_line_punct_ratio, share)
    if cfg.min_short_line_ratio is not None:
        share = ratio(lines.per_doc(text_lines & (lines.length <= cfg.short_line_chars)), n_lines)
        v.apply("fineweb_short_lines", share >= cfg.min_short_line_ratio, share)
    n_newlines = batch.series.str.count_matches("\n", literal=True).to_numpy()
    if cfg.min_dup_line_char_ratio is not None:
        dup = text_lines & ~lines.first_in_doc(text_lines)
        share = ratio(lines.per_doc(np.where(dup, lines.length, 0)), batch.n_chars - n_newlines)
        v.apply("fineweb_dup_line_chars", share >= cfg.min_dup_line_char_ratio, share)
    if cfg.max_newline_word_ratio is not None:
        share = ratio(n_newlines, batch.words.list.len().to_numpy())
        v.apply("fineweb_newline_ratio", share > cfg.max_newline_word_ratio, share)
    return v
