"""Which files a ledger source names: its urls and globs expanded into concrete files, in id order.

Shared by the fetch (which reads the files) and the pin checks (which match sha256 pins against them
before anything is read), so both spell a file's URL the same way.
"""

from __future__ import annotations

import glob as globmod
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import fsspec

from corpus_dagster.core.errors import SourceError
from corpus_dagster.core.ledger import Source


@dataclass(frozen=True)
class ResolvedFile:
    """One concrete file of a source after glob expansion."""

    url: str
    fs: Any
    path: str

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file://")


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
                elif is_http(fs):
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


def is_http(fs: Any) -> bool:
    """Whether an fsspec filesystem speaks HTTP(S), whose files are checked and streamed differently."""
    return bool({"http", "https"} & set(fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)))


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
        raise SourceError(source.source_id, f"cannot open {url}: {type(cause).__name__}: {first_line(cause)}") from exc
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


def cache_name(url: str) -> str:
    """A cache file name unique per URL and readable."""
    base = url.rstrip("/").rsplit("/", 1)[-1][-80:] or "file"
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{base}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: errors here stay on one line."""
    return str(exc).splitlines()[0] if str(exc) else ""
