"""Step `lengths`: token counts of every document per tokenizer (reused from token streams where they
exist, each distinct text tokenized once), their summaries and histograms."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from corpus_dagster.analysis.inputs import input_files
from corpus_dagster.analysis.lengths import length_tables
from corpus_dagster.analysis.outputs import (
    DOC_COUNTS_FILE,
    HISTOGRAM_FILE,
    LENGTHS_FILE,
    write_json,
    write_table,
)
from corpus_dagster.analysis.steps.context import StepContext
from corpus_dagster.analysis.tokenizers import load_tokenizers
from corpus_dagster.core.errors import AnalysisError


def _reused_counts(paths: Sequence[Path]) -> dict[str, pl.DataFrame]:
    """Token streams' counts per tokenizer name, as text tokens (their BOS/EOD framing subtracted)."""
    out: dict[str, list[pl.DataFrame]] = {}
    for path in paths:
        manifest = Path(path).parent / "_TOKENS.json"
        if not manifest.is_file():
            raise AnalysisError(f"{path}: no _TOKENS.json beside it, so its BOS/EOD framing is unknown")
        special = json.loads(manifest.read_text(encoding="utf-8"))["tokenizer"]["special_tokens"]
        framing = 1 + (special.get("bos") is not None)
        df = pl.read_parquet(path, columns=["id", "n_tokens", "tokenizer"])
        for (name,), part in df.group_by(["tokenizer"], maintain_order=True):
            out.setdefault(name, []).append(
                part.select("id", (pl.col("n_tokens").cast(pl.Int64) - framing).alias("n"))
            )
    return {k: pl.concat(v) for k, v in out.items()}


def step_lengths(ctx: StepContext) -> dict[str, Any]:
    cfg = ctx.cfg
    toks = load_tokenizers(cfg.tokenizers)
    reuse = _reused_counts(ctx.token_counts)
    seen: dict[bytes, int] = {}
    ids_p, src_p, split_p, first_p = [], [], [], []
    counts: dict[str, list[np.ndarray]] = {t.name: [] for t in toks}
    tokenized = dict.fromkeys(counts, 0)
    reused = dict.fromkeys(counts, 0)
    pos = 0
    for file_no, path, pf, has, _ in input_files(ctx.lengths):
        width = max(5, len(str(max(pf.metadata.num_rows - 1, 0))))
        row0 = 0
        text_column = ctx.lengths.text_column
        cols = [text_column] + [c for c in ("id", "source_id", "split") if has[c]]
        for rg in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(rg, columns=cols)
            n = t.num_rows
            ids = (t.column("id").combine_chunks().cast(pa.string()) if has["id"]
                   else pa.array([f"{path.stem}_{row0 + i:0{width}d}" for i in range(n)], pa.string()))
            fixed = ctx.lengths.source_ids[file_no]
            src = (pa.array([fixed or ctx.lengths.default_source] * n, pa.string()) if fixed or not has["source_id"]
                   else pc.fill_null(t.column("source_id").combine_chunks().cast(pa.string()), ctx.lengths.default_source))
            split = (pc.fill_null(t.column("split").combine_chunks().cast(pa.string()), "all") if has["split"]
                     else pa.array(["all"] * n, pa.string()))
            texts = t.column(text_column).combine_chunks().to_pylist()
            first = np.empty(n, dtype=np.int64)
            new = []
            for i, text in enumerate(texts):
                d = hashlib.sha256((text or "").encode("utf-8")).digest()
                j = seen.setdefault(d, pos + i)
                first[i] = j
                if j == pos + i:
                    new.append(i)
            for tok in toks:
                c = np.full(n, -1, dtype=np.int64)
                if tok.name in reuse:
                    hit = (pl.DataFrame({"id": ids}).with_row_index("r")
                           .join(reuse[tok.name], on="id", how="inner"))
                    c[hit["r"].to_numpy()] = hit["n"].to_numpy()
                    reused[tok.name] += hit.height
                need = [i for i in new if c[i] < 0]
                if need:
                    c[need] = tok.count([texts[i] or "" for i in need])
                    tokenized[tok.name] += len(need)
                counts[tok.name].append(c)
            ids_p.append(ids)
            src_p.append(src)
            split_p.append(split)
            first_p.append(first)
            pos += n
            row0 += n
    first = np.concatenate(first_p) if first_p else np.zeros(0, np.int64)
    src = pa.concat_arrays(src_p).dictionary_encode() if src_p else pa.array([], pa.string()).dictionary_encode()
    split = pa.concat_arrays(split_p).dictionary_encode() if split_p else pa.array([], pa.string()).dictionary_encode()
    ids = pa.concat_arrays(ids_p) if ids_p else pa.array([], pa.string())
    order = pc.sort_indices(ids).to_numpy()
    summaries, hists, doc_tables = [], [], []
    for tok in toks:
        c = np.concatenate(counts[tok.name]) if counts[tok.name] else np.zeros(0, np.int64)
        c = np.where(c >= 0, c, c[first])  # duplicates of a text take its first occurrence's count
        s, h = length_tables(
            tok.name, c, src.indices.to_numpy(zero_copy_only=False), src.dictionary.to_pylist(),
            split.indices.to_numpy(zero_copy_only=False), split.dictionary.to_pylist(), cfg.histogram_bins,
        )
        summaries.append(s)
        hists.append(h)
        doc_tables.append(pa.table({
            "id": ids.take(pa.array(order)),
            "source_id": src.dictionary_decode().take(pa.array(order)),
            "split": split.dictionary_decode().take(pa.array(order)),
            "tokenizer": pa.array([tok.name] * len(order), pa.string()),
            "n_tokens": pa.array(c[order], pa.int64()),
        }))
    summary, hist = pa.concat_tables(summaries), pa.concat_tables(hists)
    write_table(pa.concat_tables(doc_tables), ctx.out / DOC_COUNTS_FILE, row_group=1 << 20)
    write_table(hist, ctx.out / HISTOGRAM_FILE)
    write_table(summary, ctx.out / f"{LENGTHS_FILE}.parquet")
    write_json(ctx.out / f"{LENGTHS_FILE}.json", {"summary": summary.to_pylist(), "histogram": hist.to_pylist()})
    return {
        "docs": len(ids),
        "tokenizers": [t.name for t in toks],
        "tokenized_docs": tokenized,
        "reused_counts": reused,
        "unique_texts": len(seen),
        "total_tokens": {r["tokenizer"]: r["total"] for r in summary.to_pylist() if r["scope"] == "overall"},
    }
