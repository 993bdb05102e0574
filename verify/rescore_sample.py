"""Re-score a seeded random sample of doc_duplicates records from the texts.

    python verify/rescore_sample.py --corpus-dir DIR --out-dir OUT     # the out dir's table and threshold
    python verify/rescore_sample.py --corpus-dir DIR --duplicates OUT/doc_duplicates_t70 --threshold 0.7
"""

from __future__ import annotations

import argparse
import random
import sys
from fractions import Fraction
from pathlib import Path

import pyarrow.parquet as pq

if __package__ in (None, ""):  # run as a script: python verify/<name>.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from _reference import counts_hashes, shingles_of, texts_of  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from ._reference import counts_hashes, shingles_of, texts_of  # noqa: E402

TOLERANCE = 1e-6  # Jaccard is stored as float32 (rounded up: never below the exact ratio)


def check_duplicates_sample(files: list[Path], duplicates_dir: str | Path, threshold: float,
                            sample: int = 200, seed: int | str = 0, k: int = 5) -> dict:
    """For sampled rows: exact twins are byte-identical, near entries are not and have the stated Jaccard
    (>= threshold, descending), the lists are disjoint, and n_exact/n_near match. Where the entries
    carry `intersection`/`union`, those must be the recomputed shingle counts, and the float32 Jaccard
    must not fall below their exact ratio (so `jaccard >= t` keeps a pair whose ratio is t)."""
    parts = sorted(Path(duplicates_dir).glob("*.parquet"))
    rows = [r for p in parts for r in pq.read_table(p).to_pylist()]
    rows.sort(key=lambda r: r["doc_id"])
    picked = random.Random(seed).sample(rows, min(sample, len(rows)))
    wanted = {r["doc_id"] for r in picked}
    for r in picked:
        wanted.update(r["exact_duplicates"])
        wanted.update(n["doc_id"] for n in r["near_duplicates"])
    texts = texts_of(files, wanted)
    failures, scored = [], 0
    shingles = shingles_of(texts, k)
    for r in picked:
        me = r["doc_id"]
        if me not in texts:
            failures.append(f"{me}: not a document of the corpus")
            continue
        exact, near = r["exact_duplicates"], r["near_duplicates"]
        if r["n_exact"] != len(exact) or r["n_near"] != len(near):
            failures.append(f"{me}: n_exact/n_near {r['n_exact']}/{r['n_near']} but lists of {len(exact)}/{len(near)}")
        if not exact and not near:
            failures.append(f"{me}: a row without any duplicate")
        near_ids = [n["doc_id"] for n in near]
        if set(exact) & set(near_ids) or me in exact or me in near_ids:
            failures.append(f"{me}: exact and near lists overlap or list the document itself")
        for d in exact:
            if texts.get(d) != texts[me]:
                failures.append(f"{me}: exact duplicate {d} is not byte-identical")
        js = [n["jaccard"] for n in near]
        if js != sorted(js, reverse=True):
            failures.append(f"{me}: near duplicates not in descending Jaccard")
        for n in near:
            if n["doc_id"] not in texts:
                failures.append(f"{me}: near duplicate {n['doc_id']} is not a document of the corpus")
                continue
            if texts[n["doc_id"]] == texts[me]:
                failures.append(f"{me}: near duplicate {n['doc_id']} is byte-identical (belongs in exact)")
            inter, union = counts_hashes(shingles(me), shingles(n["doc_id"]))
            true = inter / union if union else 0.0
            scored += 1
            if true < threshold or abs(true - n["jaccard"]) > TOLERANCE:
                failures.append(f"{me} ~ {n['doc_id']}: reported Jaccard {n['jaccard']:.6f}, recomputed {true:.6f}")
            if "intersection" in n and (n["intersection"], n["union"]) != (inter, union):
                failures.append(f"{me} ~ {n['doc_id']}: reported intersection/union {n['intersection']}/{n['union']}, "
                                f"recomputed {inter}/{union}")
            elif union and Fraction(n["jaccard"]) < Fraction(inter, union):
                failures.append(f"{me} ~ {n['doc_id']}: stored Jaccard {n['jaccard']!r} is below the exact "
                                f"{inter}/{union}")
    return {"passed": not failures, "rows": len(rows), "sampled": len(picked), "pairs_scored": scored,
            "failures": failures[:20], "n_failures": len(failures)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--duplicates", help="a doc_duplicates_tNN folder (default: the out dir's)")
    p.add_argument("--threshold", type=float, help="its pair threshold (default: the out dir's, else 0.7)")
    p.add_argument("--sample", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    require(a, p)
    if a.duplicates is None and a.out_dir is None:
        p.error("--duplicates is needed without --out-dir")
    inputs = resolve_inputs(a.corpus_dir, a.out_dir, a.exclude)
    duplicates = a.duplicates or Path(a.out_dir) / inputs.settings.get("duplicates", "doc_duplicates_t70")
    threshold = a.threshold if a.threshold is not None else inputs.settings.get("pair_threshold", 0.7)
    res = check_duplicates_sample(inputs.files, duplicates, threshold, a.sample, a.seed)
    failures = inputs.failures + res["failures"]
    print(f"{'PASS' if not failures else 'FAIL'}: {res['sampled']} of {res['rows']} records, "
          f"{res['pairs_scored']} near pairs re-scored, {res['n_failures'] + len(inputs.failures)} failure(s)")
    for f in failures:
        print(f"  {f}")
    return 0 if not failures else 1

if __name__ == "__main__":
    sys.exit(main())
