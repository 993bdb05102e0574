"""Write the published shards: global id order, split, minhash_cluster, fixed Parquet settings."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.documents import SHARD_SCHEMA, shard_name
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import ParquetSettings, parquet_writer
from corpus_dagster.core.settings import Settings
from corpus_dagster.publish.row_source import RowSource

ROW_OVERHEAD_BYTES = 64  # fixed-width columns and offsets of one row, for the row-group size estimate
DICT_COLUMNS = ["source_id", "license_spdx", "lang", "split"]


@dataclass(frozen=True)
class SourceDocs:
    """One source's final per-part document files, in k order (ids `<source_id>:<k>`)."""

    source_id: str
    files: list[Path]


@dataclass
class Annotations:
    """What the global dedup decided about rows: near-duplicate cluster keys (dropped rows are already gone)."""

    clusters: pl.DataFrame | None = None  # columns id, cluster_min_id


@dataclass
class ShardsResult:
    """What build_shards wrote."""

    shards: list[dict[str, Any]] = field(default_factory=list)  # name, sha256, rows
    n_docs: int = 0
    seconds: float = 0.0
    split_counts: dict[str, int] = field(default_factory=dict)


def source_order(source_ids: list[str]) -> list[str]:
    """Sources in the byte order of `<source_id>:`, which is the byte order of all their ids.

    ':' never occurs in a source id, so comparing two ids of different sources is decided inside the
    `<source_id>:` prefixes: concatenating per-source sorted ids in this order sorts the whole corpus.
    """
    return sorted(source_ids, key=lambda s: (s + ":").encode("utf-8"))


def ordered_files(sources: list[SourceDocs]) -> list[Path]:
    """Every input file, sources in `source_order` and each source's files in k order; the plan's file index."""
    by_id = {s.source_id: s for s in sources}
    return [path for sid in source_order(list(by_id)) for path in by_id[sid].files]


def plan_rows(files: list[Path]) -> pl.DataFrame:
    """The global row plan: id, file index, row index in file, sorted by id; memory ~ ids only."""
    frames = []
    for file_index, path in enumerate(files):
        ids = pq.read_table(path, columns=["id"]).column("id")
        frames.append(
            pl.DataFrame(
                {
                    "id": pl.from_arrow(ids),
                    "file": pl.Series(np.full(len(ids), file_index, dtype=np.int32)),
                    "row": pl.Series(np.arange(len(ids), dtype=np.int64)),
                }
            )
        )
    if not frames:
        return pl.DataFrame(schema={"id": pl.String, "file": pl.Int32, "row": pl.Int64})
    plan = pl.concat(frames)
    # Sort within each source only would suffice (see source_order); one global sort is simpler and the
    # same result: the id column is small next to the texts.
    plan = plan.sort("id", maintain_order=True)
    dup = plan.select(pl.col("id").is_duplicated().any()).item()
    if dup:
        first = plan.filter(pl.col("id").is_duplicated()).get_column("id")[0]
        raise ValueError(f"duplicate document id {first!r} in the inputs")
    plan = plan.with_row_index("row_index").with_columns(pl.col("row_index").cast(pl.Int64))
    return plan


def cluster_index(plan: pl.DataFrame, annotations: Annotations) -> np.ndarray:
    """minhash_cluster per planned row: the smallest global row index of the kept rows of its cluster."""
    own = plan.get_column("row_index").to_numpy().astype(np.int64)
    if annotations.clusters is None or annotations.clusters.height == 0:
        return own
    joined = plan.select("id", "row_index").join(annotations.clusters.select("id", "cluster_min_id"), on="id", how="left")
    joined = joined.with_columns(
        pl.col("row_index").min().over("cluster_min_id").alias("cluster_first")
    ).with_columns(
        pl.when(pl.col("cluster_min_id").is_null()).then(pl.col("row_index")).otherwise(pl.col("cluster_first")).alias("mc")
    )
    return joined.get_column("mc").to_numpy().astype(np.int64)


def split_column(sha: pa.Array, val_permille: int) -> pa.Array:
    """`val` when the first 8 bytes of sha256 (big-endian) mod 1000 < val_permille, else `train`."""
    raw = np.frombuffer(sha.buffers()[1], dtype=np.uint8)[sha.offset * 32 : (sha.offset + len(sha)) * 32]
    first8 = raw.reshape(-1, 32)[:, :8].copy().view(">u8").reshape(-1)
    is_val = (first8 % np.uint64(1000)) < np.uint64(val_permille)
    return pa.array(np.where(is_val, "val", "train"), pa.string())


