"""Figures read back from their matplotlib Axes: bucket ticks exact and distinct, token axes in a unit that
fits the data and is named, one colour per category with none reused, bytes unchanged across draws."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus_dagster.analysis import figures as analysis_figures
from corpus_dagster.core.plotting import count_label, count_unit, distinct_colours
from corpus_dagster.defs import charts
from corpus_dagster.release import figures as release_figures

LOWS = [1152, 1408, 1664, 1920]


def _buckets(lows: list[int]) -> list[dict]:
    return [{"bucket": k, "folder": f"b{k:02d}", "low": lo, "high": lo + 255, "docs": 10 * (k + 1), "tokens": 0}
            for k, lo in enumerate(lows)]


def _tick_texts(fig, axis: str) -> list[str]:
    """The tick labels drawn inside the view limits of the figure's first Axes."""
    import matplotlib.pyplot as plt

    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    locs = ax.get_xticks() if axis == "x" else ax.get_yticks()
    texts = [t.get_text() for t, v in zip(ticks, locs, strict=True) if lo - 1e-9 <= v <= hi + 1e-9]
    plt.close(fig)
    return texts


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("\u2212", "-"))


@pytest.mark.parametrize("draw", ["docs_per_bucket", "source_mix"])
def test_release_bucket_ticks_are_the_exact_lower_edges(draw):
    data = {"buckets": _buckets(LOWS), "sources": []}
    if draw == "docs_per_bucket":
        fig = release_figures.docs_per_bucket_figure(data, "gpt2")
    else:
        shares = {"alpha": [0.5] * 4, "beta": [0.5] * 4}
        fig = release_figures.source_mix_figure(data, shares, "gpt2")
    texts = _tick_texts(fig, "x")
    assert texts == ["1,152", "1,408", "1,664", "1,920"]
    assert len(set(texts)) == len(LOWS) and [int(_number(t)) for t in texts] == LOWS


def test_release_tokens_by_source_uses_thousands_of_tokens_for_a_100k_corpus():
    sources = [{"source_id": "alpha", "tokens": 50_000, "docs": 5}, {"source_id": "beta", "tokens": 30_000, "docs": 3},
               {"source_id": "gamma", "tokens": 20_000, "docs": 2}]
    fig = release_figures.tokens_by_source_figure({"buckets": [], "sources": sources}, "gpt2")
    label = fig.axes[0].get_xlabel()
    values = [_number(t) for t in _tick_texts(fig, "x")]
    assert "k tokens" in label and "gpt2" in label
    assert max(values) >= 50 and all(v >= 1 for v in values if v != 0)
    assert len(set(values)) == len(values)


@pytest.mark.parametrize(("peak", "divisor", "unit"), [
    (0, 1, "tokens"), (999, 1, "tokens"), (1_000, 1_000, "k tokens"), (100_000, 1_000, "k tokens"),
    (999_999, 1_000, "k tokens"), (2_500_000, 1_000_000, "M tokens"), (7_000_000_000, 1_000_000_000, "B tokens"),
])
def test_count_unit_puts_the_peak_between_1_and_1000(peak, divisor, unit):
    assert count_unit(peak, "tokens") == (divisor, unit)
    assert peak == 0 or 1 <= peak / divisor < 1000


def test_count_label_is_exact():
    assert [count_label(n) for n in (0, 999, 1152, 1_048_576)] == ["0", "999", "1,152", "1,048,576"]


def test_dedup_chart_gives_16_categories_16_colours():
    outcomes = {"alpha": {"kept": 100, **{f"reason {i:02d}": i + 1 for i in range(15)}}}
    fig = charts.stacked_bars_figure(outcomes, "kept and dropped per source")
    colours = [tuple(p.get_facecolor()) for p in fig.axes[0].patches]
    assert len(colours) == 16 and len(set(colours)) == 16


def test_dedup_chart_colours_follow_category_order_across_sources():
    """A reason keeps its colour on every bar: one colour per category, not per bar."""
    outcomes = {"alpha": {"kept": 5, "exact": 2}, "beta": {"kept": 3, "near": 1}}
    fig = charts.stacked_bars_figure(outcomes, "t")
    faces = [tuple(p.get_facecolor()) for p in fig.axes[0].patches]
    assert faces[0] == faces[1] and len(set(faces)) == 3  # kept (2 bars), exact, near


def test_distinct_colours_never_repeat():
    for n in (1, 10, 16, 20, 40, 60, 61, 100):
        colours = distinct_colours(n)
        assert len(colours) == n and len(set(colours)) == n
    assert distinct_colours(16) == distinct_colours(16) and distinct_colours(20)[:10] == distinct_colours(10)


def test_analysis_length_histogram_gives_every_source_its_own_colour():
    rows = [{"tokenizer": "gpt2", "scope": scope, "key": key, "tokens_lo": lo, "tokens_hi": lo * 2, "docs": 3}
            for scope, key in [("overall", "all")] + [("source", f"s{i:02d}") for i in range(12)]
            for lo in (1, 2, 4)]
    fig = analysis_figures.length_histogram_figure(pa.Table.from_pylist(rows), "gpt2")
    colours = [tuple(p.get_edgecolor()) for p in fig.axes[0].patches]
    assert len(colours) == 13 and len(set(colours)) == 13
    counts = _tick_texts(fig, "y")
    assert all(_number(t) == int(_number(t)) for t in counts)


def test_release_figure_bytes_are_the_same_on_every_draw():
    data = {"buckets": _buckets(LOWS), "sources": [{"source_id": "alpha", "tokens": 100_000, "docs": 4}]}
    for draw in (release_figures.docs_per_bucket, release_figures.tokens_by_source):
        assert draw(data, "gpt2") == draw(data, "gpt2")
    counts = {"alpha": {"kept": 9, **{f"r{i}": 1 for i in range(15)}}}
    assert charts.stacked_bars(counts, "t") == charts.stacked_bars(counts, "t")
