"""CPU and peak RSS of the near-duplicate work, for one checkout or two compared in the same run.

The near-duplicate work is what dedup and the corpus analysis spend on near duplicates together: MinHash
signatures, LSH candidates, shingle sets, exact Jaccard and clusters; not the analysis' token lengths,
figures or report. Measured in three parts on the bench corpus of bench/pipeline.py (every clean filter
off, so every document reaches them), each in a fresh interpreter, workers 1:

- `minhash`: `minhash.driver.run_signatures` for every source;
- `dedup`: `dedup.driver.run_global_dedup` over every source;
- `analysis`: `run_analysis(..., steps=["clusters"])` (scan, exact, candidates, jaccard, duplicates,
  clusters) over the clean documents with the signature files and, when the checkout's dedup keeps a
  near-duplicate graph that serves the analysis, that graph, as the graph's analysis stage reads it.

Ingest and clean run once (cached under bench/out/near-dup/) with the script's own checkout; every
measured run starts from a fresh artifacts root that hard-links them, so nothing is cached and the
two checkouts share no stage folder. A child imports the measured checkout's `corpus_dagster` (its
PYTHONPATH is that checkout; the table names the file it imported) and reports its CPU seconds (its own
and its pool workers', around the driver call), its peak RSS (VmHWM; the drivers reset it between their
steps, so the child reads it before each reset and keeps the maximum), and counts read from probes on
the shingle store: documents shingled into a store, pairs scored, and the CPU of building the store and
of scoring. Before the measured runs, each checkout runs the three parts once on four small sources, so
numba compiles and caches its kernels outside the measurement. The child imports what the part uses
before the clock starts, including the two imports that would otherwise happen inside it: numba (the
kernels module) and pandas, which pyarrow (>= 26) imports on its first array (0.3 to 0.4 s). numba's
own set-up on the first kernel call of a process (about 0.5 s) is counted: it is paid to run a kernel.

    .venv/bin/python bench/near_dup.py                              # this checkout, 160 MB, 2 runs
    .venv/bin/python bench/near_dup.py --compare /tmp/before        # before | after | ratio, alternating
    .venv/bin/python bench/near_dup.py --checkout /tmp/before --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out" / "near-dup"
PARTS = ("minhash", "dedup", "analysis")
PART_NAMES = {"minhash": "MinHash signatures", "dedup": "dedup (global)", "analysis": "analysis near steps"}
WARM_SOURCES = ["licenses", "man-de", "man-es", "man-fr"]  # small, with near duplicates: every kernel runs once
LINK_BYTES = 1 << 16  # files at least this large are hard-linked into a run's artifacts, smaller ones copied
CHILD_ENV = {"POLARS_MAX_THREADS": "1", "RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

# ------------------------------------------------------------------------------------------ child side


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _vm_hwm_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class Probes:
    """Counters around the checkout's shingle store and its peak-RSS resets, installed in the child only.

    The store is where both engines shingle documents for exact Jaccard (from its creation to `close`)
    and score pairs (`counts`, and `jaccard` which calls it): counting there measures what each engine
    does, whatever its stats report. The drivers reset VmHWM between their steps; the wrapper reads it
    first so the child's peak covers the whole part."""

    def __init__(self) -> None:
        self.shingled_docs = 0
        self.store_cpu = 0.0
        self.scored_pairs = 0
        self.score_cpu = 0.0
        self.peak_mb = 0.0
        self._scoring = 0

    def install(self) -> None:
        from corpus_dagster.core import memory
        from corpus_dagster.lib.jaccard import ShingleStore

        init, append, close = ShingleStore.__init__, ShingleStore.append, ShingleStore.close
        probes = self

        def init_(store: Any, *args: Any, **kwargs: Any) -> None:
            store._bench_started = time.process_time()
            init(store, *args, **kwargs)

        def append_(store: Any, nodes: Any, *args: Any, **kwargs: Any) -> None:
            probes.shingled_docs += len(nodes)
            append(store, nodes, *args, **kwargs)

        def close_(store: Any) -> None:
            started = getattr(store, "_bench_started", None)
            close(store)
            if started is not None:
                probes.store_cpu += time.process_time() - started
                store._bench_started = None

        ShingleStore.__init__, ShingleStore.append, ShingleStore.close = init_, append_, close_
        for name in ("counts", "jaccard"):
            setattr(ShingleStore, name, self._scorer(getattr(ShingleStore, name)))

        original = memory.reset_peak_rss

        def reset_peak_rss() -> bool:
            probes.peak_mb = max(probes.peak_mb, _vm_hwm_mb())
            return original()

        for name, module in list(sys.modules.items()):
            if name.startswith("corpus_dagster") and getattr(module, "reset_peak_rss", None) is original:
                module.reset_peak_rss = reset_peak_rss
        self._original_reset = original

    def _scorer(self, method: Any) -> Any:
        probes = self

        def scored(store: Any, a: Any, *args: Any, **kwargs: Any) -> Any:
            if probes._scoring:  # jaccard -> counts: counted once
                return method(store, a, *args, **kwargs)
            probes._scoring += 1
            started = time.process_time()
            try:
                return method(store, a, *args, **kwargs)
            finally:
                probes._scoring -= 1
                probes.score_cpu += time.process_time() - started
                probes.scored_pairs += len(a)

        return scored

    def check_installed(self) -> None:
        """Every loaded module that resets the peak goes through the wrapper (else the peak is short)."""
        for name, module in list(sys.modules.items()):
            if name.startswith("corpus_dagster") and getattr(module, "reset_peak_rss", None) is self._original_reset \
                    and name != "corpus_dagster.core.memory":
                raise RuntimeError(f"{name} imported reset_peak_rss after the probes were installed")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _analysis(layout: Any, settings: Any, sids: list[str], out: Path) -> tuple[Any, dict[str, Any]]:
    """The analysis' near-duplicate steps as the graph's analysis stage runs them: the clean documents,
    the signature files, and dedup's graph when the checkout has one that serves this analysis."""
    from corpus_dagster.analysis import driver as analysis_driver
    from corpus_dagster.analysis.inputs import corpus_from_sources
    from corpus_dagster.analysis.runner import run_analysis
    from corpus_dagster.clean.outputs import clean_doc_files
    from corpus_dagster.minhash.outputs import signature_file

    documents = corpus_from_sources({s: clean_doc_files(layout, s) for s in sids}, root=layout.stage("clean"))
    signatures = [signature_file(layout, s) for s in sids]
    shared_graph = getattr(analysis_driver, "_shared_graph", None)  # the stage's own rule (graph code only)
    graph = shared_graph(layout, settings, sids, _stderr) if shared_graph is not None else None
    extra = {"near": settings.near_dup, "graph": graph} if graph is not None else {}

    def run() -> dict[str, Any]:
        return run_analysis(documents, out, settings.analysis, signature_files=signatures, steps=["clusters"],
                            workers=1, **extra)

    return run, {"graph": graph[1].as_dict() if graph is not None else None}


