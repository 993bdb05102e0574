"""Fetch one ledger source into raw parts: resolve globs, verify/record checksums, stream into parts."""

from __future__ import annotations

import datetime as dt
import glob as globmod
import hashlib
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core import records
from corpus_dagster.core.atomic import (
    WriteError,
    atomic_dir,
    atomic_path,
    atomic_write_bytes,
    remove_stale_temps,
)
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import ChecksumMismatch, SourceError, StageOutputError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.core.parquet import TABLE, write_parquet
from corpus_dagster.core.progress import Progress, interval_of
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.ingest.raw_parts import PartWriter, part_name
from corpus_dagster.ingest.readers import Doc, iter_file, text_selection_error
from corpus_dagster.ingest.selection import BATCH_ROWS, Selection, document_ids

QUARANTINE_FILE = "_QUARANTINE.jsonl"
FIELDS_FILE = "_FIELDS.parquet"  # the ledger's keep_fields per document id, beside the parts
CODE_VERSION = "3"  # bump when a change here changes raw part bytes
SETTINGS = ("part_max_bytes", "part_max_docs", "max_doc_bytes")  # the ingest settings that shape raw parts


@dataclass(frozen=True)
class ResolvedFile:
    """One concrete file of a source after glob expansion."""

    url: str
    fs: Any
    path: str

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file://")


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


def storage_options(url: str, timeout_s: float) -> dict[str, Any]:
    """Explicit timeouts for remote filesystems, so a dead server fails instead of hanging.

    For HTTP they bound connecting and each wait for data, not the whole request: a download is one
    streamed GET, and a large file must not fail only because it takes longer than `timeout_s` to arrive.
    """
    if url.startswith(("http://", "https://")):
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s)
        return {"client_kwargs": {"timeout": timeout}}
    return {}


def normalize_url(url: str) -> str:
    """A bare path means a local file: turn it into an absolute file:// URL."""
    if "://" in url:
        return url
    return "file://" + os.path.abspath(os.path.expanduser(url))


def resolve_files(source: Source, timeout_s: float = 300) -> list[ResolvedFile]:
    """Expand the source's URLs and globs into files, in byte order of their URL (the path order of ids)."""
    found: dict[str, ResolvedFile] = {}
    for raw_url in source.urls:
        url = normalize_url(raw_url)
        try:
            fs, path = fsspec.core.url_to_fs(url, **storage_options(url, timeout_s))
        except (ImportError, ValueError) as exc:
            raise SourceError(
                source.source_id, f"cannot open {url}: {exc} (remote schemes need `pip install corpus_dagster[remote]`)"
            ) from exc
        try:
            if globmod.has_magic(path):
                entries = fs.glob(path, detail=True)
                paths = [p for p, info in sorted(entries.items()) if _is_file(source, fs, p, info)]
                if not paths:
                    kinds = Counter(str(info.get("type")) for info in entries.values())
                    seen = f" (matched only: {dict(sorted(kinds.items()))})" if entries else ""
                    raise SourceError(source.source_id, f"no file matches {url}{seen}")
            else:
                if _is_local(fs) and os.path.islink(path):
                    _is_file(source, fs, path, {"type": "other", "islink": True})  # a broken link fails here
                elif _is_http(fs):
                    _check_http_file(source, fs, path, url)
                elif not fs.exists(path) or fs.isdir(path):
                    raise SourceError(source.source_id, f"file not found: {url} does not exist")
                paths = [path]
        except SourceError:
            raise
        except Exception as exc:  # network errors, permission errors: name the URL
            raise SourceError(source.source_id, f"cannot list {url}: {type(exc).__name__}: {exc}") from exc
        for p in paths:
            file_url = fs.unstrip_protocol(p)
            _check_name(source, file_url)
            # A symlink keeps its own URL (ids and document URLs name what the ledger matched) but is read,
            # hashed and stat'ed through its target, so a retargeted link or an edited target is seen.
            target = os.path.realpath(p) if _is_local(fs) and os.path.islink(p) else p
            found.setdefault(file_url, ResolvedFile(file_url, fs, target))
    return [found[u] for u in sorted(found)]


def _is_local(fs: Any) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


def _is_http(fs: Any) -> bool:
    return bool({"http", "https"} & set(fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)))


IDENTITY = {"Accept-Encoding": "identity"}  # the bytes as stored, so they count up to the Content-Length


