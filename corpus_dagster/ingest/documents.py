"""Every document of a source's files, in id order, into raw parts; unreadable records into the quarantine."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from corpus_dagster.core.ledger import Source
from corpus_dagster.core.progress import Progress
from corpus_dagster.ingest.files import ResolvedFile
from corpus_dagster.ingest.raw_parts import PartWriter
from corpus_dagster.ingest.readers import Doc, iter_file
from corpus_dagster.ingest.selection import BATCH_ROWS, Selection

# One local copy of a source file: the file, where it is read from, its sha256 and its identity (ukey).
LocalFile = tuple[ResolvedFile, str, str, str]


def stream_documents(
    locals_: list[LocalFile],
    source: Source,
    selection: Selection | None,
    max_doc_bytes: int,
    fetched_at: str,
    writer: PartWriter,
    quarantine: Any,
    quarantined: Counter[str],
    progress: Progress | None = None,
) -> None:
    """Read every file of a source in order into `writer`; unreadable records go to the quarantine file.

    With a selection, readable documents are gathered into batches of BATCH_ROWS: `where` is evaluated on
    a batch at once, and only the documents it keeps are written (so only they get ids).
    """
    batch: list[Doc] = []
    progress = progress or Progress(None, "fetch")

    def flush() -> None:
        assert selection is not None
        keep = selection.select([d.fields or {} for d in batch])
        for doc, kept in zip(batch, keep, strict=True):
            if kept:
                writer.write(doc.url, fetched_at, source.license_spdx, doc.text)
                progress.update(1, len(doc.text))
        batch.clear()

    for rf, local_path, _sha, _uk in locals_:
        for item in iter_file(local_path, source, rf.url, max_doc_bytes, selection):
            if not isinstance(item, Doc):
                quarantined[item.reason] += 1
                quarantine.write(json.dumps(item.to_json(source.source_id), ensure_ascii=False) + "\n")
            elif selection is None:
                writer.write(item.url, fetched_at, source.license_spdx, item.text)
                progress.update(1, len(item.text))
            else:
                batch.append(item)
                if len(batch) >= BATCH_ROWS:
                    flush()
    if selection is not None:
        if batch:
            flush()
        selection.check_seen()
