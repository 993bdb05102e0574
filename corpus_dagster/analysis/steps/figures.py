"""Step `figures`: the length histograms, the duplicate rate by length, affected against removable and
the source mix, as PNG and SVG in `figures/`."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from corpus_dagster.analysis.outputs import FIGURES_DIR, HISTOGRAM_FILE, LENGTHS_FILE, RATES_FILE, VIEWS_FILE
from corpus_dagster.analysis.steps.context import StepContext
from corpus_dagster.core.atomic import atomic_dir


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def step_figures(ctx: StepContext) -> dict[str, Any]:
    from corpus_dagster.analysis import figures  # matplotlib (0.5 CPU s to import): only where it draws

    dpi = ctx.cfg.figure_dpi
    hist = pq.read_table(ctx.out / HISTOGRAM_FILE)
    summary = pq.read_table(ctx.out / f"{LENGTHS_FILE}.parquet").to_pylist()
    views = pq.read_table(ctx.out / f"{VIEWS_FILE}.parquet")
    tok_names = list(dict.fromkeys(r["tokenizer"] for r in summary))
    rendered: dict[str, dict[str, bytes]] = {}
    for name in tok_names:
        rendered[f"token_length_hist_{_safe(name)}"] = figures.length_histogram(hist, name, dpi)
    rendered["duplicate_rate_vs_length"] = figures.rate_vs_length(pq.read_table(ctx.out / RATES_FILE), dpi)
    rendered["affected_vs_removable"] = figures.affected_vs_removable(views, dpi)
    by_src = [r for r in summary if r["scope"] == "source" and r["tokenizer"] == tok_names[0]]
    rendered["source_mix"] = figures.source_mix(
        [r["key"] for r in by_src], [r["docs"] for r in by_src], [r["total"] for r in by_src], tok_names[0], dpi
    )
    with atomic_dir(ctx.out / FIGURES_DIR) as tmp:
        for name, formats in rendered.items():
            for fmt, data in formats.items():
                (tmp / f"{name}.{fmt}").write_bytes(data)
    return {"figures": sorted(rendered)}