def _check_http_file(source: Source, fs: Any, path: str, url: str) -> None:
    """An HTTP URL names a file when the server answers its HEAD (or GET headers): fsspec's exists/isdir would
    GET it, and isdir reads a whole body without a Content-Type into memory to look for links. Only an HTML
    page can be a directory listing, so only that is checked for links."""
    try:
        info = fs.info(path)  # a HEAD (fsspec falls back to a GET's headers), with Accept-Encoding: identity
    except FileNotFoundError as exc:
        cause = exc.__cause__
        if cause is None or getattr(cause, "status", None) == 404:
            raise SourceError(source.source_id, f"file not found: {url} does not exist") from exc
        raise SourceError(source.source_id, f"cannot open {url}: {type(cause).__name__}: {_first_line(cause)}") from exc
    if info.get("mimetype") == "text/html" and fs.isdir(path):
        raise SourceError(source.source_id, f"file not found: {url} is an HTML page listing files; use a glob over them")


def _is_file(source: Source, fs: Any, path: str, info: dict[str, Any]) -> bool:
    """Whether a listed entry is a file to read: plain files, and symlinks (fsspec lists those as `other`)
    whose target is a file. A symlink whose target is missing is an error naming both."""
    if info.get("type") == "file":
        return True
    if not (info.get("islink") and _is_local(fs)):
        return False
    if not os.path.exists(path):
        raise SourceError(
            source.source_id,
            f"broken symlink: {fs.unstrip_protocol(path)} points to {os.readlink(path)!r}, which does not exist; "
            f"fetch the target (e.g. `git annex get`, `dvc pull`) or remove the link",
        )
    return os.path.isfile(path)


def _check_name(source: Source, file_url: str) -> None:
    """A file name that is not valid UTF-8 cannot become a document URL: name it instead of failing later."""
    try:
        file_url.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SourceError(
            source.source_id, f"file name is not valid UTF-8: {file_url.encode('utf-8', 'backslashreplace')!r}; rename it"
        ) from exc


def file_ukey(rf: ResolvedFile) -> str:
    """A cheap identity of the file's current version (size, mtime, etag...), to skip unchanged files."""
    try:
        info = rf.fs.info(rf.path)
    except Exception as exc:
        raise SourceError("?", f"cannot stat {rf.url}: {exc}") from exc
    keep = {k: v for k, v in info.items() if k != "name" and isinstance(v, str | int | float) and k not in ("ino", "nlink")}
    return json.dumps(keep, sort_keys=True, default=str)


def download(rf: ResolvedFile, target: Path, source_id: str) -> str:
    """Stream a remote file into the cache atomically, hashing as it goes; returns its sha256.

    Over HTTP the bytes received must be the size the server announced: a connection closed early without
    an error would otherwise pass for the whole file. Any failure keeps nothing of the file.
    """
    h = hashlib.sha256()
    got = Transfer()
    try:
        src = _open_remote(rf, got)
        with src, atomic_path(target) as tmp, open(tmp, "wb") as dst:
            got.announced = _announced_size(src, got.announced)
            while chunk := src.read(1 << 20):
                got.received += len(chunk)
                h.update(chunk)
                dst.write(chunk)
            if got.announced is not None and got.received != got.announced:
                raise SizeMismatch(got.received, got.announced)
    except WriteError:
        raise  # the local disk, not the source: the error names the cache path
    except Exception as exc:
        raise SourceError(source_id, "download failed: " + _download_failure(exc, got), file=rf.url) from exc
    return h.hexdigest()


@dataclass
class Transfer:
    """What a download knows of its progress, for the message when it fails."""

    received: int = 0  # bytes handed to the cache file
    announced: int | None = None  # bytes the server said it would send (HTTP only)


class SizeMismatch(Exception):
    """A download ended cleanly with a byte count other than the Content-Length the server announced."""

    def __init__(self, received: int, announced: int):
        super().__init__(f"{received} bytes received, {announced} announced")
        self.received = received
        self.announced = announced


def _open_remote(rf: ResolvedFile, got: Transfer) -> Any:
    """Open a remote file for one sequential read; over HTTP, note the size the server announced.

    fsspec reads an HTTP file in blocks, one Range request each. A server without Range support (e.g.
    `python -m http.server`) answers the first request with the whole file, which fsspec accepts only when
    the file fits one block, so a file that fits is one request either way; a larger file, or one of
    unknown size, is streamed in one plain GET (`block_size=0`).
    """
    if not _is_http(rf.fs):
        return rf.fs.open(rf.path, "rb")
    got.announced = size = rf.fs.info(rf.path).get("size")  # fsspec asks with Accept-Encoding: identity
    headers = {**rf.fs.kwargs.get("headers", {}), **IDENTITY}
    block = rf.fs.block_size if size is not None and 0 < size <= rf.fs.block_size else 0
    return rf.fs.open(rf.path, "rb", block_size=block, size=size, headers=headers)


