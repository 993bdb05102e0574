"""`ingest.allowed_prefixes`: the locations a ledger source may name, so a ledger kept in a shared bucket cannot
point the pipeline at this machine's files (or at any place the operator did not allow).

A URL and a prefix are compared as normalized locations, never as text: a bare path and `file://` are the same
local path as fsspec reads it, made absolute with `..` resolved and the symlinks of its folders followed; a
remote URL is its scheme, host, port and its path percent-decoded with `..` and `//` resolved. A URL is inside a
prefix when the location matches and its path equals the prefix's or continues it by whole components
(`/data` allows `/data/x`, not `/database`). What cannot be normalized is refused: chained fsspec URLs
(`zip://...::file://...`) and a `..` after a glob character (which folder it climbs out of depends on what the
glob matches).
"""

from __future__ import annotations

import glob as globmod
import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from corpus_dagster.core.errors import LedgerError

LOCAL_PROTOCOLS = frozenset({"file", "local"})


class LocationRefused(ValueError):
    """A URL that cannot be compared with prefixes safely (chained, `..` after a glob)."""


@dataclass(frozen=True)
class Location:
    """A normalized place: `local` or a remote scheme, the host (with port) for remote ones, and a path."""

    scheme: str
    host: str
    path: str

    def contains(self, other: Location) -> bool:
        """Whether `other` is this location or lies below it by whole path components."""
        if (self.scheme, self.host) != (other.scheme, other.host):
            return False
        base = self.path.rstrip("/")
        return other.path == base or other.path.startswith(base + "/") or base == ""


def location(url: str) -> Location:
    """The normalized location of a ledger URL or a prefix (see the module docstring); LocationRefused when it
    cannot be normalized safely."""
    if "::" in url:
        raise LocationRefused("a chained fsspec URL (`::`) cannot be checked against ingest.allowed_prefixes")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("", *LOCAL_PROTOCOLS):
        return Location("local", "", _local_path(url))
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise LocationRefused("a URL with an invalid port cannot be checked against ingest.allowed_prefixes") from None
    host = (parts.hostname or "") + (f":{port}" if port is not None else "")
    return Location(scheme, host, _normal_path(_fully_unquoted(parts.path), remote=True))


def _local_path(url: str) -> str:
    """The absolute path fsspec's local file system reads for `url`, `..` resolved and folders' symlinks
    followed (as the kernel does when the file is opened)."""
    from fsspec.implementations.local import LocalFileSystem

    path = LocalFileSystem._strip_protocol(url) if "://" in url else os.path.abspath(os.path.expanduser(url))
    return _normal_path(path, remote=False)


def _fully_unquoted(path: str) -> str:
    """Percent-decoded until nothing changes: `%252e%252e` is `..` to a server that decodes twice."""
    for _ in range(8):
        decoded = unquote(path)
        if decoded == path:
            return path
        path = decoded
    raise LocationRefused("a URL path encoded more than eight times cannot be checked")


def _normal_path(path: str, remote: bool) -> str:
    """`path` with `.`, `..` and doubled slashes resolved; local folders before the first glob are realpath'd."""
    parts = path.split("/")
    glob_at = next((i for i, p in enumerate(parts) if globmod.has_magic(p)), len(parts))
    if ".." in parts[glob_at:]:
        raise LocationRefused("`..` after a glob character cannot be checked against ingest.allowed_prefixes")
    head = "/".join(parts[:glob_at]) or "/"
    tail = parts[glob_at:]
    if remote:
        head = posixpath.normpath("/" + head.lstrip("/"))
    else:
        head = os.path.realpath(head)
    joined = posixpath.join(head, *tail) if tail else head
    return posixpath.normpath(joined).replace("//", "/")


def outside_problem(url: str, prefixes: Sequence[Location]) -> str | None:
    """Why `url` is refused under `prefixes` (None when it lies inside one of them)."""
    try:
        where = location(url)
    except LocationRefused as exc:
        return str(exc)
    if any(p.contains(where) for p in prefixes):
        return None
    shown = where.path if where.scheme == "local" else f"{where.scheme}://{where.host}{where.path}"
    return f"{url} is outside ingest.allowed_prefixes (it names {shown})"


def check_allowed_locations(allowed_prefixes: Iterable[str], sources: Iterable, ledger_path: str | Path) -> None:
    """Raise LedgerError naming the ledger line and `$.urls[i]` of every URL outside `allowed_prefixes`
    (nothing is checked when the list is empty: any location is allowed)."""
    from corpus_dagster.core.ledger import ledger_line

    prefixes = [location(p) for p in allowed_prefixes]
    if not prefixes:
        return
    problems = []
    for source in sources:
        for i, url in enumerate(source.urls):
            problem = outside_problem(url, prefixes)
            if problem is not None:
                line = ledger_line(ledger_path, source.source_id)
                where = f"line {line}: " if line is not None else f"source {source.source_id!r}: "
                problems.append(f"{where}$.urls[{i}]: {problem}")
    if problems:
        raise LedgerError(str(ledger_path), problems)
