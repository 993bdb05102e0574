"""Recompute every cluster's Jaccard from the texts: each pair must reach the threshold (complete
linkage) and the reported min/mean must match.

    python verify/cluster_jaccard.py --corpus-dir DIR --clusters OUT/near_dup_clusters_t70.jsonl --threshold 0.7
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import combinations
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python verify/<name>.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _reference import corpus_files, jaccard, shingle_set, texts_of  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._reference import corpus_files, jaccard, shingle_set, texts_of  # noqa: E402

TOLERANCE = 1e-6  # the files round Jaccard to 6 decimals


def check_clusters(files: list[Path], cluster_file: str | Path, threshold: float, k: int = 5) -> dict:
    """Every pair in every cluster has exact Jaccard >= threshold; size, min and mean are as reported."""
    clusters = [json.loads(line) for line in Path(cluster_file).read_text(encoding="utf-8").splitlines() if line]
    texts = texts_of(files, {d for c in clusters for d in c["doc_ids"]})
    failures, pairs = [], 0
    for c in clusters:
        ids = c["doc_ids"]
        missing = [d for d in ids if d not in texts]
        if missing:
            failures.append(f"component {c['component']}: unknown document id(s) {missing[:3]}")
            continue
        if c["size"] != len(ids) or len(set(ids)) != len(ids) or len(ids) < 2:
            failures.append(f"component {c['component']}: size {c['size']} but {len(ids)} ids ({len(set(ids))} unique)")
            continue
        sets = {d: shingle_set(texts[d], k) for d in ids}
        js = [jaccard(sets[a], sets[b]) for a, b in combinations(ids, 2)]
        pairs += len(js)
        lo, mean = min(js), sum(js) / len(js)
        if lo < threshold:
            failures.append(f"component {c['component']}: a pair has Jaccard {lo:.6f} < {threshold}")
        if abs(lo - c["min_jaccard"]) > TOLERANCE or abs(mean - c["mean_jaccard"]) > TOLERANCE:
            failures.append(
                f"component {c['component']}: reported min/mean {c['min_jaccard']}/{c['mean_jaccard']}, "
                f"recomputed {lo:.6f}/{mean:.6f}"
            )
        if c["min_jaccard"] < threshold:
            failures.append(f"component {c['component']}: reported min_jaccard {c['min_jaccard']} < {threshold}")
    return {"passed": not failures, "clusters": len(clusters), "pairs_checked": pairs, "failures": failures[:20],
            "n_failures": len(failures)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus-dir", required=True)
    p.add_argument("--clusters", required=True)
    p.add_argument("--threshold", type=float, required=True)
    p.add_argument("--exclude", help="folder under the corpus dir to skip (the analysis out dir)")
    a = p.parse_args(argv)
    res = check_clusters(corpus_files(a.corpus_dir, a.exclude), a.clusters, a.threshold)
    verdict = "PASS" if res["passed"] else "FAIL"
    print(f"{verdict}: {res['clusters']} clusters, {res['pairs_checked']} pairs recomputed, {res['n_failures']} failure(s)")
    for f in res["failures"]:
        print(f"  {f}")
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
