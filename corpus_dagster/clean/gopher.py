"""Gopher quality filter (Rae et al. 2021, appendix A), computed with polars over a whole batch.

Rules in this fixed order (a null threshold switches that rule off):
gopher_word_count, gopher_mean_word_length, gopher_symbol_ratio (`#`, then ellipses),
gopher_bullet_lines, gopher_ellipsis_lines, gopher_alpha_words, gopher_stop_words.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.verdict import Verdict, char_class, ratio
from corpus_dagster.clean.words import LETTER_PATTERN, SYMBOL_ONLY_PATTERN, flatten

REASONS = (
    "gopher_word_count",
    "gopher_mean_word_length",
    "gopher_symbol_ratio",
    "gopher_bullet_lines",
    "gopher_ellipsis_lines",
    "gopher_alpha_words",
    "gopher_stop_words",
)

_HSPACE = r"[\s&&[^\n]]"  # whitespace inside a line


def gopher_stats(batch: DocBatch, cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per-document statistics the Gopher quality rules compare against their thresholds."""
    n = len(batch)
    flat, doc, offsets = flatten(batch.words)
    n_tokens = np.diff(offsets)
    symbol = flat.str.contains(SYMBOL_ONLY_PATTERN).to_numpy()
    length = flat.str.len_chars().to_numpy().astype(np.int64)
    alpha = flat.str.contains(LETTER_PATTERN).to_numpy()
    n_words = np.bincount(doc, weights=~symbol, minlength=n)
    word_chars = np.bincount(doc, weights=np.where(symbol, 0, length), minlength=n)

    stop_words = list(dict.fromkeys(cfg["stop_words"]))
    stop_pos = np.flatnonzero(flat.is_in(stop_words).to_numpy()) if stop_words else np.zeros(0, np.int64)
    if len(stop_pos):
        which = flat.gather(stop_pos).replace_strict(stop_words, list(range(len(stop_words))),
                                                     return_dtype=pl.Int64).to_numpy()
        pairs = np.unique(doc[stop_pos] * len(stop_words) + which)
        n_stop = np.bincount(pairs // len(stop_words), minlength=n)
    else:
        n_stop = np.zeros(n, dtype=np.int64)

    s = batch.series
    n_newlines = s.str.count_matches("\n", literal=True).to_numpy()
    ends_nl = s.str.ends_with("\n").to_numpy()
    n_lines = np.where(batch.n_chars == 0, 0, n_newlines + (~ends_nl))  # str.splitlines() count
    bullets = char_class(cfg["bullet_chars"])
    return {
        "n_tokens": n_tokens,
        "n_words": n_words,
        "mean_word_length": ratio(word_chars, n_words),
        "hash_ratio": ratio(s.str.count_matches("#", literal=True).to_numpy(), n_tokens),
        "ellipsis_ratio": ratio(s.str.count_matches("...", literal=True).to_numpy()
                                + s.str.count_matches("…", literal=True).to_numpy(), n_tokens),
        "bullet_lines": ratio(s.str.count_matches(rf"(?m)^{_HSPACE}*{bullets}").to_numpy(), n_lines),
        "ellipsis_lines": ratio(s.str.count_matches(rf"(?m)(?:\.\.\.|…){_HSPACE}*$").to_numpy(), n_lines),
        "alpha_words": ratio(np.bincount(doc, weights=alpha, minlength=n), n_tokens),
        "stop_words": n_stop.astype(np.float64),
    }


def gopher_quality(batch: DocBatch, cfg: dict[str, Any]) -> Verdict:
    """First failing Gopher quality rule per document (reason None when all pass)."""
    st = gopher_stats(batch, cfg)
    v = Verdict(len(batch))
    n_words = st["n_words"]
    if cfg["min_words"] is not None:
        v.apply("gopher_word_count", n_words < cfg["min_words"], n_words)
    if cfg["max_words"] is not None:
        v.apply("gopher_word_count", n_words > cfg["max_words"], n_words)
    mean = st["mean_word_length"]
    if cfg["min_mean_word_length"] is not None:
        v.apply("gopher_mean_word_length", mean < cfg["min_mean_word_length"], mean)
    if cfg["max_mean_word_length"] is not None:
        v.apply("gopher_mean_word_length", mean > cfg["max_mean_word_length"], mean)
    if cfg["max_symbol_word_ratio"] is not None:
        v.apply("gopher_symbol_ratio", st["hash_ratio"] > cfg["max_symbol_word_ratio"], st["hash_ratio"])
        v.apply("gopher_symbol_ratio", st["ellipsis_ratio"] > cfg["max_symbol_word_ratio"], st["ellipsis_ratio"])
    if cfg["max_bullet_lines_ratio"] is not None:
        v.apply("gopher_bullet_lines", st["bullet_lines"] > cfg["max_bullet_lines_ratio"], st["bullet_lines"])
    if cfg["max_ellipsis_lines_ratio"] is not None:
        v.apply("gopher_ellipsis_lines", st["ellipsis_lines"] > cfg["max_ellipsis_lines_ratio"],
                st["ellipsis_lines"])
    if cfg["min_alpha_words_ratio"] is not None:
        v.apply("gopher_alpha_words", st["alpha_words"] < cfg["min_alpha_words_ratio"], st["alpha_words"])
    if cfg["min_stop_words"] is not None:
        v.apply("gopher_stop_words", st["stop_words"] < cfg["min_stop_words"], st["stop_words"])
    return v
