"""A document's stable key: what names it across rebuilds, whatever else enters or leaves its source.

The key is `<source_id>:<own id>` for a source with a ledger `id_field`, else `<source_id>:<url>` for a
source with a `url_field`, else `<source_id>:sha256:<hex of the clean text's SHA-256>#<n>`, n the text's
0-based occurrence among the source's documents in k order. It never holds a row position, so excluding
one record upstream (a `where`, a new revision of a dump) moves no other document's key. A repeated own id
or url (or a record without one) is told apart the same way: `#~<n>` for the n-th repeat (n >= 1), and a
document without an own id or url falls back to the text's key. Release ids (UUIDv5) hash this key, and
dedup keeps, of each exact group and near-duplicate cluster, the member with the smallest key in byte order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_POSITION = re.compile(r"(.*)#(0|[1-9][0-9]*)", re.DOTALL)
_GLOB_CHARS = re.compile(r"[*?\[]")


def _under_ledger(file_url: str, ledger_urls: Sequence[str]) -> bool:
    """`file_url` is one of the files a ledger URL (plain or glob) names."""
    for url in ledger_urls:
        m = _GLOB_CHARS.search(url)
        if m is None and url == file_url:
            return True
        if m is not None and file_url.startswith(url[: m.start()][: url[: m.start()].rfind("/") + 1]):
            return True
    return False


def positional_url(url: str | None, ledger_urls: Sequence[str]) -> bool:
    """`url` is the position ingest writes when a record has no value of its `url_field`: `<file>#<n>` of a
    file the ledger names (or any `file://` one), which would move with every row before it."""
    if not url:
        return True
    m = _POSITION.fullmatch(url)
    return m is not None and (m.group(1).startswith("file://") or _under_ledger(m.group(1), ledger_urls))


def stable_keys(source_id: str, sha256_hex: Sequence[str], *, own_ids: Sequence[str | None] | None = None,
                urls: Sequence[str | None] | None = None, ledger_urls: Sequence[str] = ()) -> list[str]:
    """The stable key of every document of one source, aligned with the inputs (documents in k order).

    `own_ids`: the `id_field` values (None: the source has none); `urls`: the documents' urls when the
    source has a `url_field` (None otherwise); `sha256_hex`: the clean text's digest of each document."""
    seen: dict[str, int] = {}
    out = []
    for i, digest in enumerate(sha256_hex):
        own = own_ids[i] if own_ids is not None else None
        url = urls[i] if urls is not None else None
        if own is not None and own != "":
            base = f"{source_id}:{own}"
        elif url is not None and not positional_url(url, ledger_urls):
            base = f"{source_id}:{url}"
        else:
            base = f"{source_id}:sha256:{digest}"
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.append(f"{base}#{n}")
            continue
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}#~{n}")
    return out
