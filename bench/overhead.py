"""Dagster's cost per source partition at 100+ sources, through `python -m corpus_dagster.run` as users run it.

Builds N small sources of real text from this machine (license texts and Python's pydoc topics cut into
documents, a few KB per source, so the stages' own work is small and what is left is orchestration), runs
the CLI on fresh artifacts (every source built) and then again unchanged (every source cached), for each
`--workers`, and prints one table: wall and CPU seconds of the whole process tree, the source phase and the
`build_corpus` phase (from the Dagster run records), and the source phase's wall per source.

    .venv/bin/python bench/overhead.py                        # 120 sources, workers 1 and 2
    .venv/bin/python bench/overhead.py --sources 200 --workers 2
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))


def machine_paragraphs() -> list[str]:
    """Paragraphs of real prose on this machine: license texts, then Python's pydoc topics."""
    from pydoc_data.topics import topics

    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    texts.extend(topics[k] for k in sorted(topics))
    return [p.strip() for t in texts for p in t.split("\n\n") if len(p.split()) >= 20]


def build_sources(folder: Path, n_sources: int, docs_per_source: int) -> list[str]:
    """One JSON Lines file per source, each `docs_per_source` documents of 3 paragraphs (distinct per source)."""
    paragraphs = machine_paragraphs()
    if not paragraphs:
        raise SystemExit("no text found on this machine (/usr/share/common-licenses, pydoc topics)")
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    k = 0
    for s in range(n_sources):
        name = f"src{s:04d}"
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for d in range(docs_per_source):
                parts = [paragraphs[(k + i) % len(paragraphs)] for i in range(3)]
                k += 3
                text = f"Document {d} of source {name}.\n\n" + "\n\n".join(parts)
                fh.write(json.dumps({"text": text, "url": f"https://bench.invalid/{name}/{d}"}) + "\n")
        names.append(name)
    return names


def write_config(run_dir: Path, corpus: Path, names: list[str], workers: int) -> Path:
    import yaml

    from corpus_dagster.core.ledger import Source, write_ledger

    cfg = {"dataset": "overhead", "version": "v1", "workers": workers,
           "paths": {"artifacts": str(run_dir / "artifacts")}}
    path = run_dir / "config.yaml"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=True))
    ledger = run_dir / "artifacts" / "corpus" / "LEDGER.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    write_ledger(ledger, [Source(n, (f"file://{corpus / (n + '.jsonl')}",), "jsonl", "NOASSERTION",
                                 url_field="url") for n in names])
    return path


def phases(home: Path, since: float) -> dict[str, Any]:
    """Source-phase and global-phase wall seconds of the runs started after `since`, from the instance."""
    os.environ["DAGSTER_HOME"] = str(home)
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        records = [r for r in instance.get_run_records() if r.start_time and r.start_time >= since]
    src = [r for r in records if r.dagster_run.job_name == "build_source"]
    glob_ = [r for r in records if r.dagster_run.job_name == "build_corpus"]
    out: dict[str, Any] = {"source_runs": len(src), "failed": sum(not r.dagster_run.is_success for r in records)}
    if src:
        out["source_phase"] = max(r.end_time for r in src) - min(r.start_time for r in src)
        out["source_run_mean"] = sum(r.end_time - r.start_time for r in src) / len(src)
    if glob_:
        out["global_phase"] = max(r.end_time for r in glob_) - min(r.start_time for r in glob_)
    return out


def run_cli(config: Path, home: Path) -> dict[str, Any]:
    """`python -m corpus_dagster.run CONFIG` as a child; wall, CPU of its process tree, and the run phases."""
    env = dict(os.environ, DAGSTER_HOME=str(home), RAYON_NUM_THREADS="1")
    since = time.time()
    before, wall0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall": wall, "cpu": cpu, "rc": proc.returncode, **phases(home, since)}


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=120, help="number of sources (default 120)")
    ap.add_argument("--docs", type=int, default=4, help="documents per source (default 4)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    ap.add_argument("--label", default="", help="prefix of this run's folders under bench/out")
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = ap.parse_args()

    corpus = OUT_DIR / f"overhead-corpus-{args.sources}x{args.docs}"
    names = build_sources(corpus, args.sources, args.docs)
    rows = []
    for workers in args.workers:
        run_dir = OUT_DIR / "overhead-runs" / f"{args.label}w{workers}"
        shutil.rmtree(run_dir, ignore_errors=True)
        config = write_config(run_dir, corpus, names, workers)
        for state in ("built", "cached"):
            r = run_cli(config, run_dir / "dagster_home")
            rows.append({"workers": workers, "state": state, **r})
            print(f"  workers {workers} {state:6}: wall {r['wall']:.1f} s, rc {r['rc']}", flush=True)
    n = args.sources
    print(f"\n{n} sources x {args.docs} documents, `python -m corpus_dagster.run` on fresh artifacts (built), "
          "then unchanged (cached); seconds")
    head = ["workers", "state", "wall", "CPU", "source phase", "per source", "source run (mean)",
            "build_corpus", "rc"]
    table = [head] + [[str(r["workers"]), r["state"], fmt(r["wall"]), fmt(r["cpu"]), fmt(r.get("source_phase")),
                       fmt((r.get("source_phase") or 0) / n, 2), fmt(r.get("source_run_mean"), 2),
                       fmt(r.get("global_phase")), str(r["rc"])] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for j, row in enumerate(table):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if j == 0:
            print("  ".join("-" * w for w in widths))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
