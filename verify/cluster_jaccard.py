"""Recompute every cluster's Jaccard from the texts: each pair must reach the threshold (complete
linkage) and the reported min/mean must match. With a pair budget (`--max-pairs`), clusters that fit it
are checked whole and every other cluster on a seeded sample of its pairs. With a text budget
(`--max-bytes`), a seeded sample of clusters is recomputed; every cluster's ids, size and reported min
are still checked.

    python verify/cluster_jaccard.py --corpus-dir DIR --out-dir OUT    # every threshold the out dir lists
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
    from _inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from _reference import iter_documents, jaccard_hashes, shingles_of, text_sizes  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from ._reference import iter_documents, jaccard_hashes, shingles_of, text_sizes  # noqa: E402

TOLERANCE = 1e-6  # the files round Jaccard to 6 decimals
SAMPLE_PAIRS = 32  # pairs recomputed of a cluster that does not fit the budget whole


def check_clusters(files: list[Path], cluster_file: str | Path, threshold: float, k: int = 5,
                   max_pairs: int = 0, seed: int | str = 0, max_bytes: int = 0) -> dict:
    """Every pair in every cluster has exact Jaccard >= threshold; size, min and mean are as reported.

    With `max_pairs` > 0, at most about that many pairs are recomputed; with `max_bytes` > 0, about that
    many text bytes are hashed (see check_cluster_files)."""
    return check_cluster_files(files, [(cluster_file, threshold)], k, max_pairs, seed, max_bytes)[0]


def _sample_clusters(loaded: list[list[dict]], sizes: dict[str, int], max_bytes: int,
                     seed: int | str) -> list[list[bool]]:
    """Per file and cluster: whether its Jaccard is recomputed from the texts.

    Every cluster when `max_bytes` <= 0 or all of them fit. Else the clusters of all files, in one seeded
    order, while the text bytes of their documents (each counted once, whichever clusters share it) fit
    the budget; a cluster that does not fit is left out and the walk goes on. The first cluster of the
    order is always taken, however large, so every cluster can be drawn by some seed.
    """
    chosen = [[True] * len(clusters) for clusters in loaded]
    every = {d for clusters in loaded for c in clusters for d in c["doc_ids"]}
    if max_bytes <= 0 or sum(sizes.get(d, 0) for d in every) <= max_bytes:
        return chosen
    items = [(f, i) for f, clusters in enumerate(loaded) for i in range(len(clusters))]
    random.Random(f"{seed}:clusters").shuffle(items)
    chosen = [[False] * len(clusters) for clusters in loaded]
    held: set[str] = set()
    spent = 0
    for f, i in items:
        new = set(loaded[f][i]["doc_ids"]) - held
        cost = sum(sizes.get(d, 0) for d in new)
        if held and spent + cost > max_bytes:
            continue
        chosen[f][i] = True
        held |= new
        spent += cost
    return chosen


def _plan_pairs(clusters: list[dict], max_pairs: int, seed: int | str) -> list[list[tuple[str, str]] | None]:
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
                        max_pairs: int = 0, seed: int | str = 0, max_bytes: int = 0) -> list[dict]:
    """check_clusters for several cluster files of one corpus: the texts are read once and each
    document's shingle set is built once for all of them.

    `max_bytes` > 0 recomputes the Jaccard of a seeded sample of clusters only (_sample_clusters), the
    pair budget `max_pairs` applying to them; every cluster's ids, size and reported min are checked."""
    loaded = [[json.loads(line) for line in Path(f).read_text(encoding="utf-8").splitlines() if line]
              for f, _ in cluster_files]
    sizes = text_sizes(files)  # every id of the corpus, and what hashing its text costs
    sampled = _sample_clusters(loaded, sizes, max_bytes, seed)
    plans = [_plan_pairs([c for c, s in zip(clusters, keep, strict=True) if s], max_pairs, seed)
             for clusters, keep in zip(loaded, sampled, strict=True)]
    # Only the texts of the pairs to recompute are read and held (the budgets bound them).
    needed = {d for clusters, keep, plan in zip(loaded, sampled, plans, strict=True)
              for c, sample in zip([c for c, s in zip(clusters, keep, strict=True) if s], plan, strict=True)
              for d in (c["doc_ids"] if sample is None else [x for pair in sample for x in pair])}
    texts = dict(iter_documents(files, needed & sizes.keys()))
    shingles = shingles_of(texts, k)
    results = []
    for clusters, keep, plan, (_, threshold) in zip(loaded, sampled, plans, cluster_files, strict=True):
        steps = iter(plan)
        full_plan = [next(steps) if s else False for s in keep]
        results.append(_check(clusters, threshold, shingles, sizes.keys(), full_plan))
    held = sum(sizes[d] for d in texts)
    return [{**r, "text_bytes_hashed": held} for r in results]


