"""Reading the minhash stage's outputs: the only way the dedup and analysis stages and the Dagster layer see
a source's signatures.

A signature file, whether it is current, the settings a file records and the signature settings that enter
its key. Kept apart from the driver: a missing or stale file is computed through the driver, imported when
that happens (the driver never imports this module).
"""

from __future__ import annotations

from pathlib import Path

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import is_current
from corpus_dagster.minhash.key import SIGNATURES, SIGNATURES_CODE_VERSION, signature_key
from corpus_dagster.minhash.signatures import SIGNATURE_SETTINGS, signature_settings

__all__ = [
    "SIGNATURES", "SIGNATURES_CODE_VERSION", "SIGNATURE_SETTINGS", "signature_file", "signature_key",
    "signature_settings", "signatures_current",
]


def signatures_current(layout: Layout, source_id: str, settings: Settings) -> bool:
    """Whether the source's signatures are recorded under the key its clean output and settings give now."""
    return is_current(layout.stage(SIGNATURES, source_id), signature_key(layout, source_id, settings)[0])


def signature_file(layout: Layout, source_id: str, settings: Settings | None = None) -> Path:
    """The current signature file of a source. With `settings`, a missing or stale one (not under the key the
    clean output and settings give now) is computed here first: the minhash stage runs for that source."""
    if settings is not None and not signatures_current(layout, source_id, settings):
        from corpus_dagster.minhash.driver import run_signatures  # the hashing, only to compute the file

        run_signatures(layout, settings, source_id)
    folder = layout.stage(SIGNATURES, source_id)
    record = records.require_record(folder, "minhash_signatures", source_id)
    return records.record_files(folder, record, "signatures")[0]
