"""The build's units: runs of up to UNIT_DOCS documents of one shard with work for the worker processes
(a token count the release computes, segments of a document over max_tokens). The build records each unit's
counts and segments, one canonical JSON line each, so the sampled rebuild check can redo a few of them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from corpus_dagster.release.buckets import Buckets

# Documents with work (a token count to compute, segments to cut) per unit of the sampled rebuild check
UNIT_DOCS = 8


def uncounted_rows(docs: pl.DataFrame) -> list[tuple[int, list[int]]]:
    """(shard, rows) of the documents without a reusable token count, in shard order."""
    missing = docs.filter(pl.col("n_tokens").is_null())
    return [(int(s), g["shard_row"].to_list()) for (s,), g in missing.group_by(["shard"], maintain_order=True)]


def with_counts(docs: pl.DataFrame, counted: Mapping[int, Mapping[int, int]]) -> pl.DataFrame:
    """`docs` with the counts the release computed filled in (counted: shard -> row -> n_tokens)."""
    frames = [
        pl.DataFrame({"shard": [s] * len(c), "shard_row": list(c), "n_new": list(c.values())},
                     schema={"shard": pl.Int32, "shard_row": pl.Int32, "n_new": pl.Int32})
        for s, c in counted.items() if c
    ]
    if not frames:
        return docs
    return docs.join(pl.concat(frames), on=["shard", "shard_row"], how="left").with_columns(
        pl.coalesce("n_tokens", "n_new").alias("n_tokens")
    ).drop("n_new")


def work_units(docs: pl.DataFrame, counted: Mapping[int, Mapping[int, int]], buckets: Buckets) -> list[tuple[int, list[int]]]:
    """(shard, rows) of every unit: up to UNIT_DOCS consecutive documents of one shard with work for the
    worker processes (a token count the release computed, or over max_tokens), in shard and row order."""
    long = docs.filter(pl.col("n_tokens") > buckets.max_tokens).select("shard", "shard_row")
    rows_by_shard: dict[int, set[int]] = {int(s): set(c) for s, c in counted.items() if c}
    for s, r in long.iter_rows():
        rows_by_shard.setdefault(int(s), set()).add(int(r))
    units = []
    for s in sorted(rows_by_shard):
        rows = sorted(rows_by_shard[s])
        units += [(s, rows[i:i + UNIT_DOCS]) for i in range(0, len(rows), UNIT_DOCS)]
    return units


def segment_batches(docs: pl.DataFrame, units: Sequence[tuple[int, list[int]]], buckets: Buckets,
                     room: Mapping[str, list[bool]]
                     ) -> list[tuple[list[int], list[int], list[str], list[list[bool]], list[str]]]:
    """Per unit, its documents over max_tokens as a segment job's batch (rows, n_tokens, doc_ids, rooms,
    row ids: a segmentation is seeded by the source row, so it survives a shift of shard ids)."""
    long = docs.filter(pl.col("n_tokens") > buckets.max_tokens).select(
        "shard", "shard_row", "n_tokens", "id", "source_id", "row_id")
    by_key = {(int(s), int(r)): (int(n), i, sid, rid) for s, r, n, i, sid, rid in long.iter_rows()}
    batches = []
    for s, rows in units:
        hit = [(r, by_key[(s, r)]) for r in rows if (s, r) in by_key]
        batches.append(([r for r, _ in hit], [v[0] for _, v in hit], [v[1] for _, v in hit], [room[v[2]] for _, v in hit],
                        [v[3] for _, v in hit]))
    return batches


def unit_record(shard: int, rows: list[int], counted: Mapping[int, int], segmented: Mapping[str, Any]) -> dict[str, Any]:
    """A unit as recorded: its rows, the counts the release computed for them, their segments."""
    mine = [r for r in rows if r in counted]
    return {"shard": shard, "rows": rows, "counted": {"rows": mine, "n_tokens": [counted[r] for r in mine]},
            "segmented": dict(segmented)}


def unit_line(unit: Mapping[str, Any]) -> bytes:
    """One unit as the line the build writes and the check compares (canonical JSON)."""
    return json.dumps(unit, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def read_units(units_file: Path, sha256: str | None) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The build's units in order, or (None, why not)."""
    if not units_file.is_file():
        return None, f"{units_file}: the build's units file is missing; rebuild the release"
    body = units_file.read_bytes()
    if hashlib.sha256(body).hexdigest() != sha256:
        return None, f"{units_file}: sha256 differs from the one the build recorded; rebuild the release"
    return [json.loads(line) for line in body.decode("utf-8").splitlines()], None

