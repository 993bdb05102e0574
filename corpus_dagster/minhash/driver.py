"""The minhash stage's driver: per-source MinHash signatures, all their I/O.

`run_signatures` writes `stages/minhash/<source_id>/<key>/signatures.parquet`, keyed by the clean output's
key and the signature settings the signature logic declares (`SIGNATURE_SETTINGS`, scheme included).
The dedup and analysis stages see a source's signatures through `minhash.outputs`.
"""

from __future__ import annotations

from typing import Any

from corpus_dagster.clean.outputs import clean_doc_files
from corpus_dagster.core import records
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, run_cached
from corpus_dagster.minhash.key import SIGNATURES, SIGNATURES_STAGE, signature_key
from corpus_dagster.minhash.signatures import SIGNATURE_SETTINGS, compute_signatures


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
