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

from corpus_dagster.atomic import atomic_dir, atomic_path, atomic_write_bytes
from corpus_dagster.errors import ChecksumMismatch, SourceError
from corpus_dagster.ingest.raw_parts import PartWriter, part_name
from corpus_dagster.ingest.readers import Doc, iter_file
from corpus_dagster.layout import Layout
from corpus_dagster.ledger import Source

QUARANTINE_FILE = "_QUARANTINE.jsonl"


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
    seconds: float = 0.0


def storage_options(url: str, timeout_s: float) -> dict[str, Any]:
    """Explicit timeouts for remote filesystems, so a dead server fails instead of hanging."""
    if url.startswith(("http://", "https://")):
        import aiohttp

        return {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=timeout_s)}}
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
                paths = [p for p, info in entries.items() if info.get("type") == "file"]
                if not paths:
                    raise SourceError(source.source_id, f"no file matches {url}")
            else:
                if not fs.exists(path) or fs.isdir(path):
                    raise SourceError(source.source_id, f"file not found: {url} does not exist")
                paths = [path]
        except SourceError:
            raise
        except Exception as exc:  # network errors, permission errors: name the URL
            raise SourceError(source.source_id, f"cannot list {url}: {type(exc).__name__}: {exc}") from exc
        for p in paths:
            file_url = fs.unstrip_protocol(p)
            found.setdefault(file_url, ResolvedFile(file_url, fs, p))
    return [found[u] for u in sorted(found)]


def file_ukey(rf: ResolvedFile) -> str:
    """A cheap identity of the file's current version (size, mtime, etag...), to skip unchanged files."""
    try:
        info = rf.fs.info(rf.path)
    except Exception as exc:
        raise SourceError("?", f"cannot stat {rf.url}: {exc}") from exc
    keep = {k: v for k, v in info.items() if k != "name" and isinstance(v, str | int | float) and k not in ("ino", "nlink")}
    return json.dumps(keep, sort_keys=True, default=str)


def sha256_file(path: str | Path) -> str:
    """Streaming SHA-256 of a local file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def download(rf: ResolvedFile, target: Path, source_id: str) -> str:
    """Stream a remote file into the cache atomically, hashing as it goes; returns its sha256."""
    h = hashlib.sha256()
    try:
        with rf.fs.open(rf.path, "rb") as src, atomic_path(target) as tmp, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                h.update(chunk)
                dst.write(chunk)
    except Exception as exc:
        raise SourceError(source_id, f"download failed: {type(exc).__name__}: {exc}", file=rf.url) from exc
    return h.hexdigest()


def cache_name(url: str) -> str:
    """A cache file name unique per URL and readable."""
    base = url.rstrip("/").rsplit("/", 1)[-1][-80:] or "file"
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{base}"


def load_record(path: Path) -> dict[str, Any] | None:
    """The last completed fetch record of a source, if any."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def fetch_source(
    source: Source, layout: Layout, ingest_cfg: dict[str, Any], now: dt.datetime | None = None, log: Any = None
) -> FetchResult:
    """Fetch one source into corpus/raw/<source_id>/<yyyymmdd>/ parts. Resumable and atomic.

    Files whose checksum already matches (by the pin or the last fetch record, and unchanged size/mtime/etag)
    are not downloaded again; when no file changed and the parts exist, nothing is rewritten.
    """
    start = time.monotonic()
    now = now or dt.datetime.now(dt.UTC)
    date = now.strftime("%Y%m%d")
    fetched_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    record_path = layout.fetch_record(source.source_id)
    record = load_record(record_path) or {}
    previous = {f["url"]: f for f in record.get("files", [])}
    files = resolve_files(source, ingest_cfg["timeout_s"])
    result = FetchResult(source.source_id, date, files=len(files))

    # 1. Make every file local and known by checksum, verifying pins before anything is written.
    locals_: list[tuple[ResolvedFile, str, str, str]] = []  # (file, local path, sha256, ukey)
    for rf in files:
        ukey = file_ukey(rf)
        prev = previous.get(rf.url)
        pinned = source.sha256.get(rf.url)
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

    settings = {k: ingest_cfg[k] for k in ("part_max_bytes", "part_max_docs", "max_doc_bytes")}
    file_entries = [{"url": rf.url, "sha256": sha, "bytes": _size(lp), "ukey": uk} for rf, lp, sha, uk in locals_]
    same_files = [(f["url"], f["sha256"]) for f in record.get("files", [])] == [(f["url"], f["sha256"]) for f in file_entries]
    old_dir = layout.raw_source(source.source_id) / record.get("date", "-")
    if same_files and record.get("settings") == settings and _parts_present(old_dir, record):
        result.unchanged = True
        result.date = record["date"]
        result.docs = record["docs"]
        result.parts = len(record["parts"])
        result.bytes_uncompressed = record["bytes_uncompressed"]
        result.quarantined = record.get("quarantined", {})
        if record["files"] != file_entries:  # same bytes, new mtime: remember the new ukeys
            atomic_write_bytes(record_path, _dump({**record, "files": file_entries}))
        result.seconds = time.monotonic() - start
        return result

    # 2. Stream every document into parts inside a temp folder; rename it into place at the end.
    raw_dir = layout.raw_source(source.source_id)
    quarantined: Counter[str] = Counter()
    with atomic_dir(raw_dir / date) as tmp:
        writer = PartWriter(tmp, ingest_cfg["part_max_bytes"], ingest_cfg["part_max_docs"])
        with open(tmp / QUARANTINE_FILE, "w", encoding="utf-8") as qfh:
            for rf, local_path, _sha, _uk in locals_:
                for item in iter_file(local_path, source, rf.url, ingest_cfg["max_doc_bytes"]):
                    if isinstance(item, Doc):
                        writer.write(item.url, fetched_at, source.license_spdx, item.text)
                    else:
                        quarantined[item.reason] += 1
                        qfh.write(json.dumps(item.to_json(source.source_id), ensure_ascii=False) + "\n")
        part_docs = writer.close()
    result.docs = sum(part_docs)
    result.parts = len(part_docs)
    result.bytes_uncompressed = writer.bytes_uncompressed
    result.quarantined = dict(sorted(quarantined.items()))
    new_record = {
        "source_id": source.source_id,
        "date": date,
        "fetched_at": fetched_at,
        "settings": settings,
        "files": file_entries,
        "parts": [{"name": part_name(i), "docs": n} for i, n in enumerate(part_docs)],
        "docs": result.docs,
        "bytes_uncompressed": result.bytes_uncompressed,
        "quarantined": result.quarantined,
    }
    atomic_write_bytes(record_path, _dump(new_record))
    for other in raw_dir.iterdir():  # keep only the current fetch date
        if other.is_dir() and other.name != date and other.name.isdigit():
            shutil.rmtree(other, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def _dump(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _parts_present(folder: Path, record: dict[str, Any]) -> bool:
    return folder.is_dir() and all((folder / p["name"]).exists() for p in record.get("parts", []))


def raw_part_paths(layout: Layout, source_id: str) -> tuple[list[Path], list[int], dict[str, Any]]:
    """The current raw parts of a source in path order, with documents per part and the fetch record."""
    record = load_record(layout.fetch_record(source_id))
    if record is None:
        raise SourceError(source_id, "raw_documents has not been materialized for this source (no _FETCH.json)")
    folder = layout.raw_source(source_id) / record["date"]
    paths = [folder / p["name"] for p in record["parts"]]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SourceError(source_id, f"raw parts missing: {missing[:3]}; rerun raw_documents")
    return paths, [p["docs"] for p in record["parts"]], record
