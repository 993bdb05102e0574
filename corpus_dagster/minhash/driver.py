"""The minhash stage's driver: per-source MinHash signatures, all their I/O.

`run_signatures` writes `stages/minhash/<source_id>/<key>/signatures.parquet`, keyed by the clean output's
key and the signature settings the signature logic declares (`SIGNATURE_SETTINGS`, scheme included).
The readers below are how the dedup and analysis stages see a source's signatures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus_dagster.clean.outputs import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, is_current, run_cached
from corpus_dagster.minhash.signatures import SIGNATURE_SETTINGS, compute_signatures
from corpus_dagster.minhash.signatures import (
    signature_settings as signature_settings,  # a signature file's reader
)

SIGNATURES = "minhash"
SIGNATURES_CODE_VERSION = "2"
SIGNATURES_STAGE = Stage(SIGNATURES, SIGNATURES_CODE_VERSION)


def signature_key(layout: Layout, source_id: str, settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of a source's signatures: the clean output's key and the signature settings."""
    inputs = {"clean": clean_record(layout, source_id).key}
    return SIGNATURES_STAGE.key(inputs, output_settings(settings.resolved, "near_dup", SIGNATURE_SETTINGS)), inputs


@records.locked(lambda a: f"minhash.{a['source_id']}")
def run_signatures(layout: Layout, settings: Settings, source_id: str,
                   log: Log | None = None) -> dict[str, Any]:
    """Hash one source's clean documents, unless the same clean output was hashed with the same settings."""
    key, inputs = signature_key(layout, source_id, settings)
    folder = layout.stage(SIGNATURES, source_id)

    def compute(key: str) -> Outputs:
        name = f"{key}/signatures.parquet"
        (folder / key).mkdir(exist_ok=True)
        stats = compute_signatures(clean_doc_files(layout, source_id, settings), folder / name, settings.near_dup,
                                   settings.workers)
        if log:
            log(f"{source_id}: {stats['docs']} signatures ({stats['no_signature']} without one)")
        return Outputs([name], files={"signatures": [name]}, stats=stats)

    key_settings = output_settings(settings.resolved, "near_dup", SIGNATURE_SETTINGS)
    return run_cached(folder, SIGNATURES_STAGE, inputs, key_settings, compute, key=key).summary()


def signatures_current(layout: Layout, source_id: str, settings: Settings) -> bool:
    """Whether the source's signatures are recorded under the key its clean output and settings give now."""
    return is_current(layout.stage(SIGNATURES, source_id), signature_key(layout, source_id, settings)[0])


def signature_file(layout: Layout, source_id: str) -> Path:
    """The current signature file of a source."""
    folder = layout.stage(SIGNATURES, source_id)
    record = records.require_record(folder, "minhash_signatures", source_id)
    return records.record_files(folder, record, "signatures")[0]
