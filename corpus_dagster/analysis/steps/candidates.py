"""Step `candidates`: the candidate pairs among the exact representatives with enough words to shingle.

With a graph (dedup's verified pairs over exactly these documents), its pairs at or above pair_threshold
and their shingle counts, nothing recomputed. Without one, LSH candidates of the graph's banding from the
scan's band keys or from the minhash stage's signature files (the same engine, in this process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.analysis.outputs import save_npy
from corpus_dagster.analysis.steps.context import (
    BANDS_FILE,
    CANDIDATES_FILE,
    GRAPH_COUNTS_FILE,
    REPS_FILE,
    StepContext,
    load_docs,
)
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.lib.jaccard import jaccard_of
from corpus_dagster.lib.lsh import band_hashes, band_pairs, merge_pairs, pack_pairs


def _reused_band_keys(ctx: StepContext, docs: pa.Table, rows: np.ndarray) -> np.ndarray:
    """Band keys of `rows` from the minhash stage's signature files (their first bands x rows values)."""
    spec, need = ctx.spec, ctx.spec.width
    want = pl.DataFrame({"id": docs.column("id").take(pa.array(rows)), "pos": np.arange(len(rows))})
    out = np.zeros((len(rows), spec.bands), dtype=np.uint64)
    found = np.zeros(len(rows), dtype=bool)
    for path in ctx.signature_files:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(b"corpus_dagster.dedup.signature", b"{}"))
        if meta.get("shingle_size") != spec.shingle_size or meta.get("num_perm", 0) < need:
            raise AnalysisError(
                f"{path}: signature file has shingle_size {meta.get('shingle_size')} and num_perm "
                f"{meta.get('num_perm')}; the analysis needs shingle_size {spec.shingle_size} and at least "
                f"{need} values (bands x rows): drop the signature files to compute fresh ones"
            )
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["id", "signature"], use_threads=False):
            hit = pl.DataFrame({"id": batch.column(0)}).with_row_index("r").join(want, on="id", how="inner")
            if hit.height == 0:
                continue
            sig = batch.column(1)
            width = sig.type.list_size
            vals = pc.fill_null(sig.values.slice(sig.offset * width, len(sig) * width), 0).to_numpy()
            vals = vals.reshape(len(sig), width)[hit["r"].to_numpy()]
            pos = hit["pos"].to_numpy()
            out[pos] = band_hashes(np.ascontiguousarray(vals[:, :need]), spec.bands)
            found[pos] = True
    if not found.all():
        miss = docs.column("id")[int(rows[np.flatnonzero(~found)[0]])].as_py()
        raise AnalysisError(f"document {miss!r} has no row in the given signature files; pass them all or none")
    return out


def _graph_pairs(ctx: StepContext, docs: pa.Table, rows: np.ndarray) -> dict[str, Any]:
    """The graph's pairs at or above pair_threshold as rows of the document table, with their counts.

    Every pair must join two representatives with shingles: a graph over other documents (or another text
    rule) is refused rather than silently missing pairs."""
    table = pq.read_table(ctx.graph, columns=["id_a", "id_b", "intersection", "union"])
    index = pl.DataFrame({"id": docs.column("id"), "row": np.arange(docs.num_rows, dtype=np.int64)})
    pairs = (pl.from_arrow(table)
             .join(index.rename({"id": "id_a", "row": "a"}), on="id_a", how="left")
             .join(index.rename({"id": "id_b", "row": "b"}), on="id_b", how="left"))
    missing = pairs.filter(pl.col("a").is_null() | pl.col("b").is_null())
    eligible = np.zeros(docs.num_rows, dtype=bool)
    eligible[rows] = True
    a, b = pairs["a"].fill_null(0).to_numpy(), pairs["b"].fill_null(0).to_numpy()
    if missing.height or not (eligible[a] & eligible[b]).all():
        raise AnalysisError(f"{ctx.graph}: the near-duplicate graph was computed over other documents than the "
                            "analysis reads (a pair names a document it lacks or one that is not the first "
                            "of its text); rerun dedup over the same sources")
    inter = pairs["intersection"].to_numpy().astype(np.int64)
    union = pairs["union"].to_numpy().astype(np.int64)
    keep = jaccard_of(inter, union) >= ctx.cfg.pair_threshold
    packed = pack_pairs(a[keep], b[keep])
    order = np.argsort(packed, kind="stable")
    save_npy(ctx.out / CANDIDATES_FILE, packed[order])
    save_npy(ctx.out / GRAPH_COUNTS_FILE, np.stack([inter[keep][order], union[keep][order]]))
    return {"graph_pairs": table.num_rows, "candidate_pairs": int(keep.sum())}


def step_candidates(ctx: StepContext) -> dict[str, Any]:
    cfg, spec = ctx.cfg, ctx.spec
    docs = load_docs(ctx)
    rep = np.load(ctx.out / REPS_FILE)
    words = docs.column("n_words").to_numpy()
    rows = np.flatnonzero((rep == np.arange(len(rep))) & (words >= spec.shingle_size))
    shape = {"bands": spec.bands, "rows": spec.rows,
             "p_candidate_at_pair_threshold": round(spec.probability(cfg.pair_threshold), 4)}
    if ctx.graph is not None:
        return {"lsh_docs": len(rows), **_graph_pairs(ctx, docs, rows), "graph_threshold": spec.threshold, **shape}
    if ctx.signature_files:
        keys = _reused_band_keys(ctx, docs, rows)
    else:
        pos = docs.column("scan_pos").to_numpy()[rows]
        mm = np.memmap(ctx.out / BANDS_FILE, dtype=np.uint64, mode="r").reshape(-1, spec.bands)
        keys = np.array(mm[pos])
        del mm
    largest = [0]

    def each_band() -> Iterator[np.ndarray]:  # one band's pairs at a time: merged as they come
        for band in range(spec.bands):
            found, big = band_pairs(keys[:, band], rows)
            largest[0] = max(largest[0], big)
            yield found

    pairs = merge_pairs(each_band())
    save_npy(ctx.out / CANDIDATES_FILE, pairs)
    return {"lsh_docs": len(rows), "candidate_pairs": len(pairs), "largest_bucket": largest[0], **shape}
