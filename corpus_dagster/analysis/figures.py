"""Paper-ready figures (matplotlib, Agg backend) rendered to PNG and SVG bytes.

Axis labels carry units, the tokenizer is named on every length figure, `bbox_inches="tight"` keeps
text from being clipped, and the SVG hash salt and metadata are fixed so reruns give identical bytes.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from corpus_dagster.core.plotting import distinct_colours, integer_ticks, plain_ticks  # noqa: E402

_RC = {"svg.hashsalt": "corpus-analysis", "font.size": 9, "axes.titlesize": 10, "figure.dpi": 100}


def _render(fig: Figure, dpi: int) -> dict[str, bytes]:
    out = {}
    with plt.rc_context(_RC):  # svg.hashsalt is read when saving
        for fmt, meta in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata=meta)
            out[fmt] = buf.getvalue()
    plt.close(fig)
    return out


def length_histogram_figure(hist: pa.Table, tokenizer: str) -> Figure:
    """Step histogram of document length per source (and overall) for one tokenizer, log x axis, one colour
    per line."""
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        rows = hist.filter(pa.compute.equal(hist["tokenizer"], tokenizer)).to_pylist()
        keys = [("overall", "all")] + sorted({(r["scope"], r["key"]) for r in rows if r["scope"] == "source"})
        for colour, (scope, key) in zip(distinct_colours(len(keys)), keys, strict=True):
            sel = [r for r in rows if r["scope"] == scope and r["key"] == key]
            lo = np.array([max(r["tokens_lo"], 1) for r in sel] + [sel[-1]["tokens_hi"]], dtype=float)
            ax.stairs([r["docs"] for r in sel], lo, label="all sources" if scope == "overall" else key,
                      linewidth=1.6 if scope == "overall" else 1.0, color=colour)
        ax.set_xscale("log")
        integer_ticks(ax.yaxis)
        ax.set_xlabel(f"document length (tokens, {tokenizer}, log scale)")
        ax.set_ylabel("documents per bin")
        ax.set_title(f"Token-length distribution ({tokenizer})")
        ax.legend(fontsize=7, frameon=False)
        return fig


def length_histogram(hist: pa.Table, tokenizer: str, dpi: int) -> dict[str, bytes]:
    """Step histogram of document length per source (and overall) for one tokenizer, as PNG and SVG bytes."""
    return _render(length_histogram_figure(hist, tokenizer), dpi)


def rate_vs_length_figure(rates: pa.Table) -> Figure:
    """Share of documents affected by duplication per word-count bin, one line (and colour) per view."""
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        d = rates.to_pydict()
        keep = [i for i, n in enumerate(d["docs"]) if n > 0]
        mid = np.array([np.sqrt(max(d["words_lo"][i], 1) * max(d["words_hi"][i], 1)) for i in keep])
        cols = [c for c in rates.column_names if c.startswith("affected_pct_")]
        for colour, col in zip(distinct_colours(len(cols)), cols, strict=True):
            view = col.removeprefix("affected_pct_")
            label = "exact" if view == "exact" else f"Jaccard >= {view}"
            ax.plot(mid, [d[col][i] for i in keep], marker="o", markersize=3, label=label, color=colour)
        ax.set_xscale("log")
        plain_ticks(ax.yaxis)
        ax.set_xlabel("document length (normalized words, log scale)")
        ax.set_ylabel("documents affected by duplication (%)")
        ax.set_title("Duplicate rate vs document length")
        ax.legend(fontsize=7, frameon=False)
        return fig


def rate_vs_length(rates: pa.Table, dpi: int) -> dict[str, bytes]:
    """Share of documents affected by duplication per word-count bin, as PNG and SVG bytes."""
    return _render(rate_vs_length_figure(rates), dpi)


def affected_vs_removable_figure(views: pa.Table) -> Figure:
    """Affected and removable shares of all documents per view (overall), side by side."""
    with plt.rc_context(_RC):
        rows = [r for r in views.to_pylist() if r["scope"] == "overall"]
        names = ["exact" if r["view"] == "exact" else f"J >= {r['view']}" for r in rows]
        x = np.arange(len(rows))
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        c_a, c_b = distinct_colours(2)
        a = ax.bar(x - 0.2, [r["affected_pct"] for r in rows], 0.4, label="affected (has a duplicate)", color=c_a)
        b = ax.bar(x + 0.2, [r["removable_pct"] for r in rows], 0.4, label="removable (one kept per cluster)",
                   color=c_b)
        ax.bar_label(a, fmt="%.2f", fontsize=7)
        ax.bar_label(b, fmt="%.2f", fontsize=7)
        ax.set_xticks(x, names)
        ax.set_xlabel("duplicate definition")
        ax.set_ylabel("documents (% of corpus)")
        plain_ticks(ax.yaxis)
        ax.set_title("Affected vs removable (greedy removal: lower bound)")
        ax.margins(y=0.15)
        ax.legend(fontsize=7, frameon=False)
        return fig


def affected_vs_removable(views: pa.Table, dpi: int) -> dict[str, bytes]:
    """Affected and removable shares of all documents per view (overall), as PNG and SVG bytes."""
    return _render(affected_vs_removable_figure(views), dpi)


def source_mix_figure(sources: list[str], docs: list[int], tokens: list[int], tokenizer: str) -> Figure:
    """Share of documents and of tokens per source."""
    with plt.rc_context(_RC):
        y = np.arange(len(sources))
        fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.35 * max(len(sources), 1)))
        tot_d, tot_t = max(sum(docs), 1), max(sum(tokens), 1)
        c_d, c_t = distinct_colours(2)
        ax.barh(y - 0.2, [100 * d / tot_d for d in docs], 0.4, label="documents", color=c_d)
        ax.barh(y + 0.2, [100 * t / tot_t for t in tokens], 0.4, label=f"tokens ({tokenizer})", color=c_t)
        ax.set_yticks(y, sources)
        ax.invert_yaxis()
        ax.set_xlabel("share of corpus (%)")
        plain_ticks(ax.xaxis)
        ax.set_title("Source mix")
        ax.legend(fontsize=7, frameon=False)
        return fig


def source_mix(sources: list[str], docs: list[int], tokens: list[int], tokenizer: str, dpi: int) -> dict[str, bytes]:
    """Share of documents and of tokens per source, as PNG and SVG bytes."""
    return _render(source_mix_figure(sources, docs, tokens, tokenizer), dpi)
