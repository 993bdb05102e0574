"""Every clean filter in run order; the reason codes, manifest keys and threshold texts derive from it.

A filter is one `clean` config section and one manifest `filters` key, declared in its own module next to
the measurements its rules compare (`clean.declare` says how). `FILTERS` lists the filters in run order
(the first rule that fires decides a document's reason, so this order is part of the output). The
manifest lists the base filters first, then the others, each group in run order.
"""

from __future__ import annotations

from corpus_dagster.clean.declare import Filter, Limit, Reason, Threshold, rule
from corpus_dagster.clean.fineweb import FINEWEB
from corpus_dagster.clean.gopher import GOPHER
from corpus_dagster.clean.ppl import PPL
from corpus_dagster.clean.repetition import REPETITION
from corpus_dagster.clean.rules import NAV_MENU, NON_ENGLISH, REPEATED, SYMBOL_SOUP, TABLE_DUMP
from corpus_dagster.core.settings import CleanSettings

__all__ = [
    "BASE_FILTER_KEYS", "FILTERS", "FILTER_KEYS", "LANG", "REASON_CODES", "RULE_ORDER", "Filter", "Limit", "Reason",
    "Threshold", "filter_key", "find_reason", "reason_threshold", "threshold_text",
]

# decided from the batch's language ID (langid.lang_dropped), not from measurements
LANG = Filter("lang", (
    rule("lang", "the score of the detected label (its mean probability over the samples)", (">=", "min_score", ""),
         also=("allowed",)),
), measures=None, base=True, enabled=True)

# Run order = first-match order: it decides which reason a document that breaks several rules gets.
FILTERS: tuple[Filter, ...] = (LANG, GOPHER, REPETITION, SYMBOL_SOUP, TABLE_DUMP, REPEATED, NAV_MENU, NON_ENGLISH,
                               FINEWEB, PPL)
RULE_ORDER: tuple[str, ...] = tuple(f.name for f in FILTERS)
# Every reason code, in first-match order.
REASON_CODES: tuple[str, ...] = tuple(code for f in FILTERS for code in f.codes)
# Always in the manifest's `filters`; the others appear when enabled or when they dropped something.
BASE_FILTER_KEYS: tuple[str, ...] = tuple(f.name for f in FILTERS if f.base)
# Manifest `filters` keys, in the manifest's order: the base keys, then the others, each in run order.
FILTER_KEYS: list[str] = [*BASE_FILTER_KEYS, *(f.name for f in FILTERS if not f.base)]

_BY_CODE: dict[str, tuple[Filter, Reason]] = {r.code: (f, r) for f in FILTERS for r in f.reasons}


def find_reason(code: str) -> tuple[Filter, Reason]:
    """The filter that records a reason code, and the code's declaration (ValueError for an unknown code)."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise ValueError(f"unknown clean reason code: {code!r}") from None


def filter_key(reason: str) -> str:
    """The manifest `filters` key a reason code counts under (gopher_word_count -> gopher)."""
    return find_reason(reason)[0].name


def reason_threshold(reason: str, clean_cfg: CleanSettings) -> Threshold | None:
    """What a reason code's recorded value was compared with under the `clean` settings (None for an unknown
    code): the one source of the threshold texts of the Dagster metadata, the review page and explain."""
    try:
        flt, declared = find_reason(reason)
    except ValueError:
        return None
    return Threshold.of_reason(flt.name, declared, getattr(clean_cfg, flt.name))


def threshold_text(reason: str, clean_cfg: CleanSettings) -> str:
    """The configured limits a reason code's recorded value was compared with, as one line of text."""
    threshold = reason_threshold(reason, clean_cfg)
    return threshold.text() if threshold else f"no threshold known for reason code {reason!r}"
