"""Charts for the UI: small matplotlib (Agg) PNGs embedded in markdown metadata, where a picture reads faster."""

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from corpus_dagster.core.plotting import distinct_colours, integer_ticks
from corpus_dagster.defs.common import md_escape

WIDTH, HEIGHT, DPI = 6.4, 3.2, 90


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})  # no version stamp: stable bytes
    plt.close(fig)
    return buf.getvalue()


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(WIDTH, HEIGHT))


def stacked_bars_figure(counts: Mapping[str, Mapping[str, int]], title: str, ylabel: str = "documents") -> Any:
    """One bar per row key (a source), stacked by column key (kept, then each drop reason), one colour per
    column key in first-seen order: the default 10-colour cycle would give two reasons one colour."""
    fig, ax = _figure()
    rows = list(counts)
    columns = list(dict.fromkeys(c for r in rows for c in counts[r]))
    bottom = [0] * len(rows)
    for colour, col in zip(distinct_colours(len(columns)), columns, strict=True):
        values = [counts[r].get(col, 0) for r in rows]
        ax.bar(rows, values, bottom=bottom, label=col, color=colour)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    integer_ticks(ax.yaxis)
    ax.tick_params(axis="x", labelrotation=30)
    if columns:
        ax.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def stacked_bars(counts: Mapping[str, Mapping[str, int]], title: str, ylabel: str = "documents") -> bytes:
    """One bar per row key (a source), stacked by column key (kept, then each drop reason), as PNG bytes."""
    return _png(stacked_bars_figure(counts, title, ylabel))


def histogram_figure(values: Sequence[float], title: str, xlabel: str, bins: int = 30, log_x: bool = False) -> Any:
    """Distribution of one measure (document length in characters, cluster size); counts labelled exactly."""
    import numpy as np

    fig, ax = _figure()
    data = np.asarray(values, dtype=float)
    if data.size:
        if log_x and data.min() > 0:
            edges = np.logspace(np.log10(data.min()), np.log10(max(data.max(), data.min() * 1.01)), bins + 1)
            ax.set_xscale("log")
        else:
            edges = bins
        ax.hist(data, bins=edges)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    integer_ticks(ax.yaxis)
    return fig


def histogram(values: Sequence[float], title: str, xlabel: str, bins: int = 30, log_x: bool = False) -> bytes:
    """Distribution of one measure (document length in characters, cluster size), as PNG bytes."""
    return _png(histogram_figure(values, title, xlabel, bins, log_x))


def charts_markdown(charts: Mapping[str, bytes]) -> dg.MetadataValue:
    """PNG charts as one markdown value (data URIs), each under its title."""
    parts = []
    for title, png in charts.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"**{md_escape(title)}**\n\n![{md_escape(title)}](data:image/png;base64,{data})")
    return dg.MetadataValue.md("\n\n".join(parts))
