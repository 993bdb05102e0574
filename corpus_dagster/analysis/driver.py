"""All the graph's reading and writing of the corpus analysis: its inputs, its stage key, its record and
the independent checks of its outputs.

The analysis itself (resumable steps over any folder of Parquet files) is `runner.run_analysis`; this
module runs it as the graph's stage: over the clean (pre-dedup) documents and the published shards,
cached under a key of their content and the `analysis` settings, recorded in `stages/analysis/`.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from corpus_dagster.analysis.inputs import CorpusFiles, corpus_from_dir, corpus_from_sources
from corpus_dagster.analysis.outputs import CODE_VERSION, GROUPS_FILE, cluster_file, duplicates_dir_name, tag
from corpus_dagster.analysis.runner import INTERNAL, run_analysis
from corpus_dagster.clean.outputs import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import AnalysisError, CorpusError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.dedup.outputs import dedup_record, near_graph
from corpus_dagster.lib.near_graph import GraphSpec
from corpus_dagster.minhash.outputs import signature_file
from corpus_dagster.publish.outputs import read_manifest, verified_shards
from corpus_dagster.tokenize.outputs import token_counts_file

STAGE = "analysis"
ANALYSIS = Stage(STAGE, CODE_VERSION)


def _graph_inputs(layout: Layout, source_ids: list[str]) -> tuple[CorpusFiles, CorpusFiles, list[Path], list[Path], dict[str, Any]]:
    """(clean documents, published shards, signature files, token counts, key inputs) of the graph's analysis."""

    documents = corpus_from_sources({sid: clean_doc_files(layout, sid) for sid in sorted(source_ids)},
                                    root=layout.stage("clean"))
    verified_shards(layout)  # the shards corpus_from_dir reads, checked against the publish record
    lengths = corpus_from_dir(layout.shards)
    signatures = []
    for sid in sorted(source_ids):
        try:
            signatures.append(signature_file(layout, sid))
        except CorpusError:
            pass  # no signatures yet for this source: the analysis computes its own
    try:
        counts = [token_counts_file(layout)]
    except CorpusError:
        counts = []
    inputs = {
        "clean": [[sid, clean_record(layout, sid).key] for sid in sorted(source_ids)],
        "shards": [[e["name"], e["sha256"]] for e in read_manifest(layout)["shards"]],
        "token_counts": [sha256_file(p) for p in counts if p.exists()],
    }
    return documents, lengths, signatures, [p for p in counts if p.exists()], inputs


def _shared_graph(layout: Layout, settings: Settings, source_ids: list[str],
                  log: Log | None) -> tuple[Path, GraphSpec] | None:
    """Dedup's near-duplicate graph when it serves this analysis: over exactly these sources, at or below
    the pair threshold, with the same shingles. Otherwise None, and the analysis computes its own (said in
    the log: it costs a second pass over the candidates)."""
    try:
        path, spec, covered = near_graph(layout, settings)
    except CorpusError:
        return None
    why = None
    if sorted(covered) != sorted(source_ids):
        why = f"it covers the sources {sorted(covered)}, the analysis {sorted(source_ids)}"
    elif spec.threshold > settings.analysis.pair_threshold:
        why = f"it keeps pairs from Jaccard {spec.threshold}, above analysis.pair_threshold"
    elif spec.shingle_size != settings.near_dup.shingle_size:
        why = f"its shingles are {spec.shingle_size} words, the config's {settings.near_dup.shingle_size}"
    if why is not None:
        if log:
            log(f"analysis: computes its own near-duplicate pairs: dedup's graph does not serve it ({why})")
        return None
    return path, spec


