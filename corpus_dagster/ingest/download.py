"""Download one remote file into the cache: streamed, hashed as it arrives, kept only when complete.

A failure is explained in one line that advises a rerun only where one can help.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_dagster.core.atomic import WriteError, atomic_path
from corpus_dagster.core.errors import SourceError
from corpus_dagster.ingest.files import ResolvedFile, first_line, is_http

IDENTITY = {"Accept-Encoding": "identity"}  # the bytes as stored, so they count up to the Content-Length


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
    if not is_http(rf.fs):
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
    what = f"{type(exc).__name__}: {first_line(exc)}"
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
