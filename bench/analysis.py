"""Benchmark of the corpus analysis on planted corpora: seconds, documents/s and peak RSS per step,
recall of the planted pairs at Jaccard >= 0.7 and precision of the reported Jaccard values.

    PYTHONPATH=. python bench/analysis.py --sizes 100000          # a few minutes on 2 cores
    PYTHONPATH=. python bench/analysis.py --sizes 100000 1000000  # the 1M run takes much longer

Also prints the per-document cost constants `corpus_dagster/analysis/costs.py` holds for `--dry-run`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from corpus_dagster.analysis.costs import BASE_MEMORY_BYTES
from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.planted import jaccard, planted_corpus, reference_shingles
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.core.config import load_settings

DUPLICATE_STEPS = ("exact", "candidates", "jaccard", "duplicates", "clusters")


def _disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _run(corpus: str, out: str, cfg: dict, workers: int) -> dict:
    res = run_analysis(corpus_from_dir(corpus), out, cfg, workers=workers)
    return {k: res[k] for k in ("seconds", "peak_rss_mb", "steps")}


def bench(n: int, workers: int, tokenizers: list[str], keep: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f"analysis-bench-{n}-"))
    try:
        t0 = time.monotonic()
        p = planted_corpus(n, seed=42)
        corpus = tmp / "in"
        corpus.mkdir()
        rows = 100_000
        for k in range(0, n, rows):
            pq.write_table(p.table.slice(k, rows), corpus / f"shard_{k // rows:05d}.parquet", row_group_size=20_000)
        text_bytes = sum(len(t.encode()) for t in p.table.column("text").to_pylist())
        print(f"\n## {n:,} documents, {text_bytes / 2**20:.0f} MiB text, {len(p.near_pairs):,} planted near pairs "
              f"(generated in {time.monotonic() - t0:.0f} s), workers={workers}")
        cfg = load_settings(None, {"analysis": {"tokenizers": tokenizers}}).analysis
        out = tmp / "out"
        # A fresh (spawned) process, so its peak RSS is the analysis' own and not the generator's.
        with mp.get_context("spawn").Pool(1) as pool:
            res = pool.apply(_run, (str(corpus), str(out), cfg, workers))
        print(f"{'step':<12}{'seconds':>10}{'docs/s':>12}{'peak RSS MiB':>14}")
        for step, s in res["seconds"].items():
            print(f"{step:<12}{s:>10.2f}{n / s if s else 0:>12,.0f}{res['peak_rss_mb'][step]:>14.0f}")
        dup_s = sum(res["seconds"][s] for s in DUPLICATE_STEPS)
        dup_rss = max(res["peak_rss_mb"][s] for s in DUPLICATE_STEPS)
        print(f"{'dup. total':<12}{dup_s:>10.2f}{n / dup_s:>12,.0f}{dup_rss:>14.0f}   (given signatures: exact..clusters)")

        ids = p.table.column("id").to_pylist()
        texts = p.table.column("text").to_pylist()
        near = {}
        for part in sorted((out / "doc_duplicates_t70").glob("*.parquet")):
            for r in pq.read_table(part, columns=["doc_id", "near_duplicates"]).to_pylist():
                near[r["doc_id"]] = {x["doc_id"]: x["jaccard"] for x in r["near_duplicates"]}
        want = [(a, b) for a, b, j in p.near_pairs if j >= 0.7 and texts[a] != texts[b]]
        found = sum(ids[b] in near.get(ids[a], {}) for a, b in want)
        index = {d: i for i, d in enumerate(ids)}
        listed = [(a, b, j) for a, m in near.items() for b, j in m.items() if a < b]
        sample = random.Random(0).sample(listed, min(2000, len(listed)))
        exact = sum(abs(jaccard(reference_shingles(texts[index[a]]), reference_shingles(texts[index[b]])) - j) < 1e-6
                    for a, b, j in sample)
        print(f"recall of planted pairs at J >= 0.7: {found / max(len(want), 1):.4f} ({found:,}/{len(want):,}); "
              f"precision (reported Jaccard exact, sample of {len(sample):,}): {exact / max(len(sample), 1):.4f}")
        print("cost constants (per doc): " + ", ".join(
            f"{s}: s_doc={res['seconds'][s] / n:.2e} mem_doc={max(0.0, res['peak_rss_mb'][s] * 2**20 - BASE_MEMORY_BYTES) / n:.0f}"
            for s in res["seconds"]))
        print(f"disk: outputs {_disk(out) - _disk(out / '_work'):,} B, _work {_disk(out / '_work'):,} B "
              f"({_disk(out) / n:.0f} B/doc)")
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tokenizer", action="append", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    a = ap.parse_args()
    for n in a.sizes:
        bench(n, a.workers, a.tokenizer or ["cl100k"], a.keep)


if __name__ == "__main__":
    main()