def _announced_size(src: Any, head_size: int | None) -> int | None:
    """The Content-Length of a streamed response when it counts the stored bytes (no Content-Encoding), else
    the size the HEAD announced."""
    response = getattr(src, "r", None)  # fsspec's HTTPStreamFile keeps its aiohttp response here
    headers = getattr(response, "headers", None)
    if headers is not None and headers.get("Content-Encoding", "identity") == "identity":
        length = headers.get("Content-Length")
        if length is not None and length.isdigit():
            return int(length)
    return head_size


def _download_failure(exc: BaseException, got: Transfer) -> str:
    """What went wrong, with a rerun advised only where one can help (a cut transfer, a timeout, a server
    error), never for a missing file or a refused request."""
    kept = "nothing of it was kept"
    rerun = f"{kept}, rerun to fetch it again"
    if isinstance(exc, SizeMismatch):
        if exc.received < exc.announced:
            return f"the transfer was cut after {exc.received} of {exc.announced} bytes; {rerun}"
        return f"the server sent {exc.received} bytes but announced {exc.announced} (did the file change?); {rerun}"
    what = f"{type(exc).__name__}: {_first_line(exc)}"
    if isinstance(exc, FileNotFoundError):
        return f"the server does not have the file ({what}); {kept}; check the ledger URL"
    status = getattr(exc, "status", None)
    if isinstance(status, int):  # aiohttp.ClientResponseError: the server refused the request
        if status >= 500 or status in (408, 429):
            return f"the server answered {status} ({what}); {rerun}"
        return f"the server answered {status} ({what}); {kept}; check the URL and access to it"
    advice = rerun if _transient(exc) else kept
    if got.announced is not None and got.received < got.announced:
        # The client stops at the error with bytes still buffered (or a block unread): the count so far
        # understates what arrived, so only the announced size is stated, beside the client's own words.
        return f"the transfer was cut before all {got.announced} bytes arrived ({what}); {advice}"
    return f"{what}; {advice}"


def _transient(exc: BaseException) -> bool:
    """A network failure that may not recur: timeouts, refused or dropped connections, cut payloads."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    try:
        import aiohttp
    except ImportError:
        return False
    return isinstance(exc, aiohttp.ClientError) and not isinstance(exc, aiohttp.InvalidURL)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""


def cache_name(url: str) -> str:
    """A cache file name unique per URL and readable."""
    base = url.rstrip("/").rsplit("/", 1)[-1][-80:] or "file"
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{base}"


def load_record(path: Path) -> dict[str, Any] | None:
    """The last completed fetch record of a source, if any."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


@records.locked(lambda a: f"ingest.{a['source'].source_id}")
def run_fetch(source: Source, layout: Layout, resolved: dict[str, Any], log: Any = None) -> FetchResult:
    """`fetch_source` as the graph runs it: the config's ingest section and progress interval, under the
    source's ingest lock (a second run on the same root waits, then finds the parts unchanged)."""
    return fetch_source(source, layout, resolved["ingest"], log=log, progress_interval_s=interval_of(resolved))


