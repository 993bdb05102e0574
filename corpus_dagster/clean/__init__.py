"""Clean stage logic (data.02-03): repair, language ID and quality filters; no Dagster import.

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.clean.cleaner": (
        "CleanOutcome FILTER_KEYS REASON_CODES REPAIR_KINDS RULE_ORDER "
        "clean_texts filter_key reason_counts"
    ),
})
