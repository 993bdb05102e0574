"""The clean stage for one batch of raw documents: repair, language ID, then the filters, first match wins.

The filters run in the order `filters.FILTERS` declares (it decides which reason a document that breaks
several rules gets). Each group runs only on the documents every earlier group kept, so later (costlier)
statistics are computed for fewer documents. Output depends only on the texts, the config and the source id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from corpus_dagster.clean import ppl
from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.filters import FILTER_KEYS, FILTERS, REASON_CODES, RULE_ORDER, filter_key
from corpus_dagster.clean.langid import LangResult, detect_languages, iso639_1, lang_dropped
from corpus_dagster.clean.repair import REPAIR_KINDS, repair_texts
from corpus_dagster.clean.verdict import Verdict
from corpus_dagster.core.settings import CleanSettings

__all__ = [
    "BATCH_DOCS", "FILTER_KEYS", "REASON_CODES", "REPAIR_KINDS", "RULE_ORDER", "CleanOutcome", "clean_texts",
    "filter_key", "in_scope", "reason_counts",
]

# Documents and characters per internal batch: bound the memory of the token and n-gram arrays (a batch
# of long documents is cut by characters, one document at least); never change a result.
BATCH_DOCS = 8192
BATCH_CHARS = 8 << 20


@dataclass
class CleanOutcome:
    """Per input document, in input order."""

    text: list[str]  # repaired + NFC (kept or not)
    lang: list[str]  # ISO 639-1 code, or "und" (no evidence, or a language without a 639-1 code)
    lang_label: list[str]  # lid.176's own label, which the lang rule decided on ("und": no evidence)
    lang_score: list[float]  # the label's mean probability over the samples (0.0 for "und")
    lang_sample_chars: list[int]  # characters the classifier read to decide the label
    repairs: list[list[str]]  # subset of REPAIR_KINDS, in that order
    reason: list[str | None]  # first matching reason code in RULE_ORDER; None = kept
    value: list[float | None]  # the measured value that tripped the rule; None when kept


class ScopedRule(Protocol):
    """A filter's section: every one can be switched off and limited to some sources."""

    @property
    def enabled(self) -> bool: ...

    @property
    def sources(self) -> tuple[str, ...] | None: ...


def in_scope(rule: ScopedRule, source_id: str) -> bool:
    """Whether a rule is switched on for this source (`sources` null = every source)."""
    return bool(rule.enabled) and (rule.sources is None or source_id in rule.sources)


def clean_texts(texts: list[str], cfg: CleanSettings, source_id: str) -> CleanOutcome:
    """Repair, identify the language of and filter `texts` of one source with the `clean` settings."""
    if in_scope(cfg.ppl, source_id):
        ppl.load_model(cfg.ppl.model_path)  # fail before any work when kenlm or the model is missing
    out, repairs, series = repair_texts(texts, cfg.repair)
    langs = detect_languages(series, cfg.lang)
    n = len(out)
    reason: np.ndarray = np.full(n, None, dtype=object)
    value = np.full(n, np.nan)
    for start, stop in batch_bounds([len(t) for t in out], BATCH_DOCS, BATCH_CHARS):
        verdict = _filter_batch(DocBatch(out[start:stop], series.slice(start, stop - start)),
                                langs.slice(start, stop), cfg, source_id)
        reason[start:stop] = verdict.reason
        value[start:stop] = verdict.value
    return CleanOutcome(
        text=out,
        lang=[iso639_1(label) for label in langs.lang],
        lang_label=langs.lang,
        lang_score=langs.score,
        lang_sample_chars=langs.sample_chars,
        repairs=repairs,
        reason=reason.tolist(),
        value=[None if r is None else float(x) for r, x in zip(reason.tolist(), value.tolist(), strict=True)],
    )


def batch_bounds(sizes: list[int], max_docs: int, max_chars: int) -> list[tuple[int, int]]:
    """[start, stop) ranges in order: at most max_docs documents, and at most max_chars characters unless
    one document alone is longer."""
    bounds, start, chars = [], 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= max_docs or chars + size > max_chars):
            bounds.append((start, i))
            start, chars = i, 0
        chars += size
    if start < len(sizes):
        bounds.append((start, len(sizes)))
    return bounds


def _filter_batch(batch: DocBatch, langs: LangResult, cfg: CleanSettings, source_id: str) -> Verdict:
    """First-match verdict of every rule group over one batch."""
    verdict = Verdict(len(batch))
    current, index = batch, np.arange(len(batch))
    for flt in FILTERS:
        rule_cfg = getattr(cfg, flt.name)
        if not in_scope(rule_cfg, source_id):
            continue
        if flt.measures is None:  # lang: decided for the whole batch from its language ID
            verdict.apply(flt.codes[0], lang_dropped(langs, rule_cfg), np.asarray(langs.score, dtype=np.float64))
            continue
        still = np.flatnonzero(verdict.open[index])
        if not len(still):
            break
        if len(still) < len(current):
            current, index = current.take(still), index[still]
        verdict.merge(index, flt.verdict(current, rule_cfg))
    return verdict


def reason_counts(reasons: Iterable[str | None]) -> dict[str, int]:
    """Dropped documents per reason code, in REASON_CODES order (codes that never fired left out)."""
    counts: dict[str, int] = {}
    for r in reasons:
        if r is not None:
            counts[r] = counts.get(r, 0) + 1
    return {code: counts[code] for code in REASON_CODES if code in counts}
