"""Step `clusters`: complete-linkage clusters per cluster threshold (`near_dup_clusters_t*.jsonl`), the
duplication views of every threshold and the duplicate rate by length."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_dagster.analysis.clusters import complete_linkage
from corpus_dagster.analysis.outputs import RATES_FILE, VIEWS_FILE, cluster_file, tag, write_json, write_table
from corpus_dagster.analysis.steps.context import StepContext, load_docs, load_groups, load_pairs
from corpus_dagster.analysis.views import exact_view, rate_by_length, threshold_view, views_table
from corpus_dagster.core.atomic import atomic_path


def step_clusters(ctx: StepContext) -> dict[str, Any]:
    cfg = ctx.cfg
    docs = load_docs(ctx)
    groups = load_groups(ctx)
    pairs, jac, _, _ = load_pairs(ctx)
    ids = docs.column("id").combine_chunks()
    words = docs.column("n_words").to_numpy()
    has_shingles = words >= ctx.spec.shingle_size
    views = [exact_view(groups)]
    stats: dict[str, Any] = {}
    for t in cfg.cluster_thresholds:
        cs = complete_linkage(pairs, jac, t, groups.sizes, has_shingles)
        with atomic_path(ctx.out / cluster_file(t)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            for k, reps in enumerate(cs.reps):
                rows = np.sort(np.concatenate([groups.members[groups.starts[r] : groups.starts[r] + groups.sizes[r]]
                                               for r in reps.tolist()]))
                line = {
                    "component": k,
                    "size": int(cs.docs[k]),
                    "doc_ids": ids.take(pa.array(rows)).to_pylist(),
                    "min_jaccard": round(float(cs.min_jaccard[k]), 6),
                    "mean_jaccard": round(float(cs.mean_jaccard[k]), 6),
                }
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        views.append(threshold_view(groups, has_shingles, pairs, jac, cs))
        stats[f"clusters_{tag(t)}"] = len(cs.reps)
        stats[f"largest_cluster_{tag(t)}"] = int(cs.docs.max()) if len(cs.docs) else 0
    src = docs.column("source_id").combine_chunks().dictionary_encode()
    names = src.dictionary.to_pylist()
    table = views_table(views, src.indices.to_numpy(zero_copy_only=False), names, has_shingles)
    write_table(table, ctx.out / f"{VIEWS_FILE}.parquet")
    write_json(ctx.out / f"{VIEWS_FILE}.json", table.to_pylist())
    write_table(rate_by_length(words, views, cfg.length_bins), ctx.out / RATES_FILE)
    stats["overall"] = {r["view"]: {"affected_pct": r["affected_pct"], "removable_pct": r["removable_pct"]}
                        for r in table.to_pylist() if r["scope"] == "overall"}
    return stats