@records.locked(lambda a: "analysis")
def run_analysis_stage(layout: Layout, settings: Settings, source_ids: list[str],
                       log: Log | None = None) -> dict[str, Any]:
    """Analyse the clean (pre-dedup) documents of `source_ids` and the published shards into analysis/<ds>/<ver>/.

    Cached under a key of the clean keys, the shard hashes, the token counts and the `analysis` settings.
    """

    documents, lengths, signatures, counts, inputs = _graph_inputs(layout, source_ids)
    graph = _shared_graph(layout, settings, source_ids, log)
    if graph is not None:
        inputs["graph"] = dedup_record(layout).key
    out = layout.analysis
    folder = layout.stage(STAGE)
    ran: list[str] = []

    def compute(_key: str) -> Outputs:
        result = run_analysis(documents, out, settings.analysis, near=settings.near_dup, graph=graph,
                              length_documents=lengths, signature_files=signatures, token_counts=counts,
                              workers=settings.workers, log=log)
        ran.extend(result.get("ran", []))
        names = sorted(str(p.relative_to(out)) for p in out.rglob("*")
                       if p.is_file() and p.relative_to(out).parts[0] not in INTERNAL)
        stats = {k: result[k] for k in ("steps", "report_path", "figures", "outputs") if k in result}
        stats = json.loads(json.dumps(stats, default=str))
        return Outputs(names, {"analysis": names}, {**stats, "sources": sorted(source_ids)})

    run = run_cached(folder, ANALYSIS, inputs, output_settings(settings.resolved, STAGE), compute,
                     output_dir=os.path.relpath(out, folder))
    return run.summary() if run.cached else {**run.summary(), "ran": ran}


def analysis_record(layout: Layout) -> Any:
    """The record of the last analysis (UpstreamMissing when it never ran)."""

    return records.require_record(layout.stage(STAGE), "corpus_analysis")


def _verify_module(name: str) -> Any:
    """A module of the independent verification scripts (top-level verify/, shipped in the wheel as
    corpus_dagster.verify): they share no code with the pipeline."""
    try:
        return importlib.import_module(f"corpus_dagster.verify.{name}")
    except ImportError as exc:
        raise AnalysisError(f"the independent verification scripts (verify/{name}.py) are not importable: {exc}") from exc


def verify_analysis(layout: Layout, settings: Settings, which: str) -> Any:
    """Run one independent verification of the last analysis: `clusters`, `exact_groups` or `duplicates_sample`.

    The samples (clusters recomputed within `verify_cluster_bytes`, records re-scored) are seeded by
    `verify_seed` and the analysis key, so each new build checks others."""

    record = analysis_record(layout)
    files = [p for sid in record.stats["sources"] for p in clean_doc_files(layout, sid)]
    cfg = settings.analysis
    out = layout.analysis
    seed = f"{cfg.verify_seed}:{record.key}"  # each new build draws other samples
    reports = []
    if which == "clusters":
        mod = _verify_module("cluster_jaccard")
        thresholds = cfg.cluster_thresholds
        results = mod.check_cluster_files(files, [(out / cluster_file(t), t) for t in thresholds],
                                          max_pairs=cfg.verify_cluster_pairs, seed=seed,
                                          max_bytes=cfg.verify_cluster_bytes)
        reports += [(f"t{tag(t)[1:]}", r) for t, r in zip(thresholds, results, strict=True)]
    elif which == "exact_groups":
        reports.append(("exact", _verify_module("exact_groups").check_exact_groups(files, out / GROUPS_FILE)))
    elif which == "duplicates_sample":
        mod = _verify_module("rescore_sample")
        reports.append(("sample", mod.check_duplicates_sample(files, out / duplicates_dir_name(cfg), cfg.pair_threshold,
                                                               cfg.verify_sample, seed)))
    else:
        raise AnalysisError(f"unknown verification {which!r}")
    report = CheckReport()
    for name, r in reports:
        for failure in r.get("failures", []):
            report.fail(f"{name}: {failure}")
        report.metadata.update({f"{name}_{k}": v for k, v in r.items() if isinstance(v, int | float | str) and k != "passed"})
    return report
