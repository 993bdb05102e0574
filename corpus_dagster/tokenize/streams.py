"""Token streams from tokenized shards: the one writer of the split files, counts table and _TOKENS.json
(`write_streams`), and the in-memory build (`build_token_streams`) that feeds it from a process pool.

Whichever path tokenized the shards, `write_streams` takes them in shard order, one shard in memory at a
time, so the output bytes never depend on the worker count, the executor or which shard finished first.
The rebuild check uses `build_token_streams` to prove the stage's unit path gives the same bytes.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.atomic import atomic_dir
from corpus_dagster.core.parallel import effective_workers
from corpus_dagster.core.settings import TokenizeSettings
from corpus_dagster.lib.tokenizers import LoadedTokenizer, TokenizerInfo, load_tokenizer
from corpus_dagster.tokenize.indexed import PartInfo, SplitWriter, token_dtype
from corpus_dagster.tokenize.manifest import (
    COUNTS_NAME,
    MANIFEST_NAME,
    TokenStreamError,
    build_manifest,
    dump_manifest,
    manifest_violations,
)
from corpus_dagster.tokenize.shards import (
    SPLITS,
    ShardTask,
    ShardTokens,
    read_shards_manifest,
    shard_tasks,
    tokenize_shard,
)

COUNTS_SCHEMA = pa.schema(
    [("id", pa.string()), ("n_tokens", pa.int32()), ("tokenizer", pa.string()), ("split", pa.string())]
)
# Row-group size of the counts table: a file-format constant (it changes no value, only the layout).
COUNTS_ROW_GROUP_ROWS = 1 << 20


@dataclass
class BuildResult:
    """What a build wrote and how fast it went (timings stay out of the files)."""

    out_dir: Path
    manifest: dict[str, Any]
    engine: str
    workers: int
    threads: int
    elapsed_s: float
    text_bytes: int
    stats: dict[str, float] = field(default_factory=dict)


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# --- worker processes -------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def set_thread_budget(threads: int) -> None:
    """Cap the Rust thread pool of `tokenizers` (read once, when the pool starts) at `threads`."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)


def _worker_init(tok_cfg: TokenizeSettings, threads: int, info: TokenizerInfo) -> None:
    set_thread_budget(threads)
    _WORKER["tok"] = load_tokenizer(tok_cfg, threads=threads, info=info)


def _worker_run(task: ShardTask, dtype: str, batch_docs: int) -> ShardTokens:
    return tokenize_shard(task, _WORKER["tok"], np.dtype(dtype), batch_docs)


def _results(
    tasks: list[ShardTask],
    tok: LoadedTokenizer,
    tok_cfg: TokenizeSettings,
    dtype: np.dtype,
    batch_docs: int,
    workers: int,
    threads: int,
) -> Iterator[ShardTokens]:
    """Tokenized shards in task order: in this process for one worker, else a spawned process pool."""
    workers = effective_workers(workers)
    if workers <= 1:
        for task in tasks:
            yield tokenize_shard(task, tok, dtype, batch_docs)
        return
    # spawn, not fork: the parent may hold threads (Dagster, tokenizers' pool) that fork would copy broken
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_worker_init, initargs=(tok_cfg, threads, tok.info)
    )
    try:
        pending: deque[Future[ShardTokens]] = deque()
        queue = iter(tasks)
        for task in queue:
            pending.append(pool.submit(_worker_run, task, dtype.name, batch_docs))
            if len(pending) > workers:
                break
        while pending:
            result = pending.popleft().result()
            nxt = next(queue, None)
            if nxt is not None:
                pending.append(pool.submit(_worker_run, nxt, dtype.name, batch_docs))
            yield result
    finally:  # on an error (or an abandoned generator) drop queued shards instead of tokenizing them
        pool.shutdown(wait=True, cancel_futures=True)


