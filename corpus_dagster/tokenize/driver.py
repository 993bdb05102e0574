"""The tokenize stage's driver: published shards -> per-split Megatron datasets, token counts, _TOKENS.json.

A row group of a shard is the unit of work. The stage runs as plan / units / finish (`core.units`): the
plan writes the shard list (names, sha256, rows, rows per row group) and the tokenizer's identity into a
work folder keyed by the stage key; each unit reads one shard (checking its sha256), encodes one of its
row groups in batches and writes its token arrays per split into that folder, in any process on any
machine that mounts the artifacts root; the finish step streams the units' arrays strictly in shard,
row-group order through one writer (`write_streams`), one unit in memory at a time, so the output bytes
never depend on the worker count, the executor or which unit finished first. `build_token_streams` feeds
the same writer from an in-memory pool (at most `workers + 1` shards in flight); the rebuild check uses
it to prove the unit path's bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_path, atomic_write_bytes
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_hex
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.parallel import effective_workers
from corpus_dagster.core.progress import Log, Progress, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.core.units import Plan, done_elsewhere, remove_work_folders, run_units
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

SPLITS = ("train", "val")
SHARDS_MANIFEST = "_MANIFEST.json"
COUNTS_SCHEMA = pa.schema(
    [("id", pa.string()), ("n_tokens", pa.int32()), ("tokenizer", pa.string()), ("split", pa.string())]
)
# Row-group size of the counts table: a file-format constant (it changes no value, only the layout).
COUNTS_ROW_GROUP_ROWS = 1 << 20


@dataclass(frozen=True)
class ShardTask:
    """One published shard to tokenize, as the shards' manifest lists it."""

    index: int
    path: Path
    sha256: str
    rows: int  # of the whole shard, or of `row_group` when set
    row_group: int | None = None  # tokenize only this row group of the shard


@dataclass
class ShardTokens:
    """A tokenized shard: per-document counts in id order and the token arrays of each split."""

    ids: pa.Array
    n_tokens: np.ndarray
    split_codes: np.ndarray
    tokens: dict[str, np.ndarray]
    lengths: dict[str, np.ndarray]
    text_bytes: int


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


def read_shards_manifest(shards_dir: str | Path) -> tuple[dict[str, Any], bytes]:
    """The shards' `_MANIFEST.json` (parsed, and its bytes); TokenStreamError when missing or unreadable."""
    path = Path(shards_dir) / SHARDS_MANIFEST
    if not path.is_file():
        raise TokenStreamError(f"{path}: no shards manifest; materialize `shards`/`manifest` first")
    raw = path.read_bytes()
    try:
        manifest = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TokenStreamError(f"{path}: not valid JSON: {exc}") from exc
    for key in ("dataset", "version", "shards"):
        if key not in manifest:
            raise TokenStreamError(f"{path}: missing key {key!r}")
    return manifest, raw


def shard_tasks(shards_dir: str | Path, manifest: dict[str, Any]) -> list[ShardTask]:
    """The shards in manifest (id) order; TokenStreamError naming the first missing file."""
    tasks = []
    for i, entry in enumerate(manifest["shards"]):
        path = Path(shards_dir) / entry["name"]
        if not path.is_file():
            raise TokenStreamError(f"{path}: shard listed in {SHARDS_MANIFEST} is missing")
        tasks.append(ShardTask(i, path, entry["sha256"], int(entry["rows"])))
    return tasks


