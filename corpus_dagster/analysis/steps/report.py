"""Step `report`: `REPORT.md` from every step's recorded stats and tables, and the `near_dup/` dataset
folder with its card."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus_dagster.analysis.outputs import (
    FIGURES_DIR,
    GROUPS_FILE,
    LENGTHS_FILE,
    NEAR_DUP_DIR,
    REPORT_FILE,
    VIEWS_FILE,
    cluster_file,
    duplicates_dir_name,
)
from corpus_dagster.analysis.report import dataset_card, render_report
from corpus_dagster.analysis.steps.context import StepContext
from corpus_dagster.core.atomic import atomic_dir, atomic_path


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link (no second copy on disk), else a copy (a file system without links)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _write_near_dup(ctx: StepContext) -> dict[str, Any]:
    """near_dup/: the duplicate table, the cluster files and the exact groups under their own names, with
    a README.md card naming one `datasets` config per table. The tables beside it stay where they are."""
    dups = duplicates_dir_name(ctx.cfg)
    clusters = [(cluster_file(t), t) for t in ctx.cfg.cluster_thresholds]
    parts = sorted((ctx.out / dups).glob("*.parquet"))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    with atomic_dir(ctx.out / NEAR_DUP_DIR) as tmp:
        (tmp / dups).mkdir()
        for p in parts:
            _link_or_copy(p, tmp / dups / p.name)
        for name in [c for c, _ in clusters] + [GROUPS_FILE]:
            _link_or_copy(ctx.out / name, tmp / name)
        card = dataset_card(duplicates_dir=dups, clusters=[(c, t, _lines(ctx.out / c)) for c, t in clusters],
                            groups_file=GROUPS_FILE, duplicate_rows=rows, groups=_lines(ctx.out / GROUPS_FILE),
                            pair_threshold=ctx.cfg.pair_threshold, shingle_size=ctx.spec.shingle_size)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return {"near_dup": NEAR_DUP_DIR, "near_dup_rows": rows}


def step_report(ctx: StepContext) -> dict[str, Any]:
    figs = sorted(p.name for p in (ctx.out / FIGURES_DIR).glob("*.png"))
    text = render_report(
        cfg=ctx.cfg,
        spec=ctx.spec,
        views=pq.read_table(ctx.out / f"{VIEWS_FILE}.parquet").to_pylist(),
        lengths=pq.read_table(ctx.out / f"{LENGTHS_FILE}.parquet").to_pylist(),
        stats=ctx.recorded_stats("report"),
        figures=[f"{FIGURES_DIR}/{f}" for f in figs],
        duplicates_dir=duplicates_dir_name(ctx.cfg),
    )
    with atomic_path(ctx.out / REPORT_FILE) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return {"report": REPORT_FILE, **_write_near_dup(ctx)}
