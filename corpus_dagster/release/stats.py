"""Release statistics: what the card and the figures show, computed from (bucket, source, length, segmented).

The same function runs on the plan (at build time) and on the written files (in the card check), so
the card's numbers can be proven equal to the data's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from corpus_dagster.release.buckets import Buckets

TOP_SOURCES = 3


def data_stats(
    summary: pl.DataFrame, buckets: Buckets, sources: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Counts of the data itself: totals, per bucket (with its largest sources), per source.

    `summary` has columns bucket, source_id, n_tokens, segmented; `sources` maps source id to its ledger
    facts (hub_dataset, category, license_spdx). Every bucket appears, empty ones with zeros.
    """
    per_bucket = summary.group_by("bucket").agg(pl.len().alias("docs"), pl.col("n_tokens").sum().alias("tokens"))
    by_bucket = {int(b): (int(d), int(t)) for b, d, t in per_bucket.iter_rows()}
    per_bs = summary.group_by("bucket", "source_id").len().sort(["bucket", "len", "source_id"], descending=[False, True, False])
    top: dict[int, list[list[Any]]] = {}
    source_docs: dict[int, list[list[Any]]] = {}
    for b, sid, n in per_bs.iter_rows():
        source_docs.setdefault(int(b), []).append([sid, int(n)])
        docs = by_bucket[int(b)][0]
        if len(top.setdefault(int(b), [])) < TOP_SOURCES:
            top[int(b)].append([sid, round(n / docs, 4)])
    bucket_rows = []
    for k in range(buckets.count):
        docs, tokens = by_bucket.get(k, (0, 0))
        bucket_rows.append(
            {
                "bucket": k,
                "folder": buckets.folder(k),
                "low": buckets.low(k),
                "high": buckets.high(k),
                "docs": docs,
                "tokens": tokens,
                "top_sources": top.get(k, []),
                "source_docs": source_docs.get(k, []),
            }
        )
    per_source = (
        summary.group_by("source_id")
        .agg(
            pl.len().alias("docs"),
            pl.col("n_tokens").sum().alias("tokens"),
            pl.col("segmented").sum().alias("segmented"),
        )
        .sort("source_id")
    )
    source_rows = []
    for sid, docs, tokens, seg in per_source.iter_rows():
        facts = sources.get(sid, {})
        source_rows.append(
            {
                "source_id": sid,
                "hub_dataset": facts.get("hub_dataset") or sid,
                "category": facts.get("category") or "",
                "license": facts.get("license_spdx") or "",
                "docs": int(docs),
                "tokens": int(tokens),
                "mean_tokens": round(tokens / docs, 1),
                "segmented_share": round(seg / docs, 4),
            }
        )
    filled = [r["docs"] for r in bucket_rows]
    return {
        "docs": summary.height,
        "tokens": int(summary["n_tokens"].sum()) if summary.height else 0,
        "min_tokens_seen": int(summary["n_tokens"].min()) if summary.height else 0,
        "max_tokens_seen": int(summary["n_tokens"].max()) if summary.height else 0,
        "segments": int(summary["segmented"].sum()) if summary.height else 0,
        "docs_per_bucket_min": min(filled) if filled else 0,
        "docs_per_bucket_max": max(filled) if filled else 0,
        "n_sources": len(source_rows),
        "buckets": bucket_rows,
        "sources": source_rows,
    }