def tokenize_shard(task: ShardTask, tok: LoadedTokenizer, dtype: np.dtype, batch_docs: int) -> ShardTokens:
    """Read one shard (sha256 and row count checked), encode it in batches, group tokens by split."""
    data = task.path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != task.sha256:
        raise TokenStreamError(
            f"{task.path}: sha256 {digest} differs from {SHARDS_MANIFEST} ({task.sha256}); "
            f"the shards changed "
            f"after the manifest was written, rematerialize `shards`"
        )
    pf = pq.ParquetFile(pa.BufferReader(data))
    missing = {"id", "text", "split"} - set(pf.schema_arrow.names)
    if missing:
        raise TokenStreamError(f"{task.path}: missing column(s) {sorted(missing)}")
    groups = None if task.row_group is None else [task.row_group]
    if groups is not None and not 0 <= task.row_group < pf.num_row_groups:
        raise TokenStreamError(f"{task.path}: no row group {task.row_group} (the shard has {pf.num_row_groups})")
    ids, toks, lens, codes = [], [], [], []
    text_bytes = 0
    # use_threads=False: a shard is decoded on the thread that tokenizes it (the pool threads cost more
    # CPU than they save here: decoding is a few percent of encoding, and parallelism comes from workers)
    for batch in pf.iter_batches(batch_size=batch_docs, row_groups=groups, columns=["id", "text", "split"],
                                 use_threads=False):
        text = batch.column("text")
        if text.null_count:
            raise TokenStreamError(f"{task.path}: null text in a published shard")
        text_bytes += int(pc.sum(pc.binary_length(text)).as_py() or 0)
        t, n = tok.encode_documents(text.to_pylist(), dtype)
        split = batch.column("split")
        code = np.full(len(batch), 255, dtype=np.uint8)
        for k, name in enumerate(SPLITS):
            code[pc.equal(split, name).to_numpy(zero_copy_only=False)] = k
        if (code == 255).any():
            bad = batch.column("id")[int(np.argmax(code == 255))].as_py()
            raise TokenStreamError(f"{task.path}: document {bad!r} has split outside {list(SPLITS)}")
        ids.append(batch.column("id"))
        toks.append(t)
        lens.append(n)
        codes.append(code)
    id_arr = pa.concat_arrays(ids) if ids else pa.array([], pa.string())
    if len(id_arr) != task.rows:
        where = f", {SHARDS_MANIFEST} says" if task.row_group is None else f" in row group {task.row_group}, the plan says"
        raise TokenStreamError(f"{task.path}: {len(id_arr)} rows{where} {task.rows}")
    if len(id_arr) > 1 and not pc.all(pc.less(id_arr[:-1], id_arr[1:])).as_py():
        raise TokenStreamError(f"{task.path}: ids are not strictly increasing (shards must be sorted by id)")
    tokens = np.concatenate(toks) if toks else np.zeros(0, dtype=dtype)
    lengths = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int32)
    split_codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.uint8)
    by_split, len_split = group_by_split(tokens, lengths, split_codes)
    return ShardTokens(id_arr, lengths, split_codes, by_split, len_split, text_bytes)


