"""Reading the ingest stage's outputs: the only way other stages, explain and the Dagster layer see them.

Raw parts and their record, the per-document info (fetch time, kept ledger fields), the last fetch record,
and the ingest names a reader needs (how a ledger URL is normalized, how a file is cached, how a source
file is read again). Kept apart from the ingest driver, so a reader does not load the fetch; the readers of
source files (`Doc`, `iter_file`, `Selection`, `cache_name`, `normalize_url`) load on first use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core import records
from corpus_dagster.core.documents import INFO_DOC_ID, INFO_FETCHED_AT
from corpus_dagster.core.errors import StageOutputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.lazy import lazy_names
from corpus_dagster.core.records import StageRecord
from corpus_dagster.ingest.raw_parts import read_raw_part

if TYPE_CHECKING:
    from corpus_dagster.ingest.files import cache_name, normalize_url
    from corpus_dagster.ingest.readers import Doc, iter_file
    from corpus_dagster.ingest.selection import Selection

__all__ = [
    "Doc", "Selection", "cache_name", "document_info", "iter_file", "load_record", "normalize_url", "raw_parts",
    "read_raw_part", "selection_counts",
]

# names read from modules that load fsspec and the source readers: imported when first asked for. `files`:
# ledger urls as the raw parts name them, a remote file's name in the downloads folder; `readers`: a source
# file's documents as the fetch read them; `selection`: a ledger row's `where` and `keep_fields`
__getattr__, _ = lazy_names(__name__, {
    "corpus_dagster.ingest.files": "cache_name normalize_url",
    "corpus_dagster.ingest.readers": "Doc iter_file",
    "corpus_dagster.ingest.selection": "Selection",
})


def load_record(path: Path) -> dict[str, Any] | None:
    """The last completed fetch record of a source (`_FETCH.json`: each file's URL, sha256, size and
    identity), if any."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def raw_parts(layout: Layout, source_id: str) -> tuple[list[Path], list[int], StageRecord]:
    """The current raw parts of a source in path order, documents per part, and the ingest record."""
    folder = layout.raw_source(source_id)
    record = records.require_record(folder, "raw_documents", source_id)
    paths = records.record_files(folder, record, "parts")
    return paths, list(record.stats["part_docs"]), record


def selection_counts(layout: Layout, source_ids: list[str]) -> dict[str, int]:
    """Documents each source's ledger `where` excluded at its current fetch (0 without `where`), by source id."""
    counts = {}
    for sid in source_ids:
        record = records.require_record(layout.raw_source(sid), "raw_documents", sid)
        counts[sid] = int(record.stats.get("excluded_by_where", 0))
    return counts


def document_info(layout: Layout, source_id: str) -> pa.Table:
    """Per document of a source, in k order: `_doc_id`, `_fetched_at` (RFC 3339) and the ledger's keep_fields
    under their own names (the info columns' leading underscore keeps them apart from any source field).

    Holds ids and kept fields only, never texts. Every document of a fetch shares its fetch time.
    """
    folder = layout.raw_source(source_id)
    record = records.require_record(folder, "raw_documents", source_id)
    n = int(record.stats["docs"])
    fetched = pa.repeat(pa.scalar(record.stats["fetched_at"], type=pa.string()), n)
    if not record.files.get("fields"):
        from corpus_dagster.ingest.selection import document_ids  # polars, only for a source without fields

        return pa.table({INFO_DOC_ID: document_ids(source_id, n), INFO_FETCHED_AT: fetched})
    (path,) = records.record_files(folder, record, "fields")
    table = pq.read_table(path)
    if table.column_names[:1] == ["id"]:  # written before the info columns had their own names
        table = table.rename_columns([INFO_DOC_ID, *table.column_names[1:]])
    if table.num_rows != n or table.column_names[:1] != [INFO_DOC_ID]:
        raise StageOutputError(
            f"{path}: {table.num_rows} rows for {n} documents of source {source_id!r}; rerun raw_documents[{source_id}]"
        )
    return table.add_column(1, INFO_FETCHED_AT, fetched)
