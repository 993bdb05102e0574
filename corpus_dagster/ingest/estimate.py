"""How much text a source probably holds, before fetching it: the order in which to start source runs.

Runs started largest first finish together (longest-processing-time-first scheduling): a large source
started last would run alone at the end while the other workers sit idle. Only the order of independent
runs depends on this, never an output byte.
"""

from __future__ import annotations

import glob as globmod
import os
from urllib.parse import unquote, urlparse

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source

MISSING = -1  # a local path that matches no file: that run fails at once, so it goes first


def expected_bytes(layout: Layout, source: Source) -> int:
    """The text bytes of the source's last fetch, else the size of its local files (MISSING when a local
    path matches nothing), else 0 (remote, never fetched)."""
    record = records.read_record(layout.raw_source(source.source_id))
    if record is not None and isinstance(record.stats.get("bytes_uncompressed"), int):
        return int(record.stats["bytes_uncompressed"])
    total = 0
    for url in source.urls:
        if "://" in url and not url.startswith("file://"):
            continue
        path = unquote(urlparse(url).path) if url.startswith("file://") else os.path.expanduser(url)
        names = globmod.glob(path) if globmod.has_magic(path) else [path]
        if not any(os.path.isfile(n) for n in names):
            return MISSING
        total += sum(os.path.getsize(n) for n in names if os.path.isfile(n))  # through symlinks; compressed as is
    return total


def largest_first(layout: Layout, sources: list[Source]) -> list[str]:
    """Source ids in the order to start their runs: those whose local files are missing (they fail at once),
    then by expected size, largest first; ledger order among equals."""
    sizes = {s.source_id: expected_bytes(layout, s) for s in sources}
    order = {s.source_id: i for i, s in enumerate(sources)}
    return sorted(sizes, key=lambda sid: (sizes[sid] != MISSING, -sizes[sid], order[sid]))