def _import_lazy_modules() -> None:
    """Import, outside the measured call, the modules a part would otherwise import inside it on first use:
    the compiled kernels (numba), and pandas, which pyarrow imports on its first array when installed."""
    import importlib.util

    import pyarrow as pa

    import corpus_dagster.lib.kernels  # noqa: F401 - imports numba

    pa.array([0])
    if importlib.util.find_spec("pandas") is not None:
        import pandas  # noqa: F401


def child_part(checkout: str, config: str, part: str, sources: list[str]) -> None:
    """(fresh interpreter) One part for `sources` (default: every ledger source); its measurements as JSON."""
    sys.path.insert(0, checkout)
    import corpus_dagster
    import corpus_dagster.analysis.runner
    import corpus_dagster.dedup.corpus_dedup
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.core.parallel import shutdown_pools
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.dedup import driver as dedup
    from corpus_dagster.minhash import driver as minhash

    _import_lazy_modules()
    resolved = load_config(config)
    settings = Settings.from_resolved(resolved)
    layout = Layout.from_config(resolved)
    sids = sorted(sources or [s.source_id for s in load_ledger(layout.ledger)])
    extra: dict[str, Any] = {}
    if part == "minhash":
        def run() -> Any:
            return [minhash.run_signatures(layout, settings, s) for s in sids]
    elif part == "dedup":
        def run() -> Any:
            return dedup.run_global_dedup(layout, settings, sids)
    else:
        run, extra = _analysis(layout, settings, sids, Path(config).parent / "analysis-near")
    probes = Probes()
    probes.install()
    cpu0, wall0 = _cpu(), time.monotonic()
    outcome = run()
    shutdown_pools()  # pool processes are reaped here, so their CPU seconds count
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    probes.check_installed()
    probes.peak_mb = max(probes.peak_mb, _vm_hwm_mb())
    result = {"part": part, "module": corpus_dagster.__file__, "cpu": cpu, "wall": wall, "rss_mb": probes.peak_mb,
              "probe": {"shingled_docs": probes.shingled_docs, "store_cpu": probes.store_cpu,
                        "scored_pairs": probes.scored_pairs, "score_cpu": probes.score_cpu}, **extra}
    if part == "minhash":
        result["docs"] = sum(int(r.get("docs", r.get("rows", 0)) or 0) for r in outcome if isinstance(r, dict))
        result["cached"] = [bool(r.get("cached")) for r in outcome if isinstance(r, dict)]
    elif part == "dedup":
        keys = ("cached", "docs", "lsh_participants", "shingled_docs", "candidate_pairs", "scored_pairs",
                "verified_pairs", "pairs_rows", "near_dropped", "seconds", "graph", "settings", "blocks",
                "generated_pairs", "block_pairs", "scored_this_build")
        stats = {**outcome.stats, "cached": outcome.cached}
        result["stats"] = {k: stats[k] for k in keys if k in stats}
    else:
        result["steps"] = {k: outcome["steps"].get(k, {}) for k in ("scan", "candidates", "jaccard", "clusters")}
        result["seconds"] = outcome.get("seconds", {})
        result["ran"] = outcome.get("ran", [])
    print(json.dumps(result, default=str))


