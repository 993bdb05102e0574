"""The minhash stage's name, code version and key: what both its driver and its read face (`minhash.outputs`)
need, in a module below both, so the read face can reach the driver (to compute a missing signature file)
without the two importing each other."""

from __future__ import annotations

from typing import Any

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Stage
from corpus_dagster.minhash.signatures import SIGNATURE_SETTINGS

SIGNATURES = "minhash"
SIGNATURES_CODE_VERSION = "2"
SIGNATURES_STAGE = Stage(SIGNATURES, SIGNATURES_CODE_VERSION)


def signature_key(layout: Layout, source_id: str,
                  settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of a source's signatures: the clean output's key and the signature settings."""
    inputs = {"clean": clean_record(layout, source_id).key}
    return SIGNATURES_STAGE.key(inputs, output_settings(settings.resolved, "near_dup", SIGNATURE_SETTINGS)), inputs
