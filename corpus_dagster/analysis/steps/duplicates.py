"""Step `duplicates`: the per-document duplicate table (`doc_duplicates_t<pair threshold>/`), every
document with its exact and near duplicates."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc

from corpus_dagster.analysis.outputs import ANALYSIS_PARQUET, duplicates_dir_name
from corpus_dagster.analysis.steps.context import StepContext, load_docs, load_groups, load_pairs
from corpus_dagster.analysis.views import DUPLICATES_SCHEMA, doc_duplicate_tables
from corpus_dagster.core.atomic import atomic_dir
from corpus_dagster.core.parquet import write_parquet


def step_duplicates(ctx: StepContext) -> dict[str, Any]:
    docs = load_docs(ctx)
    groups = load_groups(ctx)
    pairs, jac, inter, union = load_pairs(ctx)
    ids = docs.column("id").combine_chunks()
    rows = n_exact = n_near = parts = 0
    with atomic_dir(ctx.out / duplicates_dir_name(ctx.cfg)) as tmp:
        for i, table in enumerate(doc_duplicate_tables(ids, groups, pairs, jac, ctx.cfg.rows_per_group, inter, union)):
            write_parquet(table, tmp / f"part-{i:05d}.parquet", ANALYSIS_PARQUET, row_groups=[0, table.num_rows])
            rows += table.num_rows
            n_exact += int(pc.sum(pc.greater(table.column("n_exact"), 0)).as_py() or 0)
            n_near += int(pc.sum(pc.greater(table.column("n_near"), 0)).as_py() or 0)
            parts += 1
        if parts == 0:
            write_parquet(DUPLICATES_SCHEMA.empty_table(), tmp / "part-00000.parquet", ANALYSIS_PARQUET, row_groups=[0, 0])
    return {"rows": rows, "docs_with_exact": n_exact, "docs_with_near": n_near, "near_pairs": len(pairs)}
