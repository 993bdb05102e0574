"""The release's worker jobs: what runs in the worker processes of a build and of its rebuild check.

Kept apart from the driver so a spawned worker imports only what the jobs need (pyarrow, polars, the
segmenter, the tokenizer), not the driver's other stages and the figures' matplotlib.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parquet import ParquetSettings, write_parquet
from corpus_dagster.core.settings import ReleaseSettings
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.rows import part_table
from corpus_dagster.release.segment import segment_text

SPILL_OPTIONS = ipc.IpcWriteOptions(compression="lz4")
# Columns of a unit's segment rows (content_sha256 as hex, so a unit is plain JSON)
SEGMENT_SCHEMA = {"doc_id": pl.String, "segment": pl.Int32, "char_start": pl.Int64, "char_end": pl.Int64,
                  "n_tokens": pl.Int32, "content_sha256": pl.String}

_TOKENIZERS: dict[str, Any] = {}


def tokenizer(cfg: Mapping[str, Any]) -> Any:
    """The plain text encoder (no special tokens), built once per process."""
    from corpus_dagster.lib.tokenizers import tokenizer_from_config

    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = tokenizer_from_config(cfg, section="release.tokenizer")
    return _TOKENIZERS[key]


def _count(cfg: Mapping[str, Any], texts: Sequence[str]) -> list[int]:
    return tokenizer(cfg).count_texts(list(texts))


def count_job(path: str, rows: list[int], cfg: dict[str, Any]) -> tuple[list[int], float, int]:
    texts = pq.read_table(path, columns=["text"])["text"].take(rows).to_pylist()
    t0 = time.perf_counter()
    counts = _count(cfg, texts)
    return counts, time.perf_counter() - t0, sum(len(t.encode("utf-8")) for t in texts)


def shard_texts(source: str | pa.Array) -> pa.Array:
    """The texts a job's rows index: a shard's whole text column (source: its path, read here) or the
    texts the caller already selected (source: an array; the rows are positions in it)."""
    if isinstance(source, pa.Array):
        return source
    # one contiguous array: a take per part from the chunked column would gather its chunks every time
    return pq.read_table(source, columns=["text"])["text"].combine_chunks()


def segment_job(
    source: str | pa.Array, batches: list[tuple[list[int], list[int], list[str], list[list[bool]], list[str]]],
    settings: ReleaseSettings, cfg: dict[str, Any],
) -> dict[str, Any]:
    """Segment the long documents of one shard, given as batches (rows, n_tokens, doc_ids, rooms, row ids
    seeding each document's choices; rows index `source`, see shard_texts): one result (rows, no_segment,
    tails_dropped) per batch, plus the tokenizer's seconds and bytes."""
    buckets = Buckets.from_settings(settings)
    tok = tokenizer(cfg)
    every = [r for rows, *_ in batches for r in rows]
    texts = iter(shard_texts(source).take(pa.array(every, pa.int64())).to_pylist() if every else [])
    stats = {"seconds": 0.0, "bytes": 0}

    def count(s: str) -> int:
        t0 = time.perf_counter()
        n = tok.count_texts([s])[0]
        stats["seconds"] += time.perf_counter() - t0
        stats["bytes"] += len(s.encode("utf-8"))
        return n

    results = []
    for _, n_tokens, doc_ids, rooms, seeds in batches:
        out: dict[str, list[Any]] = {k: [] for k in SEGMENT_SCHEMA}
        reasons: dict[str, int] = {}
        tails = 0
        for n, doc_id, room, seed_name in zip(n_tokens, doc_ids, rooms, seeds, strict=True):
            text = next(texts)
            rng = random.Random(f"{settings.seed}:segment:{seed_name}")
            seg = segment_text(text, n, count, buckets, int(settings.max_segments), room, rng)
            if not seg.spans:
                reasons[seg.stop_reason] = reasons.get(seg.stop_reason, 0) + 1
            elif seg.dropped_chars:
                tails += 1
            for j, ((a, b), t) in enumerate(zip(seg.spans, seg.tokens, strict=True)):
                out["doc_id"].append(doc_id)
                out["segment"].append(j)
                out["char_start"].append(a)
                out["char_end"].append(b)
                out["n_tokens"].append(t)
                out["content_sha256"].append(hashlib.sha256(text[a:b].encode("utf-8")).hexdigest())
        results.append({"rows": out, "no_segment": reasons, "tails_dropped": tails})
    return {"batches": results, **stats}


def scatter_job(
    source: str | pa.Array, spill: str, rows: list[int], starts: list[int], ends: list[int], gparts: list[int],
    seqs: list[int],
) -> dict[int, int]:
    """Write the selected texts of one shard (rows index `source`, see shard_texts), one record batch per
    part; returns part -> batch index."""
    texts = shard_texts(source)
    index: dict[int, int] = {}
    order = np.lexsort((np.asarray(seqs), np.asarray(gparts)))
    schema = pa.schema([("key", pa.int64()), ("content", pa.string())])
    with ipc.new_file(spill, schema, options=SPILL_OPTIONS) as w:
        gp = np.asarray(gparts)[order]
        cuts = np.flatnonzero(np.diff(gp)) + 1
        for chunk in np.split(order, cuts):
            if not len(chunk):
                continue
            sel = texts.take(pa.array([rows[i] for i in chunk])).to_pylist()
            contents = [
                t if starts[i] == 0 and ends[i] == len(t) else t[starts[i]:ends[i]]
                for t, i in zip(sel, chunk, strict=True)
            ]
            keys = [seqs[i] for i in chunk]
            index[int(gparts[chunk[0]])] = len(index)
            w.write_batch(pa.record_batch([pa.array(keys, pa.int64()), pa.array(contents, pa.string())], schema=schema))
    return index


def write_job(
    spills: list[tuple[str, int]], plan_part: pa.Table, out: str, tokenizer_name: str,
    keep_fields: list[str], zstd_level: int,
) -> tuple[int, str]:
    """Assemble one part from its spill batches and write it with fixed Parquet settings."""
    plan = pl.from_arrow(plan_part)
    found: dict[int, str] = {}
    for spill, batch in spills:
        with ipc.open_file(spill) as r:
            b = r.get_batch(batch)
        found.update(zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True))
    contents = [found[k] for k in plan["seq"].to_list()]
    table = part_table(plan, contents, tokenizer_name, keep_fields)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    settings = ParquetSettings(compression_level=zstd_level, use_dictionary=("source_type",))
    write_parquet(table, out, settings, row_groups=[0, table.num_rows])
    return table.num_rows, sha256_file(out)
