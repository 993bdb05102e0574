"""The analysis steps in their run order, the function that runs each, and what each one writes.

Each step is one module beside the pure logic it drives (`analysis.exact`, `analysis.clusters`, ...): it
reads its inputs and the files earlier steps wrote, writes its outputs atomically and returns its stats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corpus_dagster.analysis.outputs import (
    DOC_COUNTS_FILE,
    FIGURES_DIR,
    GROUPS_FILE,
    HISTOGRAM_FILE,
    LENGTHS_FILE,
    NEAR_DUP_DIR,
    RATES_FILE,
    REPORT_FILE,
    VIEWS_FILE,
    cluster_file,
    duplicates_dir_name,
)
from corpus_dagster.analysis.steps.candidates import step_candidates
from corpus_dagster.analysis.steps.clusters import step_clusters
from corpus_dagster.analysis.steps.context import (
    BANDS_FILE,
    CANDIDATES_FILE,
    DOCS_TABLE,
    GRAPH_COUNTS_FILE,
    PAIRS_TABLE,
    REPS_FILE,
    StepContext,
)
from corpus_dagster.analysis.steps.duplicates import step_duplicates
from corpus_dagster.analysis.steps.exact import step_exact
from corpus_dagster.analysis.steps.figures import step_figures
from corpus_dagster.analysis.steps.jaccard import step_jaccard
from corpus_dagster.analysis.steps.lengths import step_lengths
from corpus_dagster.analysis.steps.report import step_report
from corpus_dagster.analysis.steps.scan import step_scan
from corpus_dagster.core.settings import AnalysisSettings

STEP_FUNCS: dict[str, Callable[[StepContext], dict[str, Any]]] = {
    "scan": step_scan,
    "exact": step_exact,
    "candidates": step_candidates,
    "jaccard": step_jaccard,
    "duplicates": step_duplicates,
    "clusters": step_clusters,
    "lengths": step_lengths,
    "figures": step_figures,
    "report": step_report,
}
STEPS = tuple(STEP_FUNCS)


def step_outputs(step: str, cfg: AnalysisSettings, graph: bool = False) -> list[str]:
    """Paths (relative to the out dir, files or folders) a finished step has written (`graph`: the pairs
    came from a near-duplicate graph, with their counts)."""
    return {
        "scan": [DOCS_TABLE, BANDS_FILE],
        "exact": [REPS_FILE, GROUPS_FILE],
        "candidates": [CANDIDATES_FILE] + ([GRAPH_COUNTS_FILE] if graph else []),
        "jaccard": [PAIRS_TABLE],
        "duplicates": [duplicates_dir_name(cfg)],
        "clusters": [cluster_file(t) for t in cfg.cluster_thresholds]
        + [f"{VIEWS_FILE}.parquet", f"{VIEWS_FILE}.json", RATES_FILE],
        "lengths": [DOC_COUNTS_FILE, HISTOGRAM_FILE, f"{LENGTHS_FILE}.parquet", f"{LENGTHS_FILE}.json"],
        "figures": [FIGURES_DIR],
        "report": [REPORT_FILE, NEAR_DUP_DIR],
    }[step]
