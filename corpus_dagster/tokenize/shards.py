"""Published shards as the tokenize stage reads them: the shards' manifest, one task per shard (or row group),
and a shard (or one of its row groups) tokenized into per-split token arrays.

The split codes, ids and token arrays here are what every path (units, the in-memory build, the checks)
feeds to the one writer of the streams (`tokenize.streams.write_streams`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.errors import TokenStreamError
from corpus_dagster.lib.tokenizers import LoadedTokenizer

SPLITS = ("train", "val")
SHARDS_MANIFEST = "_MANIFEST.json"


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


def row_group_rows(path: Path) -> list[int]:
    """Rows of every row group of a shard (its Parquet footer only)."""
    meta = pq.read_metadata(path)
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]



def open_shard(task: ShardTask) -> pq.ParquetFile:
    """A shard read once into memory and checked against its sha256 in the shards manifest; its row groups are
    then decoded from those same bytes. TokenStreamError when they differ."""
    data = task.path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != task.sha256:
        raise TokenStreamError(
            f"{task.path}: sha256 {digest} differs from {SHARDS_MANIFEST} ({task.sha256}); "
            f"the shards changed "
            f"after the manifest was written, rematerialize `shards`"
        )
    return pq.ParquetFile(pa.BufferReader(data))


def tokenize_shard(task: ShardTask, tok: LoadedTokenizer, dtype: np.dtype, batch_docs: int) -> ShardTokens:
    """Read one shard (sha256 and row count checked), encode it in batches, group tokens by split."""
    pf = open_shard(task)
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

