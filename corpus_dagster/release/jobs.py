"""The release's worker jobs: what runs in the worker processes of a build and of its rebuild check.

Kept apart from the driver so a spawned worker imports only what the jobs need (pyarrow, polars, the
segmenter, the tokenizer), not the driver's other stages and the figures' matplotlib.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parquet import ParquetSettings, rows_by_group, write_parquet
from corpus_dagster.core.settings import ReleaseSettings, TokenizeSettings
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.rows import part_table
from corpus_dagster.release.segment import segment_text

SPILL_OPTIONS = ipc.IpcWriteOptions(compression="lz4")
# Columns of a unit's segment rows (content_sha256 as hex, so a unit is plain JSON)
SEGMENT_SCHEMA = {"doc_id": pl.String, "segment": pl.Int32, "char_start": pl.Int64, "char_end": pl.Int64,
                  "n_tokens": pl.Int32, "content_sha256": pl.String}

_TOKENIZERS: dict[TokenizeSettings, Any] = {}


def tokenizer(cfg: TokenizeSettings) -> Any:
    """The plain text encoder (no special tokens), built once per process (a frozen section is its own key)."""
    from corpus_dagster.lib.tokenizers import tokenizer_from_config

    if cfg not in _TOKENIZERS:
        _TOKENIZERS[cfg] = tokenizer_from_config(cfg, section="release.tokenizer")
    return _TOKENIZERS[cfg]


def _count(cfg: TokenizeSettings, texts: Sequence[str]) -> list[int]:
    return tokenizer(cfg).count_texts(list(texts))


def count_job(path: str, rows: list[int], cfg: TokenizeSettings) -> tuple[list[int], float, int]:
    counts = [0] * len(rows)
    seconds, n_bytes = 0.0, 0
    for positions, array in texts_by_group(path, rows):
        texts = array.to_pylist()
        t0 = time.perf_counter()
        for i, n in zip(positions, _count(cfg, texts), strict=True):
            counts[i] = n
        seconds += time.perf_counter() - t0
        n_bytes += sum(len(t.encode("utf-8")) for t in texts)
    return counts, seconds, n_bytes


def texts_by_group(path: str, rows: Sequence[int]) -> Iterator[tuple[np.ndarray, pa.Array]]:
    """The texts of a shard's `rows`, one row group at a time: (positions in `rows`, their texts in that
    order). See `row_groups_of`."""
    for positions, local, column in row_groups_of(path, rows):
        yield positions, column.take(pa.array(local))


def row_groups_of(path: str, rows: Sequence[int]) -> Iterator[tuple[np.ndarray, np.ndarray, pa.Array]]:
    """A shard's `rows` by row group: (positions in `rows`, their rows in the group's text column, that
    column). A shard is cut into row groups of bounded bytes (`publish.row_group_max_bytes`) and its row
    count is not, so reading a group at a time bounds a job's memory by a row group, not a shard."""
    for positions, local, table in rows_by_group(pq.ParquetFile(path), rows, ["text"]):
        yield positions, local, table["text"].combine_chunks()


