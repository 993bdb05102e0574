"""Per-stage table files: their Arrow schemas and how a later stage finds the current ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.atomic import atomic_path
from corpus_dagster.layout import Layout
from corpus_dagster.publish.schema import DOCUMENT_FIELDS

# The clean stage's per-part document files (stages/clean/<source_id>/<key>/docs-<nnnnn>.parquet), in
# document-id k order within a source. Later per-source stages keep these columns and this order.
CLEAN_DOC_SCHEMA = pa.schema([*DOCUMENT_FIELDS, ("repairs", pa.list_(pa.string()))])

# Rejects: every document a clean filter dropped, with the rule that fired first and the value it measured.
REJECT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("url", pa.string()),
        ("reason", pa.string()),
        ("value", pa.float64()),
        ("text", pa.string()),
    ]
)

CURRENT = "_CURRENT.json"
INTERMEDIATE_ROW_GROUP = 2048  # small row groups let the shard writer read only the rows it needs


def write_table(table: pa.Table, path: Path) -> None:
    """Write an intermediate per-part Parquet table atomically with fixed settings."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=1, row_group_size=INTERMEDIATE_ROW_GROUP)


def read_current(stage_dir: Path) -> dict[str, Any] | None:
    """The `_CURRENT.json` record of a per-source stage folder, or None when the stage never completed."""
    path = stage_dir / CURRENT
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def stage_files(layout: Layout, stage: str, source_id: str, kind: str = "docs") -> list[Path]:
    """Files of kind `docs` or `rejects` of a completed per-source stage, in k order.

    Raises FileNotFoundError naming the stage and source when the stage has not completed for it.
    """
    folder = layout.stage(stage, source_id)
    record = read_current(folder)
    if record is None:
        raise FileNotFoundError(f"stage {stage!r} has not completed for source {source_id!r} (no {folder / CURRENT})")
    return [folder / name for name in record[kind]]


def clean_doc_files(layout: Layout, source_id: str) -> list[Path]:
    """The clean stage's document files of one source, in k order (schema CLEAN_DOC_SCHEMA)."""
    return stage_files(layout, "clean", source_id, "docs")


def stage_stats(layout: Layout, stage: str, source_id: str) -> dict[str, Any]:
    """The `stats` object of a completed per-source stage."""
    record = read_current(layout.stage(stage, source_id))
    if record is None:
        raise FileNotFoundError(f"stage {stage!r} has not completed for source {source_id!r}")
    return record.get("stats", {})