# ----------------------------------------------------------------------------------------- parent side


def run_part(checkout: Path, config: Path, part: str, sources: list[str] | None = None) -> dict[str, Any]:
    """One part in a fresh interpreter importing `checkout`'s corpus_dagster (checked by its file)."""
    env = dict(os.environ, PYTHONPATH=str(checkout), **CHILD_ENV)
    proc = subprocess.run([sys.executable, __file__, "_part", str(checkout), str(config), part, *(sources or [])],
                          capture_output=True, text=True, env=env, cwd=checkout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{part} in {checkout} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(result["module"]).resolve().is_relative_to(checkout.resolve()):
        raise RuntimeError(f"{part}: the child imported {result['module']}, not the code of {checkout}")
    return result


def prepared_root(mb: int, log: Any) -> Path:
    """The bench corpus through ingest and clean (every filter off), once: bench/out/near-dup/prepared-<mb>mb."""
    import pipeline

    base = pipeline.corpus_folder(mb, False)
    if not (base / "_READY.json").exists():
        subprocess.run([sys.executable, pipeline.__file__, "_corpus", str(mb), "0"], check=True)
    folder = OUT_DIR / f"prepared-{mb}mb"
    if (folder / "_READY").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    info = json.loads((base / "_READY.json").read_text())
    config = pipeline.write_config(folder, base, sorted(info), 1, False)
    for stage in ("ingest", "clean"):
        res = pipeline.run_child("_stage", str(config), stage)
        log(f"prepared {stage}: cpu {res['cpu']:.1f} s")
    (folder / "_READY").write_text("ingest and clean done\n")
    return folder


def fresh_run(prepared: Path, run_dir: Path) -> Path:
    """A new artifacts root holding the prepared ingest and clean outputs (large files hard-linked, the rest
    copied) and its config; returns the config."""
    import yaml

    def link_or_copy(src: str, dst: str) -> None:
        if os.path.getsize(src) >= LINK_BYTES:
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    shutil.copytree(prepared / "artifacts", run_dir / "artifacts", copy_function=link_or_copy)
    cfg = yaml.safe_load((prepared / "config.yaml").read_text())
    cfg["paths"]["artifacts"] = str(run_dir / "artifacts")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=True))
    return run_dir / "config.yaml"


