"""Recompute every cluster's Jaccard from the texts: each pair must reach the threshold (complete
linkage) and the reported min/mean must match. With a pair budget (`--max-pairs`), clusters that fit it
are checked whole and every other cluster on a seeded sample of its pairs.

    python verify/cluster_jaccard.py --corpus-dir DIR --clusters OUT/near_dup_clusters_t70.jsonl --threshold 0.7
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from itertools import combinations
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python verify/<name>.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _reference import corpus_files, iter_documents, jaccard_hashes, shingles_of  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._reference import corpus_files, iter_documents, jaccard_hashes, shingles_of  # noqa: E402

TOLERANCE = 1e-6  # the files round Jaccard to 6 decimals
SAMPLE_PAIRS = 32  # pairs recomputed of a cluster that does not fit the budget whole


def check_clusters(files: list[Path], cluster_file: str | Path, threshold: float, k: int = 5,
                   max_pairs: int = 0, seed: int = 0) -> dict:
    """Every pair in every cluster has exact Jaccard >= threshold; size, min and mean are as reported.

    With `max_pairs` > 0, at most about that many pairs are recomputed (see check_cluster_files)."""
    return check_cluster_files(files, [(cluster_file, threshold)], k, max_pairs, seed)[0]


def _plan_pairs(clusters: list[dict], max_pairs: int, seed: int) -> list[list[tuple[str, str]] | None]:
    """Per cluster: None to recompute every pair, else the seeded sample of pairs to recompute.

    Within the budget, clusters are checked whole (min and mean must match the report), smallest
    first and then in a seeded order; every other cluster gets SAMPLE_PAIRS seeded pairs, each of which
    must reach the threshold and the reported min. No cluster goes unchecked.
    """
    n_pairs = [len(c["doc_ids"]) * (len(c["doc_ids"]) - 1) // 2 for c in clusters]
    if max_pairs <= 0 or sum(n_pairs) <= max_pairs:
        return [None] * len(clusters)
    rng = random.Random(seed)
    order = sorted(range(len(clusters)), key=lambda i: (n_pairs[i], rng.random()))
    plan: list[list[tuple[str, str]] | None] = [None] * len(clusters)
    budget = max_pairs
    for i in order:
        if n_pairs[i] <= max(budget, SAMPLE_PAIRS):  # a sample would be the whole cluster anyway
            budget = max(0, budget - n_pairs[i])
            continue
        pairs = list(combinations(clusters[i]["doc_ids"], 2))
        plan[i] = random.Random(f"{seed}:{clusters[i]['component']}").sample(pairs, min(SAMPLE_PAIRS, len(pairs)))
    return plan


def check_cluster_files(files: list[Path], cluster_files: list[tuple[str | Path, float]], k: int = 5,
                        max_pairs: int = 0, seed: int = 0) -> list[dict]:
    """check_clusters for several cluster files of one corpus: the texts are read once and each
    document's shingle set is built once for all of them."""
    loaded = [[json.loads(line) for line in Path(f).read_text(encoding="utf-8").splitlines() if line]
              for f, _ in cluster_files]
    plans = [_plan_pairs(clusters, max_pairs, seed) for clusters in loaded]
    # Every clustered id must exist; only the texts of the pairs to recompute are held (the budget bounds them).
    wanted = {d for clusters in loaded for c in clusters for d in c["doc_ids"]}
    needed = {d for clusters, plan in zip(loaded, plans, strict=True) for c, sample in zip(clusters, plan, strict=True)
              for d in (c["doc_ids"] if sample is None else [x for pair in sample for x in pair])}
    known: set[str] = set()
    texts: dict[str, str] = {}
    for doc_id, text in iter_documents(files):
        if doc_id in wanted:
            known.add(doc_id)
            if doc_id in needed:
                texts[doc_id] = text
    shingles = shingles_of(texts, k)
    return [_check(clusters, threshold, shingles, known, plan)
            for clusters, plan, (_, threshold) in zip(loaded, plans, cluster_files, strict=True)]


def _check(clusters: list[dict], threshold: float, shingles, known: set[str],
           plan: list[list[tuple[str, str]] | None]) -> dict:
    failures, pairs, whole = [], 0, 0
    for c, sample in zip(clusters, plan, strict=True):
        ids = c["doc_ids"]
        missing = [d for d in ids if d not in known]
        if missing:
            failures.append(f"component {c['component']}: unknown document id(s) {missing[:3]}")
            continue
        if c["size"] != len(ids) or len(set(ids)) != len(ids) or len(ids) < 2:
            failures.append(f"component {c['component']}: size {c['size']} but {len(ids)} ids ({len(set(ids))} unique)")
            continue
        chosen = list(combinations(ids, 2)) if sample is None else sample
        js = [jaccard_hashes(shingles(a), shingles(b)) for a, b in chosen]
        pairs += len(js)
        lo, mean = min(js), sum(js) / len(js)
        if lo < threshold:
            failures.append(f"component {c['component']}: a pair has Jaccard {lo:.6f} < {threshold}")
        if sample is None:
            whole += 1
            if abs(lo - c["min_jaccard"]) > TOLERANCE or abs(mean - c["mean_jaccard"]) > TOLERANCE:
                failures.append(
                    f"component {c['component']}: reported min/mean {c['min_jaccard']}/{c['mean_jaccard']}, "
                    f"recomputed {lo:.6f}/{mean:.6f}"
                )
        elif lo < c["min_jaccard"] - TOLERANCE:
            failures.append(f"component {c['component']}: a sampled pair has Jaccard {lo:.6f} below the reported "
                            f"min {c['min_jaccard']}")
        if c["min_jaccard"] < threshold:
            failures.append(f"component {c['component']}: reported min_jaccard {c['min_jaccard']} < {threshold}")
    return {"passed": not failures, "clusters": len(clusters), "clusters_checked_whole": whole,
            "pairs_checked": pairs, "failures": failures[:20], "n_failures": len(failures)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus-dir", required=True)
    p.add_argument("--clusters", required=True)
    p.add_argument("--threshold", type=float, required=True)
    p.add_argument("--exclude", help="folder under the corpus dir to skip (the analysis out dir)")
    p.add_argument("--max-pairs", type=int, default=0, help="recompute at most about this many pairs (0: every pair)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    res = check_clusters(corpus_files(a.corpus_dir, a.exclude), a.clusters, a.threshold, max_pairs=a.max_pairs, seed=a.seed)
    verdict = "PASS" if res["passed"] else "FAIL"
    print(f"{verdict}: {res['clusters']} clusters, {res['pairs_checked']} pairs recomputed, {res['n_failures']} failure(s)")
    for f in res["failures"]:
        print(f"  {f}")
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
