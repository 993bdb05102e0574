"""Command line: `python -m corpus_dagster.analysis --corpus-dir DIR --out-dir DIR [--dry-run] [--step NAME]`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.runner import plan_analysis, run_analysis
from corpus_dagster.analysis.steps.registry import STEPS
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import CorpusError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="corpus-analysis",
        description="Token lengths, duplicate tables, complete-linkage clusters, figures and a report for any "
        "folder of Parquet files with a text column (`text`, else `content`: shards or a release folder; --text-column names another). Resumable: a rerun skips finished steps.",
    )
    p.add_argument("--corpus-dir", required=True, type=Path, help="folder of *.parquet files (searched recursively)")
    p.add_argument("--text-column", default=None,
                   help="column holding the texts (default: `text`, else `content`, as in a release folder)")
    p.add_argument("--out-dir", required=True, type=Path, help="where the outputs and the resume state go")
    p.add_argument("--dry-run", action="store_true",
                   help="print the estimated time, disk and memory per step (with --step: of those steps only); run nothing")
    p.add_argument("--step", action="append", choices=STEPS, help="run this step (and unfinished earlier ones); repeatable")
    p.add_argument("--force", action="store_true", help="rerun the requested steps even when finished")
    p.add_argument("--config", type=Path,
                   help="corpus config (YAML/JSON); its `analysis` and `near_dup` sections are used")
    p.add_argument("--tokenizer", action="append", help="tokenizer name or tokenizer.json path (overrides the config); repeatable")
    p.add_argument("--workers", type=int, default=1, help="worker processes for scanning and shingling")
    return p


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def print_plan(plan: dict, steps: Sequence[str] | None = None) -> None:
    """The dry-run table: every step, or only `steps` (a `--step` asks what that step costs) with
    their total."""
    rows = [s for s in plan["steps"] if not steps or s["step"] in steps]
    print(f"corpus: {plan['docs']:,} documents, {_human(plan['text_bytes'])} of text")
    print(f"{'step':<12}{'est. time':>12}{'disk':>12}{'peak memory':>14}")
    for s in rows:
        print(f"{s['step']:<12}{s['seconds']:>10.1f} s{_human(s['disk_bytes']):>12}{_human(s['peak_rss_bytes']):>14}")
    seconds = round(sum(s["seconds"] for s in rows), 1)
    disk = sum(s["disk_bytes"] for s in rows)
    peak = max((s["peak_rss_bytes"] for s in rows), default=0)
    print(f"{'total':<12}{seconds:>10.1f} s{_human(disk):>12}{_human(peak):>14}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        overrides = {"analysis": {"tokenizers": args.tokenizer}} if args.tokenizer else None
        settings = load_settings(args.config, overrides)
        cfg, near = settings.analysis, settings.near_dup
        corpus = corpus_from_dir(args.corpus_dir, exclude=args.out_dir, text_column=args.text_column)
        if args.dry_run:
            print_plan(plan_analysis(corpus, cfg, near=near, workers=args.workers), args.step)
            return 0
        res = run_analysis(corpus, args.out_dir, cfg, near=near, steps=args.step, force=args.force,
                           workers=args.workers, log=lambda m: print(m, file=sys.stderr))
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"ran: {', '.join(res['ran']) or '-'}; skipped (finished): {', '.join(res['skipped']) or '-'}")
    if "report_path" in res:
        print(f"report: {res['report_path']}")
    return 0