def measure(checkout: Path, label: str, prepared: Path, run_dir: Path, sources: list[str] | None = None
            ) -> dict[str, Any]:
    """The three parts in order on a fresh root: {part: child result}."""
    config = fresh_run(prepared, run_dir)
    out = {part: run_part(checkout, config, part, sources) for part in PARTS}
    if out["dedup"]["stats"]["cached"] or any(out["minhash"].get("cached", [])):
        raise RuntimeError(f"{label}: a part was served from its cache; the run root was not fresh")
    return out


# ------------------------------------------------------------------------------------------- summaries


def counts(run: dict[str, Any]) -> dict[str, Any]:
    """Documents shingled and pairs scored by dedup and the analysis, from their stats and the probes."""
    stats = run["dedup"]["stats"]
    jaccard = run["analysis"]["steps"].get("jaccard", {})
    analysis_scored = 0 if jaccard.get("source") == "near-duplicate graph" else jaccard.get("candidate_pairs")
    return {
        "documents with signatures": run["minhash"]["docs"] or "n/a",
        "dedup: documents shingled (stats)": stats.get("shingled_docs", "n/a (not in its stats)"),
        "dedup: documents shingled (probe)": run["dedup"]["probe"]["shingled_docs"],
        "analysis: documents shingled (probe)": run["analysis"]["probe"]["shingled_docs"],
        "dedup: candidate pairs (stats)": stats.get("candidate_pairs"),
        "dedup: pairs scored (stats; candidate pairs without a count of its own)":
            stats.get("scored_pairs", stats.get("candidate_pairs")),
        "dedup: pairs scored (probe)": run["dedup"]["probe"]["scored_pairs"],
        "analysis: pairs scored (stats)": analysis_scored,
        "analysis: pairs scored (probe)": run["analysis"]["probe"]["scored_pairs"],
        "documents shingled, dedup + analysis (probes)":
            run["dedup"]["probe"]["shingled_docs"] + run["analysis"]["probe"]["shingled_docs"],
        "pairs scored, dedup + analysis (probes)":
            run["dedup"]["probe"]["scored_pairs"] + run["analysis"]["probe"]["scored_pairs"],
        "analysis: jaccard source": jaccard.get("source", "scored here"),
        "dedup: LSH banding (bands x rows)": _banding(stats),
        "analysis: LSH banding (bands x rows)": "{bands} x {rows}".format(**run["analysis"]["steps"]["candidates"]),
        "analysis: verified pairs >= pair threshold": jaccard.get("verified_pairs"),
    }


