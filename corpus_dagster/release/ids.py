"""Stable release ids (UUIDv5) and seeded per-row random keys, both independent of worker count.

A release id names the document's source row, not its position in the corpus: `<source_id>:<file>#<n>`,
<file> the file's URL relative to the fixed prefix of the ledger URL (glob) that matched it, <n> the
record's 0-based line (JSON Lines) or row (Parquet) in that file, so appending to one file renames no
document of another. A ledger `id_field` names the row by the source's own id instead; a document whose
row cannot be read off its `url` (a `url_field` source) keeps its shard id `<source_id>:<k>`.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence

import numpy as np

# Fixed by the project: uuid5(NAMESPACE_URL, "https://corpus-dagster.dev/release"). Never change it, or
# every released id changes.
RELEASE_NAMESPACE = uuid.UUID("2241fc62-735c-5c84-abbf-2d0426a336e0")


_GLOB_CHARS = re.compile(r"[*?\[]")
_POSITION = re.compile(r"(.*)#(0|[1-9][0-9]*)", re.DOTALL)


def release_id(row_id: str, span: tuple[int, int] | None = None) -> str:
    """UUIDv5 of the source row id (see row_ids), plus `#<start>-<end>` for a segment."""
    name = row_id if span is None else f"{row_id}#{span[0]}-{span[1]}"
    return str(uuid.uuid5(RELEASE_NAMESPACE, name))


def release_ids(row_ids: Sequence[str], starts: Sequence[int], ends: Sequence[int], segmented: Sequence[bool]) -> list[str]:
    """release_id for many rows (a whole document when `segmented` is false)."""
    return [
        release_id(d, (s, e) if seg else None)
        for d, s, e, seg in zip(row_ids, starts, ends, segmented, strict=True)
    ]


def fixed_prefix(url: str) -> str:
    """The part of a ledger URL a file name is taken relative to: up to the last `/` before the first
    glob character (for a plain URL, up to its last `/`, leaving the file name)."""
    m = _GLOB_CHARS.search(url)
    head = url if m is None else url[: m.start()]
    return head[: head.rfind("/") + 1]


def file_key(file_url: str, ledger_urls: Sequence[str]) -> str:
    """`file_url` relative to the fixed prefix of the first ledger URL (normalized as ingest does) that
    names it: the URL itself, else the first glob whose prefix it lies under; else the whole file URL."""
    for url in ledger_urls:
        if not _GLOB_CHARS.search(url) and url == file_url:
            return file_url[len(fixed_prefix(url)):]
    for url in ledger_urls:
        prefix = fixed_prefix(url)
        if _GLOB_CHARS.search(url) and prefix and file_url.startswith(prefix) and len(file_url) > len(prefix):
            return file_url[len(prefix):]
    return file_url


def _file_position(url: str | None, fmt: str) -> tuple[str, int] | None:
    """(file URL, 0-based record) from a document `url` as ingest writes it: `<file>#<line>` (1-based) for
    JSON Lines, `<file>#<row>` (0-based) for Parquet, the file URL alone for a text file (one record)."""
    if not url:
        return None
    if fmt == "text":
        return url, 0
    m = _POSITION.fullmatch(url)
    if m is None:
        return None
    n = int(m.group(2))
    if fmt == "parquet":
        return m.group(1), n
    return (m.group(1), n - 1) if n >= 1 else None


def row_ids(doc_ids: Sequence[str], source_ids: Sequence[str], urls: Sequence[str | None],
            facts: Mapping[str, Mapping[str, object]], own_ids: Sequence[str | None] | None = None) -> list[str]:
    """The source row id of every document: `<source_id>:<own id>` for a source with an `id_field`
    (`own_ids`, aligned), else `<source_id>:<file>#<n>` read off its url; the shard id `<source_id>:<k>`
    when the url holds no file position (a `url_field` source, or a url not as ingest writes one).

    Two files of one source whose relative names coincide (under different globs) keep their whole URLs,
    so the ids stay unique. `facts` by source id: format, urls (normalized), url_field, id_field."""
    parsed: list[tuple[str, int] | None] = []
    files: dict[str, set[str]] = {}
    for sid, url in zip(source_ids, urls, strict=True):
        f = facts[sid]
        pos = None if f.get("id_field") or f.get("url_field") else _file_position(url, str(f.get("format")))
        parsed.append(pos)
        if pos is not None:
            files.setdefault(sid, set()).add(pos[0])
    keys: dict[tuple[str, str], str] = {}
    for sid, names in files.items():
        ledger_urls = [str(u) for u in facts[sid].get("urls") or ()]  # type: ignore[attr-defined]
        mine = {name: file_key(name, ledger_urls) for name in sorted(names)}
        taken: dict[str, int] = {}
        for key in mine.values():
            taken[key] = taken.get(key, 0) + 1
        for name, key in mine.items():
            keys[(sid, name)] = key if taken[key] == 1 else name
    out = []
    for i, (doc_id, sid, pos) in enumerate(zip(doc_ids, source_ids, parsed, strict=True)):
        if facts[sid].get("id_field"):
            own = own_ids[i] if own_ids is not None else None
            if own is None:
                raise ValueError(f"document {doc_id!r} has no value of its source's id_field")
            out.append(f"{sid}:{own}")
        elif pos is None:
            out.append(doc_id)
        else:
            out.append(f"{sid}:{keys[(sid, pos[0])]}#{pos[1]}")
    return out


def seeded_keys(seed: int, purpose: str, names: Sequence[str]) -> np.ndarray:
    """A uint64 pseudo-random key per name, fixed by (seed, purpose, name): sorting by it is a seeded shuffle."""
    salt = f"{seed}:{purpose}:".encode()
    out = np.empty(len(names), dtype=np.uint64)
    for i, name in enumerate(names):
        out[i] = int.from_bytes(hashlib.blake2b(salt + name.encode(), digest_size=8).digest(), "big")
    return out