def shard_table(t: pa.Table, minhash_cluster: np.ndarray, val_permille: int) -> pa.Table:
    """Rows of the input files (`RowSource` columns) as shard rows: the published schema and its split."""
    return pa.table(
        {
            "id": t["id"],
            "text": t["text"],
            "source_id": t["source_id"],
            "url": t["url"],
            "license_spdx": t["license_spdx"],
            "lang": t["lang"],
            "n_chars": t["n_chars"].cast(pa.int32()),
            "sha256": t["sha256"].cast(pa.binary(32)),
            "minhash_cluster": pa.array(minhash_cluster, pa.int64()),
            "pii_redactions": t["pii_redactions"].cast(pa.int32()),
            "split": split_column(t["sha256"].combine_chunks(), val_permille),
        },
        schema=SHARD_SCHEMA,
    )


def row_sizes(table: pa.Table) -> np.ndarray:
    """Each row's estimated bytes, what row groups are cut by."""
    return ROW_OVERHEAD_BYTES + sum(
        pc.fill_null(pc.binary_length(table[c]), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        for c in ("id", "text", "source_id", "url", "license_spdx", "lang", "split")
    )


SHARD_COLUMNS = ["id", "text", "source_id", "url", "license_spdx", "lang", "n_chars", "sha256", "pii_redactions"]


def write_shard(
    files: list[Path],
    file_idx: np.ndarray,
    row_idx: np.ndarray,
    minhash_cluster: np.ndarray,
    out_path: Path,
    val_permille: int,
    row_group_max_bytes: int,
    zstd_level: int,
) -> dict[str, Any]:
    """Write one shard with fixed writer settings; returns name, sha256 and rows.

    Streams: rows come a window at a time (`RowSource`) and each row group is written as soon as the next
    row would push it past `row_group_max_bytes` (the cuts of `row_group_cuts`, decided row by row), so
    memory holds one row group and the input row groups still needed, never the whole shard."""
    source = RowSource(files, file_idx, row_idx, SHARD_COLUMNS)
    settings = ParquetSettings(compression_level=zstd_level, use_dictionary=tuple(DICT_COLUMNS))
    pending: list[pa.Table] = []  # rows of the open row group
    acc = 0
    with parquet_writer(out_path, SHARD_SCHEMA, settings) as writer:

        def flush() -> None:
            group = pa.concat_tables(pending).combine_chunks()
            writer.write_table(group, row_group_size=max(group.num_rows, 1))
            pending.clear()

        for start, rows in source.windows():
            table = shard_table(rows, minhash_cluster[start:start + rows.num_rows], val_permille)
            first = 0
            for i, s in enumerate(row_sizes(table).tolist()):
                if acc and acc + s > row_group_max_bytes:
                    if i > first:
                        pending.append(table.slice(first, i - first))
                    flush()
                    first, acc = i, 0
                acc += s
            pending.append(table.slice(first))
        if source.n:
            flush()
    return {"name": out_path.name, "sha256": sha256_file(out_path), "rows": source.n}


def shard_jobs(
    sources: list[SourceDocs], annotations: Annotations, out_dir: Path, settings: Settings
) -> list[tuple[Any, ...]]:
    """The `write_shard` arguments of every shard, in shard order (the plan is global: ids sorted across sources)."""
    files = ordered_files(sources)
    plan = plan_rows(files)
    mc = cluster_index(plan, annotations)
    n = plan.height
    shard_rows = settings.shard_rows
    count = math.ceil(n / shard_rows) if n else 0
    file_idx = plan.get_column("file").to_numpy()
    row_idx = plan.get_column("row").to_numpy()
    pub = settings.publish
    jobs = []
    for i in range(count):
        a, b = i * shard_rows, min(n, (i + 1) * shard_rows)
        jobs.append(
            (files, file_idx[a:b], row_idx[a:b], mc[a:b], out_dir / shard_name(i, count),
             settings.val_permille, pub.row_group_max_bytes, pub.zstd_level)
        )
    return jobs


def build_shards(
    sources: list[SourceDocs], annotations: Annotations, out_dir: Path, settings: Settings, workers: int
) -> ShardsResult:
    """Write every shard into out_dir (which the caller swaps into place atomically)."""
    start = time.monotonic()
    jobs = shard_jobs(sources, annotations, out_dir, settings)
    result = ShardsResult()
    for entry in ordered_map(write_shard, jobs, workers):
        result.shards.append(entry)
    result.n_docs = sum(len(job[1]) for job in jobs)
    result.seconds = time.monotonic() - start
    return result
