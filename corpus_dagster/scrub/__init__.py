"""PII scrub (data.05): typed placeholders for e-mails, phones, cards, IPs and keys; pure logic, no dagster."""

from corpus_dagster.scrub.api import (
    PII_TYPES,
    PLACEHOLDERS,
    PRIORITY,
    ScrubOutcome,
    count_placeholders,
    default_pii_config,
    find_pii,
    find_pii_batch,
    resolve_overlaps,
    scrub_text,
    scrub_texts,
)

__all__ = [
    "PII_TYPES",
    "PLACEHOLDERS",
    "PRIORITY",
    "ScrubOutcome",
    "count_placeholders",
    "default_pii_config",
    "find_pii",
    "find_pii_batch",
    "resolve_overlaps",
    "scrub_text",
    "scrub_texts",
]