def fetch_source(
    source: Source, layout: Layout, ingest_cfg: dict[str, Any], now: dt.datetime | None = None, log: Any = None,
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
    now = now or dt.datetime.now(dt.UTC)
    date = now.strftime("%Y%m%d")
    fetched_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    record_path = layout.fetch_record(source.source_id)
    record = load_record(record_path) or {}
    previous = {f["url"]: f for f in record.get("files", [])}
    files = resolve_files(source, ingest_cfg["timeout_s"])
    result = FetchResult(source.source_id, date, files=len(files))

    # 1. Make every file local and known by checksum, verifying pins before anything is written.
    from corpus_dagster.ingest.pins import checked_pins  # here: pins imports this module

    pins = checked_pins(source, [rf.url for rf in files], layout.ledger)  # a pin naming no file is a LedgerError
    remove_stale_temps(layout.downloads(source.source_id))  # half-downloaded files of a killed run
    locals_: list[tuple[ResolvedFile, str, str, str]] = []  # (file, local path, sha256, ukey)
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
        if log:
            log.debug(f"{source.source_id}: {rf.url} sha256={sha[:12]} ({'skipped' if reusable else 'fetched'})")
        locals_.append((rf, local_path, sha, ukey))

    settings = output_settings({"ingest": ingest_cfg}, "ingest", SETTINGS)
    file_entries = [{"url": rf.url, "sha256": sha, "bytes": _size(lp), "ukey": uk} for rf, lp, sha, uk in locals_]
    key = stage_key("ingest", CODE_VERSION, ingest_inputs(source, file_entries), settings)
    result.key = key
    raw_dir = layout.raw_source(source.source_id)
    records.begin(raw_dir)
    done = records.cached(raw_dir, key)
    if done is not None:
        result.unchanged = True
        result.date = done.stats["date"]
        result.docs = done.stats["docs"]
        result.parts = len(done.files["parts"])
        result.bytes_uncompressed = done.stats["bytes_uncompressed"]
        result.quarantined = done.stats.get("quarantined", {})
        result.excluded_by_where = done.stats.get("excluded_by_where", 0)
        if record.get("files") != file_entries:  # same bytes, new mtime or ETag: remember the new identities
            atomic_write_bytes(record_path, _dump({**record, "files": file_entries}))
        result.seconds = time.monotonic() - start
        return result

    # 2. Stream every document into parts inside a temp folder; rename it into place at the end.
    quarantined: Counter[str] = Counter()
    with atomic_dir(raw_dir / date) as tmp:
        writer = PartWriter(tmp, ingest_cfg["part_max_bytes"], ingest_cfg["part_max_docs"])
        with open(tmp / QUARANTINE_FILE, "w", encoding="utf-8", errors="backslashreplace") as qfh:
            progress = Progress(log.info if log and progress_interval_s else None, f"fetch {source.source_id}",
                                interval_s=progress_interval_s or 0.0)
            stream_documents(
                locals_, source, selection, ingest_cfg["max_doc_bytes"], fetched_at, writer, qfh, quarantined, progress
            )
            progress.finish()
        part_docs = writer.close()
        if selection is not None and selection.keep_fields:
            write_parquet(selection.fields_table(), tmp / FIELDS_FILE, TABLE)
    result.docs = sum(part_docs)
    result.parts = len(part_docs)
    result.bytes_uncompressed = writer.bytes_uncompressed
    result.quarantined = dict(sorted(quarantined.items()))
    result.excluded_by_where = selection.excluded if selection is not None else 0
    atomic_write_bytes(record_path, _dump({"source_id": source.source_id, "files": file_entries}))
    part_names = [f"{date}/{part_name(i)}" for i in range(len(part_docs))]
    files = {"parts": part_names}
    if selection is not None and selection.keep_fields:
        files["fields"] = [f"{date}/{FIELDS_FILE}"]
    stats = {
        "date": date,
        "fetched_at": fetched_at,
        "part_docs": part_docs,
        "docs": result.docs,
        "bytes_uncompressed": result.bytes_uncompressed,
        "quarantined": result.quarantined,
        "excluded_by_where": result.excluded_by_where,
    }
    records.commit(raw_dir, StageRecord(
        stage="ingest", key=key, code_version=CODE_VERSION, inputs=ingest_inputs(source, file_entries),
        settings=settings, outputs=records.describe_outputs(raw_dir, [n for names in files.values() for n in names]),
        files=files, stats=stats,
    ), prune=False)
    for other in raw_dir.iterdir():  # keep only the current fetch date
        if other.is_dir() and other.name != date and other.name.isdigit():
            shutil.rmtree(other, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def stream_documents(
    locals_: list[tuple[ResolvedFile, str, str, str]],
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
    """Per document of a source, in k order: `id`, `fetched_at` (RFC 3339) and the ledger's keep_fields.

    Holds ids and kept fields only, never texts. Every document of a fetch shares its fetch time.
    """
    folder = layout.raw_source(source_id)
    record = records.require_record(folder, "raw_documents", source_id)
    n = int(record.stats["docs"])
    fetched = pa.repeat(pa.scalar(record.stats["fetched_at"], type=pa.string()), n)
    if not record.files.get("fields"):
        return pa.table({"id": document_ids(source_id, n), "fetched_at": fetched})
    (path,) = records.record_files(folder, record, "fields")
    table = pq.read_table(path)
    if table.num_rows != n or table.column_names[:1] != ["id"]:
        raise StageOutputError(
            f"{path}: {table.num_rows} rows for {n} documents of source {source_id!r}; rerun raw_documents[{source_id}]"
        )
    return table.add_column(1, "fetched_at", fetched)
