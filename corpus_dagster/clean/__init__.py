"""Clean stage logic (data.02-03): repair, language ID and quality filters; no Dagster import.

The cleaner's names are loaded on first use, so that importing a light module of this package (the
readers of clean outputs in `outputs`) does not load language ID and the filters.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "FILTER_KEYS", "REASON_CODES", "REPAIR_KINDS", "RULE_ORDER", "CleanOutcome", "clean_texts",
    "filter_key", "reason_counts",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module("corpus_dagster.clean.cleaner"), name)
    raise AttributeError(f"module 'corpus_dagster.clean' has no attribute {name!r}")
