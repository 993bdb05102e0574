"""PII scrub (data.05): typed placeholders for e-mails, phones, cards, IPs and keys; pure logic, no dagster.

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.scrub.api": (
        "PII_TYPES PLACEHOLDERS PRIORITY ScrubOutcome count_placeholders "
        "default_pii_config find_pii find_pii_batch resolve_overlaps "
        "scrub_text scrub_texts"
    ),
})