def group_by_split(
    tokens: np.ndarray, lengths: np.ndarray, split_codes: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The tokens and document lengths of each split, documents kept in order.

    A shard whose documents all belong to one split (the usual case) is passed through without copying.
    """
    present = np.bincount(split_codes, minlength=len(SPLITS)) if split_codes.size else None
    if present is None or np.count_nonzero(present) == 1:
        only = int(split_codes[0]) if split_codes.size else -1
        by_split = {name: tokens if k == only else tokens[:0] for k, name in enumerate(SPLITS)}
        len_split = {name: lengths if k == only else lengths[:0] for k, name in enumerate(SPLITS)}
        return by_split, len_split
    doc_of_token = np.repeat(split_codes, lengths)
    by_split = {name: tokens[doc_of_token == k] for k, name in enumerate(SPLITS)}
    len_split = {name: lengths[split_codes == k] for k, name in enumerate(SPLITS)}
    return by_split, len_split


# --- worker processes -------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def set_thread_budget(threads: int) -> None:
    """Cap the Rust thread pool of `tokenizers` (read once, when the pool starts) at `threads`."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)


def _worker_init(tok_cfg: dict[str, Any], threads: int, info: TokenizerInfo) -> None:
    set_thread_budget(threads)
    _WORKER["tok"] = load_tokenizer(tok_cfg, threads=threads, info=info)


def _worker_run(task: ShardTask, dtype: str, batch_docs: int) -> ShardTokens:
    return tokenize_shard(task, _WORKER["tok"], np.dtype(dtype), batch_docs)


def _results(
    tasks: list[ShardTask],
    tok: LoadedTokenizer,
    tok_cfg: dict[str, Any],
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


def resolve_parallelism(tok_cfg: dict[str, Any], workers: int, n_tasks: int) -> tuple[int, int]:
    """(worker processes, encode threads per worker): never more workers than shards or cores make useful."""
    workers = max(1, min(workers, n_tasks)) if n_tasks else 1
    threads = tok_cfg.get("threads_per_worker") or max(1, usable_cores() // workers)
    return workers, int(threads)


def write_streams(
    folder: Path,
    results: Iterable[ShardTokens],
    *,
    tok_cfg: dict[str, Any],
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
    writers = {s: SplitWriter(folder, s, dtype, tok_cfg["max_file_bytes"]) for s in SPLITS}
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
        max_file_bytes=tok_cfg["max_file_bytes"],
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
    shards_dir: str | Path, out_dir: str | Path, tok_cfg: dict[str, Any], *, workers: int = 1
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
            _results(tasks, tok, tok_cfg, dtype, tok_cfg["batch_docs"], workers, threads),
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


# --- The stage as the Dagster layer runs it: keyed by the published manifest's bytes and the settings -----

STAGE = "tokens"
CODE_VERSION = "1"
# tokenize keys that never change an output byte live in config.EXECUTION_KEYS; the rest decide the files.


def tokens_key(layout: Layout, resolved: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the token streams: the shards manifest's content hash and the tokenize settings."""
    _manifest, raw = read_shards_manifest(layout.shards)
    inputs = {"shards_manifest_sha256": sha256_hex(raw)}
    return stage_key(STAGE, CODE_VERSION, inputs, output_settings(resolved, "tokenize")), inputs


class StreamsRun(NamedTuple):
    """One materialization of the stage: the build (None when the key was unchanged), the manifest, the key."""

    result: BuildResult | None
    manifest: dict[str, Any]
    cached: bool
    key: str


# --- Units: one per row group of a published shard, runnable by any executor that mounts the artifacts root
#
# A row group (at most publish.row_group_max_bytes of data) bounds a unit's memory and lets a corpus of
# few large shards spread over every worker; the streams append the units in shard, row-group order.
#
# stages/tokens/.work-<key>/           the work folder of one key (hidden: not a stage output, kept by
#   _PLAN.json                         records.begin and records.commit; finish removes it)
#   units/shard-00000-rg0000.json      a unit's completion marker, written last: files and their sizes
#   units/shard-00000-rg0000.docs.arrow     id, n_tokens (int32), split code (uint8) of every document, id order
#   units/shard-00000-rg0000.tokens-<split>.npy    the split's tokens, documents back to back
#   units/shard-00000-rg0000.lengths-<split>.npy   the split's document lengths (int32)
# Unit files sit one level below the work folder so `records.begin` (run by a plan under the lock) never
# removes the temp file of a unit that is being written by another process without the lock.

PLAN_NAME = "_PLAN.json"
WORK_PREFIX = ".work-"


def work_folder(layout: Layout, key: str) -> Path:
    """The work folder of one tokens key: the plan and every unit's token arrays."""
    return layout.stage(STAGE) / f"{WORK_PREFIX}{key}"


def unit_name(index: int, row_group: int) -> str:
    """The unit of one row group of the shard at position `index` of the shards' manifest."""
    return f"shard-{index:05d}-rg{row_group:04d}"


def row_group_rows(path: Path) -> list[int]:
    """Rows of every row group of a shard (its Parquet footer only)."""
    meta = pq.read_metadata(path)
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def plan_units(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The units of a plan, in stream order: every row group of every shard (unit name, shard index, row group,
    rows), from the plan's shard list."""
    return [{"unit": unit_name(i, g), "shard": i, "row_group": g, "rows": rows}
            for i, s in enumerate(plan["shards"]) for g, rows in enumerate(s["row_groups"])]


def read_plan(layout: Layout, key: str) -> dict[str, Any]:
    """The plan of a key; TokenStreamError naming the work folder when there is none (or a damaged one)."""
    work = work_folder(layout, key)
    path = work / PLAN_NAME
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        plan = None
    if not isinstance(plan, dict) or plan.get("key") != key:
        raise TokenStreamError(
            f"{work}: no token-streams plan for key {key} ({PLAN_NAME} missing or damaged); "
            f"run plan_token_streams first"
        )
    return plan


def _unit_files(unit: str) -> list[str]:
    return [f"{unit}.docs.arrow"] + [f"{unit}.{kind}-{s}.npy" for s in SPLITS for kind in ("tokens", "lengths")]


def _unit_marker(units: Path, unit: str, key: str) -> dict[str, Any] | None:
    """A unit's marker when its outputs are complete (every file there with its recorded size), else None."""
    try:
        marker = json.loads((units / f"{unit}.json").read_text(encoding="utf-8"))
        if marker["key"] != key or sorted(marker["files"]) != sorted(_unit_files(unit)):
            return None
        if all((units / name).stat().st_size == size for name, size in marker["files"].items()):
            return marker
    except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
        pass
    return None


def _remove_work_folders(layout: Layout, keep: str | None) -> None:
    """Remove the work folders of every key but `keep` (a changed input or setting made their units useless;
    a committed key needs none)."""
    remove_work_folders(layout.stage(STAGE), WORK_PREFIX, work_folder(layout, keep) if keep is not None else None)


def _cached_manifest(layout: Layout) -> dict[str, Any]:
    return json.loads((layout.tokens / MANIFEST_NAME).read_text(encoding="utf-8"))


@records.locked(lambda a: "tokens")
def plan_token_streams(layout: Layout, resolved: dict[str, Any], log: Log | None = None) -> Plan:
    """Decide the tokens key; cached: the manifest and no units. Else write the plan (the shard list with
    sha256 and rows, the tokenizer's identity and dtype) into the key's work folder and name the units still
    to run, one per row group of each shard (`shard-00000-rg0000`, ...). A complete plan of the same key is
    reused with every unit output already written (resume); work folders of other keys are removed."""
    key, _inputs = tokens_key(layout, resolved)
    if records.cached(layout.stage(STAGE), key) is not None:
        _remove_work_folders(layout, keep=None)
        manifest = _cached_manifest(layout)
        return Plan(key, (), cached={"manifest": manifest, "n_docs": manifest["n_docs"],
                                     "n_tokens": manifest["n_tokens"]})
    records.begin(layout.stage(STAGE))
    _remove_work_folders(layout, keep=key)
    shards_manifest, shards_raw = read_shards_manifest(layout.shards)
    tasks = shard_tasks(layout.shards, shards_manifest)  # a missing shard fails here, before any unit
    shards = [{"name": t.path.name, "sha256": t.sha256, "rows": t.rows, "row_groups": row_group_rows(t.path)}
              for t in tasks]
    work = work_folder(layout, key)
    try:
        plan = read_plan(layout, key)
        reused = plan.get("shards") == shards
    except TokenStreamError:
        reused = False
    if not reused:
        tok_cfg = resolved["tokenize"]
        tok = load_tokenizer(tok_cfg, threads=1)  # an unloadable tokenizer fails here, before any unit
        plan = {
            "stage": STAGE,
            "key": key,
            "shards_manifest_sha256": hashlib.sha256(shards_raw).hexdigest(),
            "tokenizer": dataclasses.asdict(tok.info),
            "vocab_sha256": tok.impl.vocab_sha256(),
            "dtype": token_dtype(tok.info.vocab_size).name,
            "engine": tok.engine,
            "shards": shards,
        }
        atomic_write_bytes(work / PLAN_NAME, (json.dumps(plan, indent=1, sort_keys=True) + "\n").encode())
    units = work / "units"
    all_units = plan_units(plan)
    todo = tuple(u["unit"] for u in all_units if _unit_marker(units, u["unit"], key) is None)
    n = len(all_units)
    if log is not None:
        log(f"token_streams: {n} unit(s) ({len(shards)} shard(s)) planned in {work}, {n - len(todo)} already done")
    return Plan(key, todo, info={"work": str(work), "n_units": n, "units_done": n - len(todo)})


_UNIT_TOKENIZERS: dict[str, LoadedTokenizer] = {}


def unit_threads(tok_cfg: dict[str, Any]) -> int:
    """Encode threads of a unit: `tokenize.threads_per_worker`, else RAYON_NUM_THREADS, else 1 (a unit never
    assumes it has the machine: an executor may run one per core)."""
    if tok_cfg.get("threads_per_worker"):
        return int(tok_cfg["threads_per_worker"])
    try:
        return max(1, int(os.environ.get("RAYON_NUM_THREADS", "1")))
    except ValueError:
        return 1


def _unit_tokenizer(tok_cfg: dict[str, Any], threads: int, info: TokenizerInfo) -> LoadedTokenizer:
    """The tokenizer of a unit, loaded once per process (a pool worker runs many units)."""
    cache_key = json.dumps([tok_cfg, threads, dataclasses.asdict(info)], sort_keys=True, default=str)
    if cache_key not in _UNIT_TOKENIZERS:
        _UNIT_TOKENIZERS.clear()
        _UNIT_TOKENIZERS[cache_key] = load_tokenizer(tok_cfg, threads=threads, info=info)
    return _UNIT_TOKENIZERS[cache_key]


def _save_npy(path: Path, array: np.ndarray) -> int:
    with atomic_path(path) as tmp:  # the temp name keeps `.npy` last, so np.save does not append one
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
    return path.stat().st_size


def _save_docs(path: Path, res: ShardTokens) -> int:
    table = pa.table({"id": res.ids, "n_tokens": pa.array(res.n_tokens, pa.int32()),
                      "split": pa.array(res.split_codes, pa.uint8())})
    with atomic_path(path) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
    return path.stat().st_size


@done_elsewhere(lambda layout: layout.stage(STAGE))
def run_token_unit(layout: Layout, resolved: dict[str, Any], key: str, unit: str) -> None:
    """Tokenize one row group of a shard of a plan into its unit files (atomically; nothing to do when already
    complete).

    Takes no lock: it writes only its own files in the key's work folder, so any process on any machine
    that mounts the artifacts root can run it, and two runs of one unit write the same bytes.
    """
    plan = read_plan(layout, key)
    entry = next((u for u in plan_units(plan) if u["unit"] == unit), None)
    if entry is None:
        raise TokenStreamError(f"{work_folder(layout, key)}: unit {unit!r} is not in {PLAN_NAME}")
    units = work_folder(layout, key) / "units"
    if _unit_marker(units, unit, key) is not None:
        return
    current, _inputs = tokens_key(layout, resolved)
    if current != key:
        raise TokenStreamError(
            f"{work_folder(layout, key)}: planned for key {key}, but the shards and tokenize settings here give "
            f"{current}; run plan_token_streams again with this config"
        )
    tok_cfg = resolved["tokenize"]
    threads = unit_threads(tok_cfg)
    set_thread_budget(threads)
    tok = _unit_tokenizer(tok_cfg, threads, TokenizerInfo(**plan["tokenizer"]))
    shard = plan["shards"][entry["shard"]]
    task = ShardTask(entry["shard"], layout.shards / shard["name"], shard["sha256"], int(entry["rows"]),
                     row_group=int(entry["row_group"]))
    started, clock = time.time(), time.perf_counter()
    res = tokenize_shard(task, tok, np.dtype(plan["dtype"]), tok_cfg["batch_docs"])
    files = {f"{unit}.docs.arrow": _save_docs(units / f"{unit}.docs.arrow", res)}
    for s in SPLITS:
        files[f"{unit}.tokens-{s}.npy"] = _save_npy(units / f"{unit}.tokens-{s}.npy", res.tokens[s])
        files[f"{unit}.lengths-{s}.npy"] = _save_npy(units / f"{unit}.lengths-{s}.npy", res.lengths[s])
    marker = {"unit": unit, "key": key, "shard": shard["name"], "row_group": entry["row_group"], "rows": len(res.ids),
              "text_bytes": res.text_bytes, "files": files, "started_at": started,
              "seconds": round(time.perf_counter() - clock, 3)}
    atomic_write_bytes(units / f"{unit}.json", (json.dumps(marker, indent=1, sort_keys=True) + "\n").encode())


def _load_unit(units: Path, unit: str, marker: dict[str, Any], rows: int) -> ShardTokens:
    """One unit's arrays, read back exactly as its row group was tokenized."""
    path = units / f"{unit}.docs.arrow"
    with pa.OSFile(str(path), "rb") as source:
        docs = pa.ipc.open_file(source).read_all()
    if docs.num_rows != rows:
        raise TokenStreamError(f"{path}: {docs.num_rows} documents, the plan's unit has {rows}; rerun the unit")
    tokens, lengths = {}, {}
    for s in SPLITS:
        tokens[s] = np.load(units / f"{unit}.tokens-{s}.npy", allow_pickle=False)
        lengths[s] = np.load(units / f"{unit}.lengths-{s}.npy", allow_pickle=False)
    return ShardTokens(
        ids=docs.column("id").combine_chunks(),
        n_tokens=docs.column("n_tokens").to_numpy(),
        split_codes=docs.column("split").to_numpy(),
        tokens=tokens,
        lengths=lengths,
        text_bytes=int(marker["text_bytes"]),
    )


@records.locked(lambda a: "tokens")
def finish_token_streams(layout: Layout, resolved: dict[str, Any], key: str, log: Log | None = None) -> StreamsRun:
    """Assemble the units' arrays in shard order into tokens/<dataset>/<version>/ (replaced whole,
    atomically), commit the stage record and remove the work folder. Cached: the published result."""
    start = time.perf_counter()
    folder = layout.stage(STAGE)
    if records.cached(folder, key) is not None:
        _remove_work_folders(layout, keep=None)
        return StreamsRun(None, _cached_manifest(layout), True, key)
    work = work_folder(layout, key)
    plan = read_plan(layout, key)
    current, inputs = tokens_key(layout, resolved)
    shards_manifest, shards_raw = read_shards_manifest(layout.shards)
    if current != key or hashlib.sha256(shards_raw).hexdigest() != plan["shards_manifest_sha256"]:
        raise TokenStreamError(
            f"{work}: planned for key {key}, but the shards and tokenize settings now give {current}; "
            f"run plan_token_streams again"
        )
    units = work / "units"
    all_units = plan_units(plan)
    markers = {u["unit"]: _unit_marker(units, u["unit"], key) for u in all_units}
    missing = [u for u, m in markers.items() if m is None]
    if missing:
        raise TokenStreamError(
            f"{units}: {len(missing)} unit(s) have no complete output ({', '.join(missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}); run run_token_unit for them, then finish again"
        )
    tok_cfg = resolved["tokenize"]
    workers, threads = resolve_parallelism(tok_cfg, resolved["workers"], len(all_units))
    records.begin(folder)
    records.begin(layout.tokens.parent)
    outputs = (_load_unit(units, u["unit"], markers[u["unit"]], int(u["rows"])) for u in all_units)
    with heartbeat(log, "token_streams", interval_of(resolved), "writing the split files"):
        with atomic_dir(layout.tokens) as tmp:
            manifest, text_bytes = write_streams(
                tmp, outputs, tok_cfg=tok_cfg, info=TokenizerInfo(**plan["tokenizer"]),
                vocab_sha256=plan["vocab_sha256"], dtype=np.dtype(plan["dtype"]), shards_manifest=shards_manifest,
                shards_raw=shards_raw, n_shards=len(plan["shards"]),
            )
    progress = Progress(log, "token_streams", interval_s=interval_of(resolved))
    progress.update(manifest["n_docs"], text_bytes)
    progress.finish()
    names = sorted(p.name for p in layout.tokens.iterdir() if p.is_file())
    records.commit(folder, StageRecord(
        stage=STAGE, key=key, code_version=CODE_VERSION, inputs=inputs, settings=output_settings(resolved, "tokenize"),
        output_dir=os.path.relpath(layout.tokens, folder), outputs=records.describe_outputs(layout.tokens, names),
        files={"streams": names}, stats={"n_docs": manifest["n_docs"], "n_tokens": manifest["n_tokens"]},
    ))
    shutil.rmtree(work, ignore_errors=True)
    # standalone (units run elsewhere): the time since the first unit started, on the units' clocks
    first = min((float(m["started_at"]) for m in markers.values() if m is not None), default=None)
    elapsed = max(time.time() - first, 0.0) if first is not None else time.perf_counter() - start
    result = BuildResult(layout.tokens, manifest, plan["engine"], workers, threads, elapsed, text_bytes)
    return StreamsRun(result, manifest, False, key)


@records.locked(lambda a: "tokens")
def run_token_streams(layout: Layout, resolved: dict[str, Any], log: Log | None = None) -> StreamsRun:
    """Build tokens/<dataset>/<version>/ unless its key is unchanged: plan, every unit through a pool of
    `workers` processes, finish. The lock is held throughout, so a concurrent run waits and finds it cached.

    `log` (a callable taking a line) hears a heartbeat every `progress.interval_s` seconds and a closing line.
    """
    start = time.perf_counter()
    plan = plan_token_streams(layout, resolved, log)
    if plan.cached is not None:
        return StreamsRun(None, plan.cached["manifest"], True, plan.key)
    tok_cfg = resolved["tokenize"]
    workers, threads = resolve_parallelism(tok_cfg, resolved["workers"], plan.info["n_units"])
    # the units get this run's thread budget: `threads` encode threads in each of `workers` processes
    budget = {**resolved, "tokenize": {**tok_cfg, "threads_per_worker": threads}}
    with heartbeat(log, "token_streams", interval_of(resolved), f"{len(plan.units)} shard(s) to tokenize"):
        run_units(run_token_unit, (layout, budget, plan.key), plan.units, workers)
    run = finish_token_streams(layout, resolved, plan.key, log)
    assert run.result is not None  # the lock is held: nobody committed the key in between
    result = dataclasses.replace(run.result, workers=workers, threads=threads,
                                 elapsed_s=time.perf_counter() - start)
    return run._replace(result=result)


def token_counts_file(layout: Layout) -> Path:
    """The per-document token counts of the current token streams (id, n_tokens, tokenizer, split)."""
    record = records.require_record(layout.stage(STAGE), "token_streams")
    streams = records.record_files(layout.stage(STAGE), record, "streams")  # checked against the record
    return next(p for p in streams if p.name == COUNTS_NAME)


# --- Checks of the built streams, as the Dagster layer runs them (the check logic is in tokenize.checks) ----

def check_streams_counts(layout: Layout) -> CheckReport:
    """_TOKENS.json totals equal the per-document counts and the .idx sizes; files match their sha256."""
    from corpus_dagster.tokenize.checks import check_counts

    return check_counts(layout.tokens)


def check_streams_decode(layout: Layout, resolved: dict[str, Any]) -> CheckReport:
    """A sample of documents decodes back to exactly their shard text."""
    from corpus_dagster.tokenize.checks import check_decode_sample

    return check_decode_sample(layout.shards, layout.tokens, resolved["tokenize"])


def check_streams_rebuild(layout: Layout, resolved: dict[str, Any]) -> CheckReport:
    """A rebuild with another worker count gives the same streams: a seeded sample of document batches
    (`tokenize.rebuild_check_batches`, seeded by the stage key) or, with 0, every file byte for byte."""
    from corpus_dagster.tokenize.checks import check_rebuild, check_rebuild_sample

    sample = int(resolved["tokenize"]["rebuild_check_batches"])
    if not sample:
        return check_rebuild(layout.shards, layout.tokens, resolved["tokenize"], resolved["workers"])
    seed = records.require_record(layout.stage(STAGE), "token_streams").key
    return check_rebuild_sample(layout.shards, layout.tokens, resolved["tokenize"], resolved["workers"], sample, seed)
