"""The ingest stage's driver: fetch one ledger source into raw parts, and the readers of raw parts.

Resolve the source's globs, make every file local and known by checksum (pins verified, files whose
identity and checksum are known from the last fetch neither downloaded nor hashed again), then stream every
document into parts under `corpus/raw/<source_id>/<yyyymmdd>/`, cached under a key of the files' content
hashes, the ledger fields that shape records and the ingest settings. Other stages read raw parts only
through `ingest.outputs`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from corpus_dagster.core import records
from corpus_dagster.core.allowed_locations import check_allowed_locations
from corpus_dagster.core.atomic import atomic_dir, atomic_write_bytes, remove_stale_temps
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import ChecksumMismatch
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.core.parquet import TABLE, write_parquet
from corpus_dagster.core.progress import Log, Progress
from corpus_dagster.core.settings import IngestSettings, Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.ingest.clock import fetch_time
from corpus_dagster.ingest.documents import LocalFile, stream_documents
from corpus_dagster.ingest.download import download
from corpus_dagster.ingest.files import ResolvedFile, cache_name, file_ukey, resolve_files
from corpus_dagster.ingest.outputs import load_record
from corpus_dagster.ingest.pins import checked_pins
from corpus_dagster.ingest.raw_parts import PartWriter, part_name
from corpus_dagster.ingest.readers import text_selection_error
from corpus_dagster.ingest.selection import Selection

QUARANTINE_FILE = "_QUARANTINE.jsonl"
FIELDS_FILE = "_FIELDS.parquet"  # the ledger's keep_fields per document id, beside the parts
CODE_VERSION = "3"  # bump when a change here changes raw part bytes
SETTINGS = ("part_max_bytes", "part_max_docs", "max_doc_bytes")  # the ingest settings that shape raw parts
INGEST = Stage("ingest", CODE_VERSION)

LOGGER = logging.getLogger(__name__)


@dataclass
class FetchResult:
    """What one fetch did, for the asset metadata."""

    source_id: str
    date: str
    files: int = 0
    files_fetched: int = 0
    files_skipped: int = 0
    docs: int = 0
    bytes_uncompressed: int = 0
    parts: int = 0
    unchanged: bool = False
    quarantined: dict[str, int] = field(default_factory=dict)
    excluded_by_where: int = 0
    seconds: float = 0.0
    key: str = ""  # the ingest stage key (the asset's data version)


@records.locked(lambda a: f"ingest.{a['source'].source_id}")
def run_fetch(layout: Layout, settings: Settings, source: Source,
              log: Log | None = None) -> FetchResult:
    """`fetch_source` as the graph runs it: the config's ingest section and progress interval, under the
    source's ingest lock (a second run on the same root waits, then finds the parts unchanged)."""
    return fetch_source(source, layout, settings.ingest, log=log, progress_interval_s=float(settings.progress.interval_s))


