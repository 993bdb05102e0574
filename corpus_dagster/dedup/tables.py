"""The three queryable tables of the dedup stage and the report figures derived from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_dagster.core.parquet import TABLE
from corpus_dagster.core.parquet import write_parquet as write_table_file
from corpus_dagster.dedup.near import Clusters
from corpus_dagster.lib.jaccard import jaccard_of

DROPPED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("reason", pa.string()),
        ("matched_id", pa.string()),
        ("jaccard", pa.float64()),
        ("detail", pa.string()),
    ]
)
CLUSTERS_SCHEMA = pa.schema([("id", pa.string()), ("cluster_min_id", pa.string())])
# The verified near-duplicate graph: intersection and union are the shingle counts behind jaccard, so a
# reader can test a threshold exactly (intersection * 100 >= 70 * union).
PAIRS_SCHEMA = pa.schema([("id_a", pa.string()), ("id_b", pa.string()), ("jaccard", pa.float64()),
                          ("intersection", pa.int64()), ("union", pa.int64())])

KEPT, DECONTAMINATED, EXACT, NEAR = 0, 1, 2, 3
REASONS = {DECONTAMINATED: "decontaminated", EXACT: "exact", NEAR: "near"}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write one dedup table atomically with the side-table settings (same bytes for the same table)."""
    write_table_file(table, path, TABLE)


def dropped_table(
    ids: pa.Array,
    status: np.ndarray,
    matched: np.ndarray,
    jaccard: np.ndarray,
    detail: dict[int, str],
    clusters: Clusters,
) -> pa.Table:
    """One row per dropped document, sorted by id."""
    dropped = np.flatnonzero(status != KEPT)
    has_match = matched[dropped] >= 0
    matched_ids = ids.take(pa.array(np.where(has_match, matched[dropped], 0)))
    matched_ids = pc.if_else(pa.array(has_match), matched_ids, pa.scalar(None, pa.string()))
    nodes = clusters.nodes
    if len(nodes):
        slot = np.minimum(np.searchsorted(nodes, dropped), len(nodes) - 1)
        cluster_size = clusters.size[clusters.keeper[slot]]
    else:
        cluster_size = np.zeros(len(dropped), np.int64)
    details = []
    for g, st, cs in zip(dropped.tolist(), status[dropped].tolist(), cluster_size.tolist(), strict=True):
        details.append(detail[g] if st == DECONTAMINATED else f"cluster_size={cs}" if st == NEAR else None)
    j = jaccard[dropped]
    return pa.table(
        {
            "id": ids.take(pa.array(dropped)),
            "reason": pa.array([REASONS[s] for s in status[dropped].tolist()], pa.string()),
            "matched_id": matched_ids,
            "jaccard": pa.array(j, pa.float64(), mask=np.isnan(j)),
            "detail": pa.array(details, pa.string()),
        },
        schema=DROPPED_SCHEMA,
    )


def clusters_table(ids: pa.Array, clusters: Clusters) -> pa.Table:
    """Every member of a cluster of at least 2 with its cluster's smallest id, sorted by id."""
    members = np.flatnonzero(clusters.in_cluster)  # nodes are in gid (id) order
    return pa.table(
        {
            "id": ids.take(pa.array(clusters.nodes[members])),
            "cluster_min_id": ids.take(pa.array(clusters.nodes[clusters.keeper[members]])),
        },
        schema=CLUSTERS_SCHEMA,
    )


def pairs_table(ids: pa.Array, pairs: np.ndarray, inter: np.ndarray, union: np.ndarray, keep: np.ndarray) -> pa.Table:
    """The graph's pairs `keep` (indices into sorted `pairs`), id_a < id_b, sorted by (id_a, id_b)."""
    return pa.table(
        {
            "id_a": ids.take(pa.array(pairs[keep, 0])),
            "id_b": ids.take(pa.array(pairs[keep, 1])),
            "jaccard": pa.array(jaccard_of(inter[keep], union[keep]), pa.float64()),
            "intersection": pa.array(inter[keep], pa.int64()),
            "union": pa.array(union[keep], pa.int64()),
        },
        schema=PAIRS_SCHEMA,
    )


def report(
    ids: pa.Array, clusters: Clusters, pairs: np.ndarray, pair_jaccard: np.ndarray, keep: np.ndarray, top: int
) -> dict[str, Any]:
    """Largest clusters (ties by id) and example verified pairs spread over the Jaccard range."""
    keepers = np.flatnonzero(clusters.size >= 2)
    biggest = keepers[np.lexsort((keepers, -clusters.size[keepers]))][:top]
    examples = []
    if len(keep) and top:
        order = keep[np.lexsort((pairs[keep, 1], pairs[keep, 0], pair_jaccard[keep]))]
        picks = sorted(set(np.linspace(0, len(order) - 1, min(top, len(order))).round().astype(int).tolist()))
        examples = [
            {
                "id_a": ids[int(pairs[order[i], 0])].as_py(),
                "id_b": ids[int(pairs[order[i], 1])].as_py(),
                "jaccard": round(float(pair_jaccard[order[i]]), 4),
            }
            for i in picks
        ]
    return {
        "n_clusters": len(keepers),
        "clustered_docs": int(clusters.in_cluster.sum()),
        "largest_clusters": [
            {"cluster_min_id": ids[int(clusters.nodes[k])].as_py(), "size": int(clusters.size[k])}
            for k in biggest.tolist()
        ],
        "example_pairs": examples,
    }