def _banding(stats: dict[str, Any]) -> str:
    s = stats.get("graph") or stats["settings"]
    rows = s.get("rows", int(s.get("num_perm", 0)) // max(int(s["bands"]), 1))
    return f"{s['bands']} x {rows}"


def where(run: dict[str, Any]) -> dict[str, str]:
    """Per part: the probes' CPU (store build, scoring) and the steps' wall seconds the stats record."""
    out = {}
    for part in ("dedup", "analysis"):
        r = run[part]
        seconds = r["stats"].get("seconds") if part == "dedup" else r.get("seconds")
        steps = ", ".join(f"{k} {v:.2f}" for k, v in (seconds or {}).items())
        out[part] = (f"store build {r['probe']['store_cpu']:.2f} s, scoring {r['probe']['score_cpu']:.2f} s CPU; "
                     f"steps (wall s): {steps}")
    return out


def part_cpu(runs: list[dict[str, Any]], part: str) -> list[float]:
    if part == "total":
        return [sum(r[p]["cpu"] for p in PARTS) for r in runs]
    return [r[part]["cpu"] for r in runs]


def part_rss(runs: list[dict[str, Any]], part: str) -> list[float]:
    if part == "total":
        return [max(r[p]["rss_mb"] for p in PARTS) for r in runs]
    return [r[part]["rss_mb"] for r in runs]


def print_checkout(label: str, checkout: Path, runs: list[dict[str, Any]]) -> None:
    print(f"\n### {label}: {checkout} (corpus_dagster from {runs[0]['minhash']['module']}), {len(runs)} run(s)\n")
    print("| part | CPU s per run | CPU s median | peak RSS MB median |")
    print("|---|---:|---:|---:|")
    for part in (*PARTS, "total"):
        cpu = part_cpu(runs, part)
        name = PART_NAMES.get(part, "total (peak RSS: the largest part)")
        print(f"| {name} | {', '.join(f'{c:.2f}' for c in cpu)} | {statistics.median(cpu):.2f} | "
              f"{statistics.median(part_rss(runs, part)):,.0f} |")
    print()
    table = counts(runs[-1])
    print("| count (last run) | |\n|---|---:|")
    for name, value in table.items():
        print(f"| {name} | {value:,} |" if isinstance(value, int) else f"| {name} | {value} |")
    print()
    for part, text in where(runs[-1]).items():
        print(f"- {part} (last run): {text}")


def print_compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    print("\n### before | after | ratio (medians)\n")
    print("| part | before CPU s | after CPU s | ratio | before peak RSS MB | after peak RSS MB | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for part in (*PARTS, "total"):
        cb, ca = statistics.median(part_cpu(before, part)), statistics.median(part_cpu(after, part))
        rb, ra = statistics.median(part_rss(before, part)), statistics.median(part_rss(after, part))
        name = PART_NAMES.get(part, "**total**")
        print(f"| {name} | {cb:.2f} | {ca:.2f} | {ca / cb:.2f}x | {rb:,.0f} | {ra:,.0f} | {ra / rb:.2f}x |")
    cb, ca = statistics.median(part_cpu(before, "total")), statistics.median(part_cpu(after, "total"))
    rb, ra = statistics.median(part_rss(before, "total")), statistics.median(part_rss(after, "total"))
    print(f"\nnear-duplicate CPU after / before: {ca / cb:.2f}x (target <= 0.6x: {'met' if ca <= 0.6 * cb else 'not met'}); "
          f"peak RSS after / before: {ra / rb:.2f}x (target <= 1: {'met' if ra <= rb else 'not met'})")
    print("\n| count (last run) | before | after |\n|---|---:|---:|")
    tb, ta = counts(before[-1]), counts(after[-1])
    for name in tb:
        print(f"| {name} | {_cell(tb[name])} | {_cell(ta[name])} |")


def _cell(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=160, help="bench corpus size (bench/pipeline.py's corpus)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--compare", type=Path, default=None, metavar="BEFORE_CHECKOUT",
                        help="also measure this checkout, alternating before, after, before, after")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(BENCH_DIR))

    log = _stderr
    prepared = prepared_root(args.mb, log)
    checkouts = {"before": args.compare.resolve(), "after": args.checkout.resolve()} if args.compare else \
        {"this": args.checkout.resolve()}
    for label, checkout in checkouts.items():
        measure(checkout, label, prepared, OUT_DIR / f"{args.mb}mb-{label}-warm", WARM_SOURCES)
        log(f"{label}: kernels compiled and cached (warm-up on {', '.join(WARM_SOURCES)})")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in checkouts}
    for i in range(args.repeats):
        for label, checkout in checkouts.items():
            run = measure(checkout, label, prepared, OUT_DIR / f"{args.mb}mb-{label}")
            runs[label].append(run)
            log(f"{label} run {i + 1}: " + ", ".join(f"{p} {run[p]['cpu']:.2f} s" for p in PARTS))
    print(f"## Near-duplicate work, bench corpus {args.mb} MB (every clean filter off), workers 1")
    for label, checkout in checkouts.items():
        print_checkout(label, checkout, runs[label])
    if args.compare:
        print_compare(runs["before"], runs["after"])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_part":
        child_part(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        main()