def fetch_source(
    source: Source, layout: Layout, ingest_cfg: IngestSettings, now: dt.datetime | None = None, log: Log | None = None,
    progress_interval_s: float | None = None,
) -> FetchResult:
    """Fetch one source into corpus/raw/<source_id>/<yyyymmdd>/ parts. Resumable and atomic.

    Files whose checksum already matches (by the pin or the last fetch record, and unchanged size/mtime/etag)
    are not downloaded again. When the stage key (file content hashes, ledger fields, settings) equals the
    record's and the parts are intact, nothing is rewritten.
    """
    start = time.monotonic()
    if source.format == "text" and (source.where is not None or source.keep_fields):
        raise text_selection_error(source)
    selection = Selection.for_source(source)  # a predicate that does not parse fails before any file is read
    check_allowed_locations(ingest_cfg.allowed_prefixes, [source], layout.ledger)  # before a file is listed
    now = now or fetch_time()
    date = now.strftime("%Y%m%d")
    fetched_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    record_path = layout.fetch_record(source.source_id)
    record = load_record(record_path) or {}
    files = resolve_files(source, ingest_cfg.timeout_s)
    result = FetchResult(source.source_id, date, files=len(files))
    locals_ = _make_local(source, files, layout, record, result)

    settings = output_settings({"ingest": ingest_cfg.to_dict()}, "ingest", SETTINGS)
    file_entries = [{"url": rf.url, "sha256": sha, "bytes": _size(lp), "ukey": uk} for rf, lp, sha, uk in locals_]
    raw_dir = layout.raw_source(source.source_id)

    def compute(key: str) -> Outputs:
        """Stream every document into parts inside a temp folder, renamed into place at the end."""
        quarantined: Counter[str] = Counter()
        with atomic_dir(raw_dir / date) as tmp:
            writer = PartWriter(tmp, ingest_cfg.part_max_bytes, ingest_cfg.part_max_docs)
            with open(tmp / QUARANTINE_FILE, "w", encoding="utf-8", errors="backslashreplace") as qfh:
                progress = Progress(log if progress_interval_s else None, f"fetch {source.source_id}",
                                    interval_s=progress_interval_s or 0.0)
                stream_documents(
                    locals_, source, selection, ingest_cfg.max_doc_bytes, fetched_at, writer, qfh, quarantined,
                    progress,
                )
                progress.finish()
            part_docs = writer.close()
            if selection is not None and selection.keep_fields:
                write_parquet(selection.fields_table(), tmp / FIELDS_FILE, TABLE)
        atomic_write_bytes(record_path, _dump({"source_id": source.source_id, "files": file_entries}))
        outputs = {"parts": [f"{date}/{part_name(i)}" for i in range(len(part_docs))]}
        if selection is not None and selection.keep_fields:
            outputs["fields"] = [f"{date}/{FIELDS_FILE}"]
        stats = {
            "date": date,
            "fetched_at": fetched_at,
            "part_docs": part_docs,
            "docs": sum(part_docs),
            "bytes_uncompressed": writer.bytes_uncompressed,
            "quarantined": dict(sorted(quarantined.items())),
            "excluded_by_where": selection.excluded if selection is not None else 0,
        }
        return Outputs([n for names in outputs.values() for n in names], outputs, stats)

    # Begun before the cache check too, so a fetch that finds its parts cached still clears the temp folder
    # of a killed fetch. The parts live in date folders, not key folders: only other dates are removed.
    records.begin(raw_dir)
    run = run_cached(raw_dir, INGEST, ingest_inputs(source, file_entries), settings, compute, prune=False)
    if not run.cached:
        for other in raw_dir.iterdir():  # keep only the current fetch date
            if other.is_dir() and other.name != date and other.name.isdigit():
                shutil.rmtree(other, ignore_errors=True)
    elif record.get("files") != file_entries:  # same bytes, new mtime or ETag: remember the new identities
        atomic_write_bytes(record_path, _dump({**record, "files": file_entries}))
    result.key, result.unchanged = run.key, run.cached
    result.date = run.stats["date"]
    result.docs = run.stats["docs"]
    result.parts = len(run.record.files["parts"])
    result.bytes_uncompressed = run.stats["bytes_uncompressed"]
    result.quarantined = run.stats.get("quarantined", {})
    result.excluded_by_where = run.stats.get("excluded_by_where", 0)
    result.seconds = time.monotonic() - start
    return result


def _make_local(
    source: Source, files: list[ResolvedFile], layout: Layout, record: dict[str, Any], result: FetchResult,
) -> list[LocalFile]:
    """Make every file local and known by checksum, verifying pins before anything is written.

    A file is neither downloaded nor hashed again when the last fetch record knows its identity (size,
    mtime, ETag) and its cached copy, and the checksum recorded then matches the pin (if any).
    """
    previous = {f["url"]: f for f in record.get("files", [])}
    pins = checked_pins(source, [rf.url for rf in files], layout.ledger)  # a pin naming no file is a LedgerError
    remove_stale_temps(layout.downloads(source.source_id))  # half-downloaded files of a killed run
    locals_: list[LocalFile] = []
    for rf in files:
        ukey = file_ukey(rf)
        prev = previous.get(rf.url)
        pinned = pins.get(rf.url)
        cached = layout.downloads(source.source_id) / cache_name(rf.url)
        local_path = rf.path if rf.is_local else str(cached)
        reusable = prev is not None and prev.get("ukey") == ukey and (rf.is_local or cached.exists())
        if reusable and (pinned is None or prev["sha256"] == pinned):
            sha = prev["sha256"]
            result.files_skipped += 1
        else:
            sha = sha256_file(rf.path) if rf.is_local else download(rf, cached, source.source_id)
            result.files_fetched += 1
        if pinned is not None and sha != pinned:
            if not rf.is_local:
                cached.unlink(missing_ok=True)
            raise ChecksumMismatch(source.source_id, f"checksum mismatch: ledger pins sha256 {pinned}, got {sha}", file=rf.url)
        LOGGER.debug(f"{source.source_id}: {rf.url} sha256={sha[:12]} ({'skipped' if reusable else 'fetched'})")
        locals_.append((rf, local_path, sha, ukey))
    return locals_


def ingest_inputs(source: Source, file_entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What the raw parts are made of: every file's URL and content hash, and the ledger fields that shape records.

    File identities (size, mtime, ETag) are left out on purpose: touching a file, or an ETag that changes
    while the bytes do not, must not recompute anything. `where` and `keep_fields` enter only when the row
    sets them, so the keys of sources without a selection stay what they were.
    """
    row = source.to_json()
    ledger = {k: row[k] for k in ("format", "text_field", "url_field", "license_spdx")}
    ledger.update({k: row[k] for k in ("where", "keep_fields") if k in row})
    return {"files": [[f["url"], f["sha256"]] for f in file_entries], "ledger": ledger}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def _dump(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
