"""Reading the scrub stage's outputs: the only way the publish, review and release stages, explain and the
Dagster layer see them.

The scrub record and scrubbed files of a source, the placeholder counts, and what other stages read of the PII
scan: the types (`PII_TYPES`, manifest order), their placeholders and the detector the publish checks run over
published text (`find_pii_batch`). Those load the detectors, so they are imported on first use; a damaged file
is rebuilt through the driver, imported when that happens (the driver never imports this module).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.lazy import lazy_names
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings

if TYPE_CHECKING:
    from corpus_dagster.scrub.api import PII_TYPES, PLACEHOLDERS, find_pii_batch

__all__ = ["PII_TYPES", "PLACEHOLDERS", "STAGE", "find_pii_batch", "pii_counts", "scrub_record", "scrubbed_files"]

STAGE = "scrub"  # the scrub driver's stage folder (`scrub.driver.STAGE`)
__getattr__, _ = lazy_names(__name__, {"corpus_dagster.scrub.api": "PII_TYPES PLACEHOLDERS find_pii_batch"})


def scrub_record(layout: Layout, source_id: str) -> StageRecord:
    """The scrub record of a source (UpstreamMissing when it was never scrubbed)."""
    return records.require_record(layout.stage(STAGE, source_id), "scrubbed", source_id)


def scrubbed_files(layout: Layout, source_id: str,
                   settings: Settings | None = None) -> list[Path]:
    """The scrubbed document files of one source, in k order, checked against the scrub record. With
    `settings`, a damaged file is rebuilt here (the scrub reruns; sources whose outputs are intact stay cached)."""

    def rebuild() -> None:
        from corpus_dagster.scrub.driver import run_scrub  # the scrub, only to rebuild

        run_scrub(layout, settings)

    return records.record_files(layout.stage(STAGE, source_id), scrub_record(layout, source_id), "docs",
                                None if settings is None else rebuild)


def pii_counts(layout: Layout, source_ids: list[str]) -> dict[str, int]:
    """Placeholders the scrub inserted, per type, over the given sources."""
    from corpus_dagster.scrub.api import PII_TYPES

    total: Counter[str] = Counter()
    for sid in source_ids:
        total.update(scrub_record(layout, sid).stats["pii"])
    return {t: total[t] for t in PII_TYPES}
