"""Gopher quality filter (Rae et al. 2021, appendix A), computed with polars over a whole batch.

Rules in this fixed order (a null threshold switches that rule off):
gopher_word_count, gopher_mean_word_length, gopher_symbol_ratio (`#`, then ellipses),
gopher_bullet_lines, gopher_ellipsis_lines, gopher_alpha_words, gopher_stop_words.
"""

from __future__ import annotations

import numpy as np

from corpus_dagster.clean.batch import DocBatch
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


def gopher_quality(batch: DocBatch, cfg: CleanGopherSettings) -> Verdict:
    """First failing Gopher quality rule per document (reason None when all pass)."""
    st = gopher_stats(batch, cfg)
    v = Verdict(len(batch))
    n_words = st["n_words"]
    if cfg.min_words is not None:
        v.apply("gopher_word_count", n_words < cfg.min_words, n_words)
    if cfg.max_words is not None:
        v.apply("gopher_word_count", n_words > cfg.max_words, n_words)
    mean = st["mean_word_length"]
    if cfg.min_mean_word_length is not None:
        v.apply("gopher_mean_word_length", mean < cfg.min_mean_word_length, mean)
    if cfg.max_mean_word_length is not None:
        v.apply("gopher_mean_word_length", mean > cfg.max_mean_word_length, mean)
    if cfg.max_symbol_word_ratio is not None:
        v.apply("gopher_symbol_ratio", st["hash_ratio"] > cfg.max_symbol_word_ratio, st["hash_ratio"])
        v.apply("gopher_symbol_ratio", st["ellipsis_ratio"] > cfg.max_symbol_word_ratio, st["ellipsis_ratio"])
    if cfg.max_bullet_lines_ratio is not None:
        v.apply("gopher_bullet_lines", st["bullet_lines"] > cfg.max_bullet_lines_ratio, st["bullet_lines"])
    if cfg.max_ellipsis_lines_ratio is not None:
        v.apply("gopher_ellipsis_lines", st["ellipsis_lines"] > cfg.max_ellipsis_lines_ratio,
                st["ellipsis_lines"])
    if cfg.min_alpha_words_ratio is not None:
        v.apply("gopher_alpha_words", st["alpha_words"] < cfg.min_alpha_words_ratio, st["alpha_words"])
    if cfg.min_stop_words is not None:
        v.apply("gopher_stop_words", st["stop_words"] < cfg.min_stop_words, st["stop_words"])
    return v
