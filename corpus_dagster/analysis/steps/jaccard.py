"""Step `jaccard`: the exact shingle Jaccard of every candidate pair, read back from the texts (or, from a
graph, the counts it already holds); the pairs at or above `pair_threshold` kept with their intersection
and union."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.analysis.outputs import write_table
from corpus_dagster.analysis.steps.context import (
    CANDIDATES_FILE,
    GRAPH_COUNTS_FILE,
    PAIRS_TABLE,
    StepContext,
    load_docs,
)
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import row_group_starts
from corpus_dagster.lib.jaccard import ShingleStore, jaccard_of, shingle_sets_task
from corpus_dagster.lib.lsh import unpack_pairs


def _text_jobs(ctx: StepContext, docs: pa.Table, nodes: np.ndarray) -> tuple[list[tuple], list[np.ndarray]]:
    """Per (file, row group): the local rows to read and the node numbers they fill, in file order."""
    file_no = docs.column("file_no").to_numpy()[nodes]
    row = docs.column("row").to_numpy()[nodes]
    order = np.lexsort((row, file_no))
    jobs, slots = [], []
    for i, path in enumerate(ctx.documents.files):
        sel = order[file_no[order] == i]
        if not len(sel):
            continue
        starts = row_group_starts(pq.ParquetFile(path))
        rg_of = np.searchsorted(starts, row[sel], side="right") - 1
        for rg in unique_sorted(rg_of).tolist():
            take = sel[rg_of == rg]
            jobs.append((str(path), rg, row[take] - starts[rg], ctx.near.shingle_size, ctx.near.batch_bytes,
                         ctx.documents.text_column))
            slots.append(take)
    return jobs, slots


def step_jaccard(ctx: StepContext) -> dict[str, Any]:
    cfg = ctx.cfg
    pairs = unpack_pairs(np.load(ctx.out / CANDIDATES_FILE))
    docs = load_docs(ctx)
    inter = union = np.zeros(len(pairs), dtype=np.int64)
    if ctx.graph is not None:  # scored once, by the graph
        inter, union = np.load(ctx.out / GRAPH_COUNTS_FILE)
    elif len(pairs):
        nodes = unique_sorted(pairs)
        store_path = ctx.work / "shingles.u64"
        store = ShingleStore(store_path, len(nodes))
        try:
            jobs, slots = _text_jobs(ctx, docs, nodes)
            for slot, (values, lengths) in zip(slots, ordered_map(shingle_sets_task, jobs, ctx.workers), strict=True):
                store.append(slot, values, lengths)
            store.close()
            pn = np.searchsorted(nodes, pairs)
            inter, union = store.counts(pn[:, 0], pn[:, 1], ctx.near.verify_batch_shingles, threads=ctx.workers)
        finally:
            store_path.unlink(missing_ok=True)
    jac = jaccard_of(inter, union)  # every threshold decision below is on this float64 ratio, as before
    keep = jac >= cfg.pair_threshold
    table = pa.table({"a": pairs[keep, 0], "b": pairs[keep, 1], "jaccard": jac[keep],
                      "intersection": inter[keep], "union": union[keep]})
    write_table(table, ctx.out / PAIRS_TABLE, row_group=1 << 20)
    return {
        "source": "near-duplicate graph" if ctx.graph is not None else "scored here",
        "candidate_pairs": len(pairs),
        "verified_pairs": int(keep.sum()),
        "rejected_pairs": int((~keep).sum()),
        "pair_threshold": cfg.pair_threshold,
    }
