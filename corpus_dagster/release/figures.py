"""The card's figures (PNG, matplotlib Agg), drawn from the release statistics with no timestamps in the file."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# PNG text chunks hold the matplotlib version by default; a blank Software key keeps the bytes fixed.
PNG_METADATA = {"Software": None}
MAX_SOURCES_SHOWN = 8


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata=PNG_METADATA)
    plt.close(fig)
    return buf.getvalue()


def docs_per_bucket(data: dict[str, Any], tokenizer: str) -> bytes:
    """Bar chart: documents in each bucket."""
    b = data["buckets"]
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(range(len(b)), [r["docs"] for r in b], color="#4C72B0")
    ax.set_xticks(range(len(b)), [f"{r['low'] // 1024}k" if r["low"] >= 1024 else str(r["low"]) for r in b],
                  rotation=90, fontsize=7)
    ax.set_xlabel(f"bucket lower edge (tokens, {tokenizer})")
    ax.set_ylabel("documents")
    ax.set_title("Documents per length bucket")
    fig.tight_layout()
    return _png(fig)


def tokens_by_source(data: dict[str, Any], tokenizer: str) -> bytes:
    """Horizontal bars: tokens each source contributes."""
    rows = sorted(data["sources"], key=lambda r: (-r["tokens"], r["source_id"]))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.4 * max(len(rows), 1)))
    ax.barh([r["source_id"] for r in rows][::-1], [r["tokens"] / 1e6 for r in rows][::-1], color="#55A868")
    ax.set_xlabel(f"tokens (millions, {tokenizer})")
    ax.set_ylabel("source")
    ax.set_title("Tokens by source")
    fig.tight_layout()
    return _png(fig)


def source_mix(data: dict[str, Any], bucket_shares: dict[str, list[float]], tokenizer: str) -> bytes:
    """Stacked bars: each source's share of the documents of each bucket (largest sources named)."""
    b = data["buckets"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bottom = [0.0] * len(b)
    cmap = plt.get_cmap("tab10")
    for i, (sid, shares) in enumerate(bucket_shares.items()):
        ax.bar(range(len(b)), [100 * s for s in shares], bottom=bottom, label=sid, color=cmap(i % 10))
        bottom = [x + 100 * s for x, s in zip(bottom, shares, strict=True)]
    ax.set_xticks(range(len(b)), [f"{r['low'] // 1024}k" if r["low"] >= 1024 else str(r["low"]) for r in b],
                  rotation=90, fontsize=7)
    ax.set_xlabel(f"bucket lower edge (tokens, {tokenizer})")
    ax.set_ylabel("share of the bucket's documents (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Source mix across lengths")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _png(fig)


def mix_shares(per_bucket_source: list[tuple[int, str, int]], n_buckets: int) -> dict[str, list[float]]:
    """Share of each source in each bucket from (bucket, source, docs); sources past the largest few are
    summed as `other`. Key order: largest source first."""
    totals: dict[str, int] = {}
    per_bucket = [0] * n_buckets
    for b, sid, n in per_bucket_source:
        totals[sid] = totals.get(sid, 0) + n
        per_bucket[b] += n
    ranked = [sid for sid, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]
    shown = ranked[:MAX_SOURCES_SHOWN]
    out = {sid: [0.0] * n_buckets for sid in shown}
    if len(ranked) > len(shown):
        out["other"] = [0.0] * n_buckets
    for b, sid, n in per_bucket_source:
        key = sid if sid in out else "other"
        out[key][b] += n / per_bucket[b]
    return out
