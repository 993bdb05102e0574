"""Stable release ids (UUIDv5) and seeded per-row random keys, both independent of worker count."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

import numpy as np

# Fixed by the project: uuid5(NAMESPACE_URL, "https://corpus-dagster.dev/release"). Never change it, or
# every released id changes.
RELEASE_NAMESPACE = uuid.UUID("2241fc62-735c-5c84-abbf-2d0426a336e0")


def release_id(doc_id: str, span: tuple[int, int] | None = None) -> str:
    """UUIDv5 of `<source_id>:<k>` (the corpus document id), plus `#<start>-<end>` for a segment."""
    name = doc_id if span is None else f"{doc_id}#{span[0]}-{span[1]}"
    return str(uuid.uuid5(RELEASE_NAMESPACE, name))


def release_ids(doc_ids: Sequence[str], starts: Sequence[int], ends: Sequence[int], segmented: Sequence[bool]) -> list[str]:
    """release_id for many rows (a whole document when `segmented` is false)."""
    return [
        release_id(d, (s, e) if seg else None)
        for d, s, e, seg in zip(doc_ids, starts, ends, segmented, strict=True)
    ]


def seeded_keys(seed: int, purpose: str, names: Sequence[str]) -> np.ndarray:
    """A uint64 pseudo-random key per name, fixed by (seed, purpose, name): sorting by it is a seeded shuffle."""
    salt = f"{seed}:{purpose}:".encode()
    out = np.empty(len(names), dtype=np.uint64)
    for i, name in enumerate(names):
        out[i] = int.from_bytes(hashlib.blake2b(salt + name.encode(), digest_size=8).digest(), "big")
    return out