class _CountsWriter:
    """Streams the (id, n_tokens, tokenizer, split) table to Parquet in fixed-size row groups."""

    def __init__(self, path: Path, tokenizer: str):
        self.path = path
        self.tokenizer = tokenizer
        self.writer = pq.ParquetWriter(
            path,
            COUNTS_SCHEMA,
            compression="zstd",
            compression_level=3,
            use_dictionary=True,
            write_statistics=True,
            version="2.6",
            data_page_version="1.0",
        )
        self.buffer: list[pa.Table] = []
        self.buffered = 0
        self.rows = 0

    def add(self, ids: pa.Array, n_tokens: np.ndarray, split_codes: np.ndarray) -> None:
        split = np.asarray(SPLITS, dtype=object)[split_codes]
        table = pa.table(
            [
                ids,
                pa.array(n_tokens, pa.int32()),
                pa.array([self.tokenizer] * len(ids), pa.string()),
                pa.array(split, pa.string()),
            ],
            schema=COUNTS_SCHEMA,
        )
        self.buffer.append(table)
        self.buffered += table.num_rows
        while self.buffered >= COUNTS_ROW_GROUP_ROWS:
            self._flush(COUNTS_ROW_GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        table = pa.concat_tables(self.buffer)
        self.writer.write_table(table.slice(0, rows), row_group_size=rows)
        rest = table.slice(rows)
        self.buffer = [rest] if rest.num_rows else []
        self.buffered = rest.num_rows
        self.rows += rows

    def close(self) -> dict[str, Any]:
        if self.buffered:
            self._flush(self.buffered)
        self.writer.close()
        data = self.path.read_bytes()
        return {
            "name": self.path.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "rows": self.rows,
        }


def resolve_parallelism(tok_cfg: TokenizeSettings, workers: int, n_tasks: int) -> tuple[int, int]:
    """(worker processes, encode threads per worker): never more workers than shards or cores make useful."""
    workers = max(1, min(workers, n_tasks)) if n_tasks else 1
    threads = tok_cfg.threads_per_worker or max(1, usable_cores() // workers)
    return workers, int(threads)


def write_streams(
    folder: Path,
    results: Iterable[ShardTokens],
    *,
    tok_cfg: TokenizeSettings,
    info: TokenizerInfo,
    vocab_sha256: str,
    dtype: np.dtype,
    shards_manifest: dict[str, Any],
    shards_raw: bytes,
    n_shards: int,
) -> tuple[dict[str, Any], int]:
    """Write tokenized shards (in shard order) into `folder` as split files, counts table and _TOKENS.json.

    The one writer of the streams' bytes, whichever path tokenized the shards. Each shard's arrays are
    dropped before the next is read, so memory holds one shard. Returns (manifest, text bytes).
    """
    text_bytes = 0
    last_id: str | None = None
    writers = {s: SplitWriter(folder, s, dtype, tok_cfg.max_file_bytes) for s in SPLITS}
    counts = _CountsWriter(folder / COUNTS_NAME, info.name)
    for res in results:
        if len(res.ids):
            first = res.ids[0].as_py()
            if last_id is not None and not first > last_id:
                raise TokenStreamError(f"shard ids out of order: {first!r} follows {last_id!r}")
            last_id = res.ids[-1].as_py()
        for s in SPLITS:
            writers[s].add(res.tokens[s], res.lengths[s])
        counts.add(res.ids, res.n_tokens, res.split_codes)
        text_bytes += res.text_bytes
        del res  # before the next shard is read
    parts: dict[str, list[PartInfo]] = {s: writers[s].close() for s in SPLITS}
    counts_entry = counts.close()
    manifest = build_manifest(
        dataset=shards_manifest["dataset"],
        version=shards_manifest["version"],
        tokenizer=info,
        vocab_sha256=vocab_sha256,
        dtype=dtype.name,
        max_file_bytes=tok_cfg.max_file_bytes,
        splits=parts,
        counts=counts_entry,
        source={
            "manifest_sha256": hashlib.sha256(shards_raw).hexdigest(),
            "n_shards": n_shards,
            "config_sha256": shards_manifest.get("config_sha256"),
        },
    )
    violations = manifest_violations(manifest)
    if violations:  # a bug here, not bad input: refuse to publish it
        raise TokenStreamError(f"built {MANIFEST_NAME} breaks its schema: {violations}")
    (folder / MANIFEST_NAME).write_bytes(dump_manifest(manifest))
    return manifest, text_bytes


def build_token_streams(
    shards_dir: str | Path, out_dir: str | Path, tok_cfg: TokenizeSettings, *, workers: int = 1
) -> BuildResult:
    """Tokenize every published shard into `out_dir` (replaced whole, atomically) and return the manifest.

    `tok_cfg` is the resolved `tokenize` config section. Output bytes are identical for any `workers`.
    The shards stay in memory (at most `workers + 1` at once) instead of going through unit files: the
    rebuild check uses this path to prove the stage's unit path gives the same bytes.
    """
    start = time.perf_counter()
    shards_manifest, shards_raw = read_shards_manifest(shards_dir)
    tasks = shard_tasks(shards_dir, shards_manifest)
    workers, threads = resolve_parallelism(tok_cfg, workers, len(tasks))
    set_thread_budget(threads)
    tok = load_tokenizer(tok_cfg, threads=threads)
    dtype = token_dtype(tok.info.vocab_size)
    with atomic_dir(out_dir) as tmp:
        manifest, text_bytes = write_streams(
            tmp,
            _results(tasks, tok, tok_cfg, dtype, tok_cfg.batch_docs, workers, threads),
            tok_cfg=tok_cfg,
            info=tok.info,
            vocab_sha256=tok.impl.vocab_sha256(),
            dtype=dtype,
            shards_manifest=shards_manifest,
            shards_raw=shards_raw,
            n_shards=len(tasks),
        )
    elapsed = time.perf_counter() - start
    return BuildResult(Path(out_dir), manifest, tok.engine, workers, threads, elapsed, text_bytes)

