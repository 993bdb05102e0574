"""Token-length distributions: percentiles and log-spaced histograms per tokenizer, source, split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from corpus_dagster.analysis.views import log_bins

PERCENTILES = (1, 5, 25, 50, 75, 95, 99)
SUMMARY_SCHEMA = pa.schema(
    [("tokenizer", pa.string()), ("scope", pa.string()), ("key", pa.string()), ("docs", pa.int64())]
    + [(f"p{p}", pa.float64()) for p in PERCENTILES]
    + [("max", pa.int64()), ("mean", pa.float64()), ("total", pa.int64())]
)
HISTOGRAM_SCHEMA = pa.schema(
    [
        ("tokenizer", pa.string()),
        ("scope", pa.string()),
        ("key", pa.string()),
        ("bin", pa.int32()),
        ("tokens_lo", pa.int64()),
        ("tokens_hi", pa.int64()),
        ("docs", pa.int64()),
    ]
)


def scopes(source: np.ndarray, sources: Sequence[str], split: np.ndarray, splits: Sequence[str]):
    """(scope, key, mask) for overall, each source and each split, in name order."""
    yield "overall", "all", np.ones(len(source), dtype=bool)
    for code in sorted(range(len(sources)), key=lambda c: sources[c]):
        yield "source", sources[code], source == code
    for code in sorted(range(len(splits)), key=lambda c: splits[c]):
        yield "split", splits[code], split == code


def length_tables(
    tokenizer: str,
    counts: np.ndarray,
    source: np.ndarray,
    sources: Sequence[str],
    split: np.ndarray,
    splits: Sequence[str],
    bins: int,
) -> tuple[pa.Table, pa.Table]:
    """(summary, histogram) of one tokenizer's per-document counts. Bins are shared by every scope (from
    1 token to the longest document, log-spaced; bin 0 holds empty documents) so scopes compare."""
    edges = log_bins(int(counts.max()) if len(counts) else 1, bins)
    which = np.clip(np.searchsorted(edges, counts, side="right") - 1, 0, len(edges) - 2)
    summary: dict[str, list] = {f.name: [] for f in SUMMARY_SCHEMA}
    hist: dict[str, list] = {f.name: [] for f in HISTOGRAM_SCHEMA}
    for scope, key, mask in scopes(source, sources, split, splits):
        c = counts[mask]
        summary["tokenizer"].append(tokenizer)
        summary["scope"].append(scope)
        summary["key"].append(key)
        summary["docs"].append(len(c))
        pct = np.percentile(c, PERCENTILES) if len(c) else [0.0] * len(PERCENTILES)
        for p, v in zip(PERCENTILES, pct, strict=True):
            summary[f"p{p}"].append(float(v))
        summary["max"].append(int(c.max()) if len(c) else 0)
        summary["mean"].append(round(float(c.mean()), 4) if len(c) else 0.0)
        summary["total"].append(int(c.sum()))
        h = np.bincount(which[mask], minlength=len(edges) - 1)
        for i in range(len(edges) - 1):
            hist["tokenizer"].append(tokenizer)
            hist["scope"].append(scope)
            hist["key"].append(key)
            hist["bin"].append(i)
            hist["tokens_lo"].append(int(edges[i]))
            hist["tokens_hi"].append(int(edges[i + 1]))
            hist["docs"].append(int(h[i]))
    return pa.table(summary, schema=SUMMARY_SCHEMA), pa.table(hist, schema=HISTOGRAM_SCHEMA)
