"""Step `candidates`: LSH candidate pairs among the exact representatives with enough words to shingle,
from the scan's band keys or from dedup's signature files."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.analysis.candidates import bucket_pairs, candidate_probability
from corpus_dagster.analysis.outputs import save_npy
from corpus_dagster.analysis.steps.context import (
    BANDS_FILE,
    CANDIDATES_FILE,
    REPS_FILE,
    StepContext,
    load_docs,
)
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.lib.lsh import band_hashes


def _reused_band_keys(ctx: StepContext, docs: pa.Table, rows: np.ndarray) -> np.ndarray:
    """Band keys of `rows` from dedup signature files (their first bands x rows values)."""
    cfg, need = ctx.cfg, ctx.cfg.bands * ctx.cfg.rows
    want = pl.DataFrame({"id": docs.column("id").take(pa.array(rows)), "pos": np.arange(len(rows))})
    out = np.zeros((len(rows), cfg.bands), dtype=np.uint64)
    found = np.zeros(len(rows), dtype=bool)
    for path in ctx.signature_files:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(b"corpus_dagster.dedup.signature", b"{}"))
        if meta.get("shingle_size") != cfg.shingle_size or meta.get("num_perm", 0) < need:
            raise AnalysisError(
                f"{path}: signature file has shingle_size {meta.get('shingle_size')} and num_perm "
                f"{meta.get('num_perm')}; the analysis needs shingle_size {cfg.shingle_size} and at least "
                f"{need} values (bands x rows): drop the signature files to compute fresh ones"
            )
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["id", "signature"]):
            hit = pl.DataFrame({"id": batch.column(0)}).with_row_index("r").join(want, on="id", how="inner")
            if hit.height == 0:
                continue
            sig = batch.column(1)
            width = sig.type.list_size
            vals = pc.fill_null(sig.values.slice(sig.offset * width, len(sig) * width), 0).to_numpy()
            vals = vals.reshape(len(sig), width)[hit["r"].to_numpy()]
            pos = hit["pos"].to_numpy()
            out[pos] = band_hashes(np.ascontiguousarray(vals[:, :need]), cfg.bands)
            found[pos] = True
    if not found.all():
        miss = docs.column("id")[int(rows[np.flatnonzero(~found)[0]])].as_py()
        raise AnalysisError(f"document {miss!r} has no row in the given signature files; pass them all or none")
    return out


def step_candidates(ctx: StepContext) -> dict[str, Any]:
    cfg = ctx.cfg
    docs = load_docs(ctx)
    rep = np.load(ctx.out / REPS_FILE)
    words = docs.column("n_words").to_numpy()
    rows = np.flatnonzero((rep == np.arange(len(rep))) & (words >= cfg.shingle_size))
    if ctx.signature_files:
        keys = _reused_band_keys(ctx, docs, rows)
    else:
        pos = docs.column("scan_pos").to_numpy()[rows]
        mm = np.memmap(ctx.out / BANDS_FILE, dtype=np.uint64, mode="r").reshape(-1, cfg.bands)
        keys = np.array(mm[pos])
        del mm
    # The union of every band's pairs. Merging each band into the running set re-sorted that set 16 times;
    # merging once the pending bands hold as many pairs as the set does keeps memory within about twice
    # the set and sorts each pair a few times only.
    pairs, pending, largest = np.zeros(0, np.uint64), [], 0
    for band in range(cfg.bands):
        found, big = bucket_pairs(keys[:, band], rows)
        pending.append(found)
        largest = max(largest, big)
        if sum(map(len, pending)) >= max(len(pairs), 1 << 20):
            pairs, pending = unique_sorted(np.concatenate([pairs, *pending])), []
    pairs = unique_sorted(np.concatenate([pairs, *pending])).astype(np.uint64, copy=False)
    save_npy(ctx.out / CANDIDATES_FILE, pairs)
    return {
        "lsh_docs": len(rows),
        "candidate_pairs": len(pairs),
        "largest_bucket": largest,
        "bands": cfg.bands,
        "rows": cfg.rows,
        "p_candidate_at_pair_threshold": round(candidate_probability(cfg.pair_threshold, cfg.bands, cfg.rows), 4),
    }
