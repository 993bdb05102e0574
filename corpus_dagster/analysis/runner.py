"""The resumable run of the analysis steps, for the command line and for the graph's stage.

Steps run in a fixed order. Each step runs under `core.stage.run_cached` with its own stage record in
`_state/<step>/`, keyed by the run key and listing the step's outputs with their hashes; outputs are
written atomically and the record last. A rerun skips a step whose record has the current key and whose
outputs are intact (size and sha256); a step that died leaves no record, a step whose outputs were
damaged fails its cache check, and either runs again, as does every step after a step that ran.
Intermediate arrays live in `_work/` (kept so a rerun can resume).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from corpus_dagster.analysis import costs
from corpus_dagster.analysis.inputs import CorpusFiles, corpus_size, fingerprint, write_inputs
from corpus_dagster.analysis.outputs import CODE_VERSION, FIGURES_DIR, REPORT_FILE, tag
from corpus_dagster.analysis.steps.context import WORK_DIR, StepContext
from corpus_dagster.analysis.steps.registry import STEP_FUNCS, STEPS, step_outputs
from corpus_dagster.core import config, records
from corpus_dagster.core.atomic import remove_stale_temps
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.settings import AnalysisSettings, NearDupSettings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.lib.near_graph import GraphSpec, graph_spec

SECTION = "analysis"
# Settings that only change speed or memory, never an output byte: those the core config marks for the section.
EXECUTION_KEYS = tuple(k.split(".", 1)[1] for k in config.EXECUTION_KEYS if k.startswith(f"{SECTION}."))
STATE_DIR = "_state"  # one stage record per finished step
INTERNAL = (STATE_DIR, WORK_DIR)  # step records and intermediate arrays: not part of the published analysis


def check_cfg(cfg: AnalysisSettings, spec: GraphSpec) -> None:
    """Refuse settings whose outputs would contradict each other."""
    thresholds = cfg.cluster_thresholds
    if cfg.pair_threshold > min(thresholds) + 1e-12:
        raise AnalysisError(
            f"analysis.pair_threshold ({cfg.pair_threshold}) exceeds the smallest cluster threshold "
            f"({min(thresholds)}); lower it so every cluster pair is among the verified pairs"
        )
    if len({tag(t) for t in thresholds}) != len(thresholds):
        raise AnalysisError(f"analysis.cluster_thresholds: two thresholds share a file tag: {thresholds}")
    if spec.threshold > cfg.pair_threshold + 1e-12:
        raise AnalysisError(f"the near-duplicate graph keeps pairs from Jaccard {spec.threshold}, above "
                            f"analysis.pair_threshold ({cfg.pair_threshold}): lower near_dup.threshold")


def run_settings(cfg: AnalysisSettings, spec: GraphSpec) -> dict[str, Any]:
    """The settings the run key hashes: the output-deciding analysis settings and the graph's shape."""
    return {**{k: v for k, v in cfg.to_dict().items() if k not in EXECUTION_KEYS}, "graph": spec.as_dict()}


def analysis_spec(cfg: AnalysisSettings, near: NearDupSettings) -> GraphSpec:
    """The graph an analysis computes for itself (no graph handed over): threshold and banding for the
    smaller of near_dup.threshold and its pair_threshold."""
    return graph_spec(near, cfg.pair_threshold)