def _check(clusters: list[dict], threshold: float, shingles, known,
           plan: list[list[tuple[str, str]] | None | bool]) -> dict:
    """plan per cluster: None recomputes every pair, a list those pairs, False none (ids, size and the
    reported min are checked all the same)."""
    failures, pairs, whole, recomputed = [], 0, 0, 0
    for c, sample in zip(clusters, plan, strict=True):
        ids = c["doc_ids"]
        missing = [d for d in ids if d not in known]
        if missing:
            failures.append(f"component {c['component']}: unknown document id(s) {missing[:3]}")
            continue
        if c["size"] != len(ids) or len(set(ids)) != len(ids) or len(ids) < 2:
            failures.append(f"component {c['component']}: size {c['size']} but {len(ids)} ids ({len(set(ids))} unique)")
            continue
        if c["min_jaccard"] < threshold:
            failures.append(f"component {c['component']}: reported min_jaccard {c['min_jaccard']} < {threshold}")
        if sample is False:
            continue
        recomputed += 1
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
    return {"passed": not failures, "clusters": len(clusters), "clusters_recomputed": recomputed,
            "clusters_checked_whole": whole,
            "pairs_checked": pairs, "failures": failures[:20], "n_failures": len(failures)}


def _cluster_files(a: argparse.Namespace, settings: dict) -> list[tuple[Path, float]]:
    """(file, threshold) pairs to check: the named one, else every threshold the out dir's analysis cut."""
    if a.clusters is not None:
        return [(Path(a.clusters), a.threshold)]
    names = settings.get("clusters", {})
    thresholds = settings.get("cluster_thresholds", [])
    if thresholds and names:
        return [(Path(a.out_dir) / names[f"t{round(t * 100):02d}"], float(t)) for t in thresholds]
    found = sorted(Path(a.out_dir).glob("near_dup_clusters_t*.jsonl"))  # an analysis older than _INPUTS.json
    return [(f, int(f.stem.rsplit("_t", 1)[1]) / 100) for f in found]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--clusters", help="one near_dup_clusters_tNN.jsonl (default: every one in the out dir)")
    p.add_argument("--threshold", type=float, help="the threshold of --clusters")
    p.add_argument("--max-pairs", type=int, default=0, help="recompute at most about this many pairs (0: every pair)")
    p.add_argument("--max-bytes", type=int, default=0,
                   help="hash about this many text bytes: a seeded sample of clusters (0: every cluster)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    require(a, p)
    if a.clusters is None and a.out_dir is None:
        p.error("--clusters is needed without --out-dir")
    if (a.clusters is None) != (a.threshold is None):
        p.error("--clusters and --threshold go together")
    inputs = resolve_inputs(a.corpus_dir, a.out_dir, a.exclude)
    targets = _cluster_files(a, inputs.settings)
    if not targets:
        p.error(f"no near_dup_clusters_t*.jsonl in {a.out_dir}")
    results = check_cluster_files(inputs.files, targets, max_pairs=a.max_pairs, seed=a.seed, max_bytes=a.max_bytes)
    failures = list(inputs.failures)
    for (path, threshold), res in zip(targets, results, strict=True):
        print(f"{'PASS' if res['passed'] else 'FAIL'}: {path.name} (>= {threshold}): {res['clusters']} clusters "
              f"({res['clusters_recomputed']} recomputed), {res['pairs_checked']} pairs, {res['n_failures']} failure(s)")
        failures += [f"{path.name}: {f}" for f in res["failures"]]
    print(f"{'PASS' if not failures else 'FAIL'}: {len(targets)} cluster file(s) over {len(inputs.files)} corpus file(s)")
    for f in failures:
        print(f"  {f}")
    return 0 if not failures else 1

if __name__ == "__main__":
    sys.exit(main())