def segment_job(
    path: str, batches: list[tuple[list[int], list[int], list[str], list[list[bool]], list[str]]],
    settings: ReleaseSettings, cfg: TokenizeSettings,
) -> dict[str, Any]:
    """Segment the long documents of one shard, given as batches (rows, n_tokens, doc_ids, rooms, row ids
    seeding each document's choices; rows of the shard at `path`): one result (rows, no_segment,
    tails_dropped) per batch, plus the tokenizer's seconds and bytes."""
    buckets = Buckets.from_settings(settings)
    tok = tokenizer(cfg)
    every = [r for rows, *_ in batches for r in rows]
    stats = {"seconds": 0.0, "bytes": 0}

    def count(s: str) -> int:
        t0 = time.perf_counter()
        n = tok.count_texts([s])[0]
        stats["seconds"] += time.perf_counter() - t0
        stats["bytes"] += len(s.encode("utf-8"))
        return n

    # each document's segmentation depends on its text, count and seed only: documents go a row group of the
    # shard at a time (memory ~ a row group) and their results are put back in batch order
    docs = [(n, room, seed_name) for _, n_tokens, _, rooms, seeds in batches
            for n, room, seed_name in zip(n_tokens, rooms, seeds, strict=True)]
    segmented: list[Any] = [None] * len(docs)
    for positions, texts in texts_by_group(path, every):
        for i, text in zip(positions.tolist(), texts.to_pylist(), strict=True):
            n, room, seed_name = docs[i]
            rng = random.Random(f"{settings.seed}:segment:{seed_name}")
            seg = segment_text(text, n, count, buckets, int(settings.max_segments), room, rng)
            segmented[i] = seg, [hashlib.sha256(text[a:b].encode("utf-8")).hexdigest() for a, b in seg.spans]
    results = []
    done = iter(segmented)
    for _, _, doc_ids, _, _ in batches:
        out: dict[str, list[Any]] = {k: [] for k in SEGMENT_SCHEMA}
        reasons: dict[str, int] = {}
        tails = 0
        for doc_id in doc_ids:
            seg, digests = next(done)
            if not seg.spans:
                reasons[seg.stop_reason] = reasons.get(seg.stop_reason, 0) + 1
            elif seg.dropped_chars:
                tails += 1
            for j, ((a, b), t, digest) in enumerate(zip(seg.spans, seg.tokens, digests, strict=True)):
                out["doc_id"].append(doc_id)
                out["segment"].append(j)
                out["char_start"].append(a)
                out["char_end"].append(b)
                out["n_tokens"].append(t)
                out["content_sha256"].append(digest)
        results.append({"rows": out, "no_segment": reasons, "tails_dropped": tails})
    return {"batches": results, **stats}


def scatter_job(
    path: str, spill: str, rows: list[int], starts: list[int], ends: list[int], gparts: list[int],
    seqs: list[int],
) -> dict[int, list[int]]:
    """Write the selected texts of the shard at `path` (see row_groups_of) into its spill file, a
    row group of the shard at a time, one record batch per part and row group; returns part -> its batches."""
    index: dict[int, list[int]] = {}
    schema = pa.schema([("key", pa.int64()), ("content", pa.string())])
    gparts_arr, seqs_arr = np.asarray(gparts, dtype=np.int64), np.asarray(seqs, dtype=np.int64)
    n_batches = 0
    with ipc.new_file(spill, schema, options=SPILL_OPTIONS) as w:
        for positions, local, column in row_groups_of(path, rows):
            order = np.lexsort((seqs_arr[positions], gparts_arr[positions]))
            cuts = np.flatnonzero(np.diff(gparts_arr[positions][order])) + 1
            for chunk in np.split(order, cuts):
                if not len(chunk):
                    continue
                at = positions[chunk].tolist()
                contents = [  # one part's rows at a time: a document cut into segments is taken once per segment
                    t if starts[i] == 0 and ends[i] == len(t) else t[starts[i]:ends[i]]
                    for t, i in zip(column.take(pa.array(local[chunk])).to_pylist(), at, strict=True)
                ]
                index.setdefault(int(gparts_arr[positions[chunk[0]]]), []).append(n_batches)
                n_batches += 1
                w.write_batch(pa.record_batch([pa.array(seqs_arr[at], pa.int64()), pa.array(contents, pa.string())],
                                              schema=schema))
    return index


def write_job(
    spills: list[tuple[str, int]], plan_part: pa.Table, out: str, tokenizer_name: str,
    zstd_level: int,
) -> tuple[int, str]:
    """Assemble one part from its spill batches and write it with fixed Parquet settings."""
    plan = pl.from_arrow(plan_part)
    found: dict[int, str] = {}
    by_file: dict[str, list[int]] = {}
    for spill, batch in spills:
        by_file.setdefault(spill, []).append(batch)
    for spill, batches in by_file.items():
        with ipc.open_file(spill) as r:
            for batch in batches:
                b = r.get_batch(batch)
                found.update(zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True))
    contents = [found[k] for k in plan["seq"].to_list()]
    table = part_table(plan, contents, tokenizer_name)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    settings = ParquetSettings(compression_level=zstd_level, use_dictionary=("source_type",))
    write_parquet(table, out, settings, row_groups=[0, table.num_rows])
    return table.num_rows, sha256_file(out)
