"""PII scrub (data.05): typed placeholders for e-mails, phones, cards, IPs and keys; pure logic, no dagster.

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "PII_TYPES": "corpus_dagster.scrub.api",
    "PLACEHOLDERS": "corpus_dagster.scrub.api",
    "PRIORITY": "corpus_dagster.scrub.api",
    "ScrubOutcome": "corpus_dagster.scrub.api",
    "count_placeholders": "corpus_dagster.scrub.api",
    "default_pii_config": "corpus_dagster.scrub.api",
    "find_pii": "corpus_dagster.scrub.api",
    "find_pii_batch": "corpus_dagster.scrub.api",
    "resolve_overlaps": "corpus_dagster.scrub.api",
    "scrub_text": "corpus_dagster.scrub.api",
    "scrub_texts": "corpus_dagster.scrub.api",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
