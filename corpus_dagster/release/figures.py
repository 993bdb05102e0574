"""The card's figures (PNG, matplotlib Agg), drawn from the release statistics with no timestamps in the file."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from corpus_dagster.core.plotting import (  # noqa: E402
    count_label,
    count_unit,
    distinct_colours,
    integer_ticks,
    plain_ticks,
)

# PNG text chunks hold the matplotlib version by default; a blank Software key keeps the bytes fixed.
PNG_METADATA = {"Software": None}
MAX_SOURCES_SHOWN = 8


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata=PNG_METADATA)
    plt.close(fig)
    return buf.getvalue()


def _bucket_ticks(ax: Any, buckets: list[dict[str, Any]]) -> None:
    """One exact label per bucket (its lower edge, `1,152`): rounding to `1k` would give neighbours one name."""
    ax.set_xticks(range(len(buckets)), [count_label(r["low"]) for r in buckets], rotation=90, fontsize=7)


def docs_per_bucket_figure(data: dict[str, Any], tokenizer: str) -> Figure:
    """Bar chart: documents in each bucket (the open Figure, for `docs_per_bucket` to save or a test to read)."""
    b = data["buckets"]
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(range(len(b)), [r["docs"] for r in b], color="#4C72B0")
    _bucket_ticks(ax, b)
    integer_ticks(ax.yaxis)
    ax.set_xlabel(f"bucket lower edge (tokens, {tokenizer})")
    ax.set_ylabel("documents")
    ax.set_title("Documents per length bucket")
    fig.tight_layout()
    return fig


def docs_per_bucket(data: dict[str, Any], tokenizer: str) -> bytes:
    """Bar chart: documents in each bucket, as PNG bytes."""
    return _png(docs_per_bucket_figure(data, tokenizer))


def tokens_by_source_figure(data: dict[str, Any], tokenizer: str) -> Figure:
    """Horizontal bars: tokens each source contributes, in the unit (tokens, k, M, B) that fits the largest."""
    rows = sorted(data["sources"], key=lambda r: (-r["tokens"], r["source_id"]))
    divisor, unit = count_unit(max((r["tokens"] for r in rows), default=0), "tokens")
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.4 * max(len(rows), 1)))
    ax.barh([r["source_id"] for r in rows][::-1], [r["tokens"] / divisor for r in rows][::-1], color="#55A868")
    if divisor == 1:
        integer_ticks(ax.xaxis)
    else:
        plain_ticks(ax.xaxis)
    ax.set_xlabel(f"{unit} ({tokenizer})")
    ax.set_ylabel("source")
    ax.set_title("Tokens by source")
    fig.tight_layout()
    return fig


def tokens_by_source(data: dict[str, Any], tokenizer: str) -> bytes:
    """Horizontal bars: tokens each source contributes, as PNG bytes."""
    return _png(tokens_by_source_figure(data, tokenizer))


def source_mix_figure(data: dict[str, Any], bucket_shares: dict[str, list[float]], tokenizer: str) -> Figure:
    """Stacked bars: each source's share of the documents of each bucket, one colour per source."""
    b = data["buckets"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bottom = [0.0] * len(b)
    colours = distinct_colours(len(bucket_shares))
    for colour, (sid, shares) in zip(colours, bucket_shares.items(), strict=True):
        ax.bar(range(len(b)), [100 * s for s in shares], bottom=bottom, label=sid, color=colour)
        bottom = [x + 100 * s for x, s in zip(bottom, shares, strict=True)]
    _bucket_ticks(ax, b)
    ax.set_xlabel(f"bucket lower edge (tokens, {tokenizer})")
    ax.set_ylabel("share of the bucket's documents (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Source mix across lengths")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def source_mix(data: dict[str, Any], bucket_shares: dict[str, list[float]], tokenizer: str) -> bytes:
    """Stacked bars: each source's share of the documents of each bucket (largest sources named), as PNG bytes."""
    return _png(source_mix_figure(data, bucket_shares, tokenizer))


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
