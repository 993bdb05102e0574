"""Step `exact`: exact-duplicate groups by SHA-256 of the text, written as `duplicate_groups.jsonl`; the
representative of every document kept for the later steps."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_dagster.analysis.exact import exact_representatives, group_members
from corpus_dagster.analysis.outputs import GROUPS_FILE, save_npy
from corpus_dagster.analysis.steps.context import REPS_FILE, StepContext, digest_matrix, load_docs
from corpus_dagster.core.atomic import atomic_path


def step_exact(ctx: StepContext) -> dict[str, Any]:
    docs = load_docs(ctx)
    rep = exact_representatives(digest_matrix(docs))
    save_npy(ctx.out / REPS_FILE, rep)
    starts, sizes, members = group_members(rep)
    ids = docs.column("id").combine_chunks()
    groups = np.flatnonzero(sizes >= 2)
    with atomic_path(ctx.out / GROUPS_FILE) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for g in groups.tolist():
            rows = members[starts[g] : starts[g] + sizes[g]]
            fh.write(json.dumps({"doc_ids": ids.take(pa.array(rows)).to_pylist()}, ensure_ascii=False) + "\n")
    return {
        "exact_groups": len(groups),
        "docs_in_exact_groups": int(sizes[groups].sum()),
        "exact_removable": int((sizes[groups] - 1).sum()),
    }