def run_key(inputs: dict[str, Any], cfg: AnalysisSettings, spec: GraphSpec) -> str:
    """The key of one analysis run: its input fingerprints, its settings and the code version."""
    blob = json.dumps({"code": CODE_VERSION, "cfg": run_settings(cfg, spec), "inputs": inputs}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _input_fingerprints(documents: CorpusFiles, lengths: CorpusFiles, signature_files: Sequence[Path],
                        token_counts: Sequence[Path], graph: Path | None) -> dict[str, Any]:
    def text(files: CorpusFiles) -> list[str]:  # named only when not `text`, so the graph's keys stay what they were
        return [] if files.text_column == "text" else [files.text_column]

    return {
        "documents": [fingerprint(documents.files), documents.source_ids, documents.default_source, *text(documents)],
        "lengths": [fingerprint(lengths.files), lengths.source_ids, lengths.default_source, *text(lengths)],
        "signatures": fingerprint(signature_files),
        "token_counts": fingerprint(token_counts),
        "graph": fingerprint([graph] if graph is not None else []),
    }


def _state(out: Path, step: str) -> Path:
    return out / STATE_DIR / step


def _recorded_stats(out: Path) -> Callable[[str], dict[str, dict[str, Any]]]:
    def before(step: str) -> dict[str, dict[str, Any]]:
        return {s: records.require_record(_state(out, s), f"analysis step {s}").stats for s in STEPS[: STEPS.index(step)]}
    return before


def _forget(out: Path, steps: Sequence[str]) -> None:
    """Drop the records of `steps`: they run again on the next run."""
    for step in steps:
        (_state(out, step) / records.RECORD).unlink(missing_ok=True)


def _written(out: Path, paths: Sequence[str]) -> list[str]:
    """The files of a step's outputs (a folder stands for every file in it), relative to the out dir."""
    names = []
    for rel in paths:
        path = out / rel
        if path.is_dir():
            names += sorted(p.relative_to(out).as_posix() for p in path.rglob("*") if p.is_file())
        else:
            names.append(rel)
    return names


def run_analysis(
    documents: CorpusFiles,
    out_dir: str | Path,
    cfg: AnalysisSettings,
    *,
    near: NearDupSettings | None = None,
    graph: tuple[Path, GraphSpec] | None = None,
    length_documents: CorpusFiles | None = None,
    signature_files: Sequence[Path] = (),
    token_counts: Sequence[Path] = (),
    steps: Sequence[str] | None = None,
    force: bool = False,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the analysis steps (all, or `steps` plus the unfinished steps before them); return stats.

    documents: the corpus measured for duplication; length_documents: the corpus measured for token
    lengths (default: the same); signature_files: the minhash stage's signature files of these documents,
    whose signatures and byte and word counts are reused instead of computed (with them, a `sha256` column
    of the documents is taken as the SHA-256 of each UTF-8 text, as the clean stage writes it); token_counts: token streams' token_counts.parquet files to reuse per tokenizer name.
    cfg is the `analysis` config section, near the `near_dup` one (None: its defaults); graph: the verified
    pairs file of a near-duplicate graph over exactly these documents and the graph's shape (dedup's
    pairs.parquet), read instead of computing candidates and their Jaccard. force reruns the requested
    steps even when finished.
    """
    near = near if near is not None else NearDupSettings()
    graph_path, spec = (Path(graph[0]), graph[1]) if graph is not None else (None, analysis_spec(cfg, near))
    check_cfg(cfg, spec)
    for unknown in set(steps or ()) - set(STEPS):
        raise AnalysisError(f"unknown step {unknown!r}; steps are {list(STEPS)}")
    lengths = length_documents or documents
    inputs = _input_fingerprints(documents, lengths, signature_files, token_counts, graph_path)
    out = Path(out_dir)
    ctx = StepContext(documents, lengths, out, cfg, [Path(p) for p in signature_files], [Path(p) for p in token_counts],
                      max(1, workers), run_key(inputs, cfg, spec), _recorded_stats(out), near, spec, graph_path)
    last = max((STEPS.index(s) for s in steps), default=len(STEPS) - 1) if steps else len(STEPS) - 1
    out.mkdir(parents=True, exist_ok=True)
    for folder in (out, ctx.work, out / STATE_DIR):
        remove_stale_temps(folder)
    write_inputs(out, ctx.key, documents, lengths, cfg, spec.shingle_size)
    result: dict[str, Any] = {
        "out_dir": str(out), "key": ctx.key, "ran": [], "skipped": [], "steps": {}, "seconds": {}, "peak_rss_mb": {}
    }
    settings = run_settings(cfg, spec)
    rerun_rest = False
    for step in STEPS[: last + 1]:
        if rerun_rest or (force and (steps is None or step in steps)):
            _forget(out, [step])

        def compute(_key: str, step: str = step) -> Outputs:
            _forget(out, STEPS[STEPS.index(step):])  # a step that dies leaves no record, nor do the steps after it
            if log:
                log(f"analysis: {step} ...")
            reset_peak_rss()
            t0 = time.monotonic()
            stats = STEP_FUNCS[step](ctx)
            result["seconds"][step] = seconds = round(time.monotonic() - t0, 3)
            result["peak_rss_mb"][step] = peak_rss_mb()
            if log:
                log(f"analysis: {step} done in {seconds:.1f} s")
            return Outputs(_written(out, step_outputs(step, cfg, graph_path is not None)), stats=stats)

        run = run_cached(_state(out, step), Stage(f"{SECTION}.{step}", CODE_VERSION), inputs, settings, compute,
                         key=ctx.key, output_dir="../..", prune=False)
        result["skipped" if run.cached else "ran"].append(step)
        result["steps"][step] = run.stats
        rerun_rest = rerun_rest or not run.cached
    result["outputs"] = {s: step_outputs(s, cfg, graph_path is not None) for s in STEPS[: last + 1]}
    if (out / REPORT_FILE).is_file() and last == len(STEPS) - 1:
        result["report_path"] = str(out / REPORT_FILE)
        result["report_markdown"] = (out / REPORT_FILE).read_text(encoding="utf-8")
        result["figures"] = sorted(str(p) for p in (out / FIGURES_DIR).glob("*.png"))
    return result


def plan_analysis(
    documents: CorpusFiles,
    cfg: AnalysisSettings,
    *,
    near: NearDupSettings | None = None,
    length_documents: CorpusFiles | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Dry run: per step, estimated seconds, disk and peak memory from metadata counts (nothing is read
    but Parquet footers)."""
    check_cfg(cfg, analysis_spec(cfg, near if near is not None else NearDupSettings()))
    docs, text_bytes = corpus_size(documents)
    l_docs, l_bytes = corpus_size(length_documents) if length_documents else (docs, text_bytes)
    steps = []
    for step in STEPS:
        d, b = (l_docs, l_bytes) if step == "lengths" else (docs, text_bytes)
        steps.append({"step": step, **costs.estimate(step, d, b, len(cfg.tokenizers), workers)})
    return {
        "docs": docs,
        "text_bytes": text_bytes,
        "length_docs": l_docs,
        "length_text_bytes": l_bytes,
        "steps": steps,
        "total_seconds": round(sum(s["seconds"] for s in steps), 1),
        "total_disk_bytes": sum(s["disk_bytes"] for s in steps),
        "peak_rss_bytes": max(s["peak_rss_bytes"] for s in steps),
    }


def clear_work(out_dir: str | Path) -> None:
    """Delete the intermediate `_work/` and `_state/` folders (the next run starts from scratch)."""
    for name in INTERNAL:
        shutil.rmtree(Path(out_dir) / name, ignore_errors=True)
