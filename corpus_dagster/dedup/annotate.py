"""The shards' `minhash_cluster` column from clusters.parquet (DESIGN.md, data.06).

minhash_cluster of a row = the smallest global row index among the kept rows of its near-duplicate
cluster, or the row's own index when it has no kept near duplicate. Rows are numbered across all shards
in id (byte) order, so the smallest row index of a cluster is its smallest kept id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


def minhash_cluster(kept_ids: pa.Array | pa.ChunkedArray, clusters_path: Path) -> np.ndarray:
    """minhash_cluster (int64) for each of the final kept ids, given sorted in byte order."""
    kept = pl.DataFrame({"id": pa.chunked_array([kept_ids]) if isinstance(kept_ids, pa.Array) else kept_ids})
    kept = kept.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    clusters = pl.from_arrow(pq.read_table(clusters_path, columns=["id", "cluster_min_id"]))
    first_kept = (
        kept.join(clusters, on="id", how="inner")
        .group_by("cluster_min_id")
        .agg(pl.col("row").min().alias("cluster_row"))
    )
    out = (
        kept.join(clusters, on="id", how="left")
        .join(first_kept, on="cluster_min_id", how="left")
        .sort("row")
        .select(pl.coalesce("cluster_row", "row"))
        .to_series()
    )
    return out.to_numpy().astype(np.int64)
