"""Gopher quality filter (Rae et al. 2021, appendix A), computed with polars over a whole batch.

Rules in this fixed order (a null threshold switches that rule off):
gopher_word_count, gopher_mean_word_length, gopher_symbol_ratio (`#`, then ellipses),
gopher_bullet_lines, gopher_ellipsis_lines, gopher_alpha_words, gopher_stop_words.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.declare import Filter, Measures, rule
from corpus_dagster.clean.token_stats import token_stats
from corpus_dagster.clean.verdict import Verdict, char_class, ratio
from corpus_dagster.core.settings import CleanGopherSettings

_HSPACE = r"[\s&&[^\n]]"  # whitespace inside a line


def gopher_stats(batch: DocBatch, cfg: CleanGopherSettings) -> dict[str, np.ndarray]:
    """Per-document statistics the Gopher quality rules compare against their thresholds."""
    tokens = token_stats(batch.word_lists, cfg.stop_words)  # one compiled pass over every token
    n_tokens = tokens.n_tokens
    n_words = tokens.n_words.astype(np.float64)

    s = batch.series
    n_newlines = s.str.count_matches("\n", literal=True).to_numpy()
    ends_nl = s.str.ends_with("\n").to_numpy()
    n_lines = np.where(batch.n_chars == 0, 0, n_newlines + (~ends_nl))  # str.splitlines() count
    bullets = char_class(cfg.bullet_chars)
    return {
        "n_tokens": n_tokens,
        "n_words": n_words,
        "mean_word_length": ratio(tokens.word_chars, n_words),
        "hash_ratio": ratio(s.str.count_matches("#", literal=True).to_numpy(), n_tokens),
        "ellipsis_ratio": ratio(s.str.count_matches("...", literal=True).to_numpy()
                                + s.str.count_matches("…", literal=True).to_numpy(), n_tokens),
        "bullet_lines": ratio(s.str.count_matches(rf"(?m)^{_HSPACE}*{bullets}").to_numpy(), n_lines),
        "ellipsis_lines": ratio(s.str.count_matches(rf"(?m)(?:\.\.\.|…){_HSPACE}*$").to_numpy(), n_lines),
        "alpha_words": ratio(tokens.n_alpha, n_tokens),
        "stop_words": tokens.n_stop.astype(np.float64),
    }


class GopherMeasures(Measures):
    """The Gopher statistics, computed together on first use."""

    @cached_property
    def stats(self) -> dict[str, np.ndarray]:
        return gopher_stats(self.batch, self.cfg)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.stats[name]


GOPHER = Filter("gopher", (
    rule("gopher_word_count", "words (tokens that are not only punctuation or symbols)",
         ("<", "min_words", "n_words"), (">", "max_words", "n_words")),
    rule("gopher_mean_word_length", "mean word length in characters",
         ("<", "min_mean_word_length", "mean_word_length"), (">", "max_mean_word_length", "mean_word_length")),
    rule("gopher_symbol_ratio", "`#` per token, or else ellipses per token",
         (">", "max_symbol_word_ratio", "hash_ratio"), (">", "max_symbol_word_ratio", "ellipsis_ratio")),
    rule("gopher_bullet_lines", "share of lines starting with a bullet", (">", "max_bullet_lines_ratio", "bullet_lines"),
         also=("bullet_chars",)),
    rule("gopher_ellipsis_lines", "share of lines ending in an ellipsis",
         (">", "max_ellipsis_lines_ratio", "ellipsis_lines")),
    rule("gopher_alpha_words", "share of tokens holding a letter", ("<", "min_alpha_words_ratio", "alpha_words")),
    rule("gopher_stop_words", "distinct stop words among the tokens", ("<", "min_stop_words", "stop_words"),
         also=("stop_words",)),
), measures=GopherMeasures, base=True, enabled=True)


def gopher_quality(batch: DocBatch, cfg: CleanGopherSettings) -> Verdict:
    """First failing Gopher quality rule per document (reason None when all pass)."""
    return GOPHER.verdict(batch, cfg)
