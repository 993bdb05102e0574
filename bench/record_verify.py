"""What verifying stage outputs by sha256 on reuse costs: one hash pass over every recorded output, per stage.

Every stage trusts a cached output (its own cache hit, or an upstream output a reader takes through
`records.record_files`) only after hashing it and comparing with the sha256 in its `_RECORD.json`. This
times exactly that check (`records.damaged_outputs`) for every record under an artifacts root, with the
process's digest memo cleared first, and prints one row per stage: files, MB, seconds, MB/s; then the same
pass again, which the memo answers without reading (what a reader pays after its upstream's cache check in
the same process).

    .venv/bin/python bench/record_verify.py                       # builds ~100 MB of machine text first
    .venv/bin/python bench/record_verify.py --mb 16               # a quicker build
    .venv/bin/python bench/record_verify.py --artifacts ARTIFACTS # an existing artifacts root, e.g. make demo's

The build (bench/pipeline.py's corpus of man pages, docs and licenses; clean filters off so every document
reaches every stage, or `--filters on`; workers 2) runs the stage drivers in this process: ingest, clean,
minhash, dedup, scrub, publish, tokens, analysis, release, review. Files just written are in the page
cache, so the first pass measures hashing, not the disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))

MB = 1_000_000


def build(mb: int, workers: int, filters_on: bool) -> tuple[Path, float]:
    """Build (once per size) an artifacts root of the bench corpus through the stage drivers; (root, seconds)."""
    import pipeline

    corpus = pipeline.build_corpus(mb)
    info = json.loads((corpus / "_READY.json").read_text())
    run_dir = pipeline.OUT_DIR / f"record-verify-{mb}mb-w{workers}-{'on' if filters_on else 'off'}"
    artifacts = run_dir / "artifacts"
    if (run_dir / "_BUILT.json").exists():
        return artifacts, json.loads((run_dir / "_BUILT.json").read_text())["seconds"]
    config = pipeline.write_config(run_dir, corpus, sorted(info), workers, filters_on=filters_on)

    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger

    resolved = load_config(config)
    layout = Layout.from_config(resolved)
    sids = [s.source_id for s in load_ledger(layout.ledger)]
    stages = pipeline.stage_functions(layout, pipeline.settings_of(resolved), sids)
    start = time.monotonic()
    for name in ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokens", "analysis", "release", "review"):
        t0 = time.monotonic()
        stages[name][0]()
        print(f"  built {name:<9} {time.monotonic() - t0:6.1f} s", file=sys.stderr, flush=True)
    seconds = time.monotonic() - start
    (run_dir / "_BUILT.json").write_text(json.dumps({"seconds": seconds, "text_mb": sum(
        v["text_bytes"] for v in info.values()) / MB}))
    return artifacts, seconds


def record_folders(artifacts: Path) -> list[Path]:
    """Every folder holding a `_RECORD.json` under the root, in path order."""
    from corpus_dagster.core.records import RECORD

    return sorted(p.parent for p in artifacts.rglob(RECORD) if ".locks" not in p.parts)


def verify_all(artifacts: Path) -> dict[str, dict[str, Any]]:
    """Per stage: files, bytes and seconds of checking every recorded output against its record."""
    from corpus_dagster.core import records

    rows: dict[str, dict[str, Any]] = {}
    for folder in record_folders(artifacts):
        record = records.read_record(folder)
        if record is None:
            continue
        row = rows.setdefault(record.stage, {"records": 0, "files": 0, "bytes": 0, "seconds": 0.0, "damaged": 0})
        t0 = time.perf_counter()
        damaged = records.damaged_outputs(folder, record)
        row["seconds"] += time.perf_counter() - t0
        row["records"] += 1
        row["files"] += len(record.outputs)
        row["bytes"] += sum(int(e["bytes"]) for e in record.outputs.values())
        row["damaged"] += len(damaged)
    return rows


def print_table(first: dict[str, dict[str, Any]], again: dict[str, dict[str, Any]]) -> None:
    header = f"{'stage':<10} {'records':>7} {'files':>6} {'MB':>9} {'seconds':>8} {'MB/s':>8} {'memoized s':>10}"
    print(header)
    print("-" * len(header))
    total = {"records": 0, "files": 0, "bytes": 0, "seconds": 0.0}
    total_again = 0.0
    for stage, row in first.items():
        rate = row["bytes"] / MB / row["seconds"] if row["seconds"] else float("inf")
        print(f"{stage:<10} {row['records']:>7} {row['files']:>6} {row['bytes'] / MB:>9.1f} {row['seconds']:>8.3f} "
              f"{rate:>8.0f} {again[stage]['seconds']:>10.4f}")
        for k in total:
            total[k] += row[k]
        total_again += again[stage]["seconds"]
    rate = total["bytes"] / MB / total["seconds"] if total["seconds"] else float("inf")
    print("-" * len(header))
    print(f"{'all':<10} {total['records']:>7} {total['files']:>6} {total['bytes'] / MB:>9.1f} {total['seconds']:>8.3f} "
          f"{rate:>8.0f} {total_again:>10.4f}")
    damaged = sum(r["damaged"] for r in first.values())
    if damaged:
        print(f"{damaged} output(s) do not match their records")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", type=Path, default=None, help="an existing artifacts root (default: build one)")
    ap.add_argument("--mb", type=int, default=100, help="MB of text to build when no --artifacts (default 100)")
    ap.add_argument("--workers", type=int, default=2, help="workers of the build (default 2)")
    ap.add_argument("--filters", choices=["on", "off"], default="off",
                    help="the build's clean filters: off (default; every document reaches every stage) or on")
    args = ap.parse_args()
    from corpus_dagster.core.hashing import forget_hashes

    built = None
    artifacts = args.artifacts
    if artifacts is None:
        artifacts, built = build(args.mb, args.workers, args.filters == "on")
    artifacts = artifacts.resolve()
    forget_hashes()
    first = verify_all(artifacts)
    again = verify_all(artifacts)  # the memo answers files that did not change since they were hashed
    print(f"artifacts {artifacts}; cpu count {os.cpu_count()}; load {os.getloadavg()[0]:.1f}")
    if built is not None:
        text = json.loads((artifacts.parent / "_BUILT.json").read_text())["text_mb"]
        print(f"build: {text:.1f} MB of raw text through every stage driver in {built:.1f} s (wall)")
    print_table(first, again)


if __name__ == "__main__":
    main()
