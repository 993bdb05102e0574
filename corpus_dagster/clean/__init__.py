"""Clean stage logic (data.02-03): repair, language ID and quality filters; no Dagster import."""

from corpus_dagster.clean.cleaner import (
    FILTER_KEYS,
    REASON_CODES,
    REPAIR_KINDS,
    RULE_ORDER,
    CleanOutcome,
    clean_texts,
    filter_key,
    reason_counts,
)

__all__ = [
    "FILTER_KEYS", "REASON_CODES", "REPAIR_KINDS", "RULE_ORDER", "CleanOutcome", "clean_texts",
    "filter_key", "reason_counts",
]
