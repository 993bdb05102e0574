"""Every clean filter, declared once; the run order, reason codes, manifest keys and threshold texts derive from it.

A filter is one `clean` config section and one manifest `filters` key. Its declaration names the reason
codes its batch verdict can record and, per code, what the recorded `value` measures and which config
keys it is compared with. `FILTERS` lists the filters in run order (the first rule that fires decides a
document's reason, so this order is part of the output). The manifest lists the base filters first, then
the others, each group in run order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corpus_dagster.clean import fineweb, gopher, ppl, repetition, rules
from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.verdict import Verdict

__all__ = [
    "BASE_FILTER_KEYS", "FILTERS", "FILTER_KEYS", "LANG", "REASON_CODES", "RULE_ORDER", "BatchVerdict", "Filter",
    "Limit", "Reason", "filter_key", "find_reason",
]

BatchVerdict = Callable[[DocBatch, Any], Verdict]  # (batch, the filter's settings section)


@dataclass(frozen=True)
class Limit:
    """One threshold test: a document is dropped when `value <op> section.key` (a null key switches it off)."""

    op: str  # "<", "<=", ">" or ">="
    key: str  # config key (and settings field) in the filter's section


@dataclass(frozen=True)
class Reason:
    """One reason code: what its recorded value measures and what that value is compared with."""

    code: str
    value: str  # what the rejects table's `value` holds for this code
    limits: tuple[Limit, ...]  # any one that holds drops the document, tried in this order
    also: tuple[str, ...] = ()  # further keys of the section the decision reads
    single: bool = True  # False: conditions on `also` keys must hold too, so no one threshold decides

    @property
    def keys(self) -> tuple[str, ...]:
        """Every config key of the section this reason's decision reads."""
        return (*(limit.key for limit in self.limits), *self.also)


@dataclass(frozen=True)
class Filter:
    """One filter: config section and manifest key `name`, its reason codes and its batch verdict."""

    name: str
    reasons: tuple[Reason, ...]  # in the order the verdict tries them
    verdict: BatchVerdict | None  # None for lang, which is decided from the language ID of the batch
    base: bool  # always in the manifest's `filters` (0 when it dropped nothing)
    enabled: bool  # the schema's default of `enabled`; every filter's `sources` defaults to null (every source)

    @property
    def codes(self) -> tuple[str, ...]:
        """This filter's reason codes, in the order the verdict tries them."""
        return tuple(r.code for r in self.reasons)


def _reason(code: str, value: str, *limits: tuple[str, str], also: tuple[str, ...] = (), single: bool = True) -> Reason:
    return Reason(code, value, tuple(Limit(op, key) for op, key in limits), also, single)


LANG = Filter("lang", (
    _reason("lang", "the score of the detected label (its mean probability over the samples)", (">=", "min_score"),
            also=("allowed",)),
), verdict=None, base=True, enabled=True)

GOPHER = Filter("gopher", (
    _reason("gopher_word_count", "words (tokens that are not only punctuation or symbols)",
            ("<", "min_words"), (">", "max_words")),
    _reason("gopher_mean_word_length", "mean word length in characters",
            ("<", "min_mean_word_length"), (">", "max_mean_word_length")),
    _reason("gopher_symbol_ratio", "`#` per token, or else ellipses per token", (">", "max_symbol_word_ratio")),
    _reason("gopher_bullet_lines", "share of lines starting with a bullet", (">", "max_bullet_lines_ratio"),
            also=("bullet_chars",)),
    _reason("gopher_ellipsis_lines", "share of lines ending in an ellipsis", (">", "max_ellipsis_lines_ratio")),
    _reason("gopher_alpha_words", "share of tokens holding a letter", ("<", "min_alpha_words_ratio")),
    _reason("gopher_stop_words", "distinct stop words among the tokens", ("<", "min_stop_words"),
            also=("stop_words",)),
), verdict=gopher.gopher_quality, base=True, enabled=True)

REPETITION = Filter("repetition", (
    _reason("repetition_dup_para", "share of paragraphs repeating an earlier one", (">", "max_dup_para_ratio")),
    _reason("repetition_dup_para_chars", "share of characters in paragraphs repeating an earlier one",
            (">", "max_dup_para_char_ratio")),
    _reason("repetition_dup_line", "share of lines repeating an earlier one", (">", "max_dup_line_ratio")),
    _reason("repetition_dup_line_chars", "share of characters in lines repeating an earlier one",
            (">", "max_dup_line_char_ratio")),
    *(_reason(f"repetition_top_{n}gram", f"share of characters covered by the most frequent word {n}-gram",
              (">", f"max_top_{n}gram_char_ratio")) for n in repetition.TOP_NGRAMS),
    *(_reason(f"repetition_dup_{n}gram", f"share of characters in word {n}-grams repeating an earlier one",
              (">", f"max_dup_{n}gram_char_ratio")) for n in repetition.DUP_NGRAMS),
), verdict=repetition.gopher_repetition, base=True, enabled=True)

SYMBOL_SOUP = Filter("symbol_soup", (
    _reason("symbol_soup", "share of characters that are letters, digits or whitespace",
            ("<", "min_text_char_ratio")),
), verdict=rules.symbol_soup, base=False, enabled=True)

TABLE_DUMP = Filter("table_dump", (
    _reason("table_dump", "share of words that are numbers", (">", "min_numeric_word_ratio"),
            also=("min_lines", "max_line_words", "min_short_line_ratio"), single=False),
), verdict=rules.table_dump, base=False, enabled=True)

REPEATED = Filter("repeated", (
    _reason("repeated", "share of characters in lines that occur more than once", (">", "max_repeated_char_ratio")),
), verdict=rules.repeated, base=False, enabled=True)

NAV_MENU = Filter("nav_menu", (
    _reason("nav_menu", "share of non-blank lines that are link-like", (">", "min_link_line_ratio"),
            also=("min_lines", "max_link_words", "min_menu_lines"), single=False),
), verdict=rules.nav_menu, base=False, enabled=True)

NON_ENGLISH = Filter("non_english", (
    _reason("non_english", "share of letters outside the Latin script", (">", "max_non_latin_ratio")),
), verdict=rules.non_english, base=False, enabled=True)

FINEWEB = Filter("fineweb", (
    _reason("fineweb_line_punct", "share of non-blank lines ending in terminal punctuation",
            ("<=", "max_line_punct_ratio")),
    _reason("fineweb_short_lines", "share of non-blank lines that are short", (">=", "min_short_line_ratio"),
            also=("short_line_chars",)),
    _reason("fineweb_dup_line_chars", "share of the characters (newlines left out) in lines repeating an earlier one",
            (">=", "min_dup_line_char_ratio")),
    _reason("fineweb_newline_ratio", "newlines per word", (">", "max_newline_word_ratio")),
), verdict=fineweb.fineweb_quality, base=False, enabled=False)

PPL = Filter("ppl", (
    _reason("ppl", "perplexity over the non-blank lines", (">", "max_perplexity"), also=("normalize",)),
), verdict=ppl.perplexity_filter, base=True, enabled=False)

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
