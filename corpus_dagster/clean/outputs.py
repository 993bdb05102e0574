"""Reading the clean stage's outputs: the only way other stages and the Dagster layer see them.

Kept apart from the clean driver so that a stage which reads clean documents (MinHash, dedup, the
analysis, scrub, release) loads the record and file helpers only, not the cleaner with its language ID
and quality filters; a damaged file is rebuilt through the driver, imported when that happens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings

STAGE = "clean"


def clean_record(layout: Layout, source_id: str) -> StageRecord:
    """The clean stage record of a source (UpstreamMissing when the source was never cleaned)."""
    return records.require_record(layout.stage(STAGE, source_id), "clean_documents", source_id)


def clean_doc_files(layout: Layout, source_id: str, resolved: Settings | Mapping[str, Any] | None = None) -> list[Path]:
    """The clean document files of one source, in k order (schema CLEAN_DOC_SCHEMA), checked against the
    clean record. With `resolved`, a damaged file is rebuilt here (the clean stage reruns for that source)."""
    return records.record_files(layout.stage(STAGE, source_id), clean_record(layout, source_id), "docs",
                                _rebuild(layout, source_id, resolved))


def reject_files(layout: Layout, source_id: str, resolved: Settings | Mapping[str, Any] | None = None) -> list[Path]:
    """The rejects files of one source, in k order (schema REJECT_SCHEMA); `resolved` as in clean_doc_files."""
    return records.record_files(layout.stage(STAGE, source_id), clean_record(layout, source_id), "rejects",
                                _rebuild(layout, source_id, resolved))


def _rebuild(layout: Layout, source_id: str, resolved: Settings | Mapping[str, Any] | None) -> Callable[[], None] | None:
    """The clean stage of one source as a rebuild for `records.record_files`, when its key is unchanged (a
    changed raw input or config is not this reader's to rebuild: the damage is refused instead)."""
    if resolved is None:
        return None

    def rebuild() -> None:
        from corpus_dagster.clean.driver import clean_key, run_clean_source  # the cleaner, only to rebuild

        if clean_key(layout, source_id, resolved)[0] == clean_record(layout, source_id).key:
            run_clean_source(layout, resolved, source_id)

    return rebuild
