"""Corpus analysis: token lengths per tokenizer, exact and near-duplicate views, complete-linkage
clusters, figures and a report. Pure logic modules, one module per step beside them (`steps/`), the
resumable step runner (`runner`) and the graph's driver (`driver`).

Entry points for the command line and other callers:
- run_analysis(documents, out_dir, cfg, ...): run the resumable steps, return stats (`runner`);
- plan_analysis(documents, cfg, ...): the dry-run cost estimate per step (`runner`);
- corpus_from_dir(folder) / corpus_from_sources({source_id: files}): describe the input corpus (`inputs`).
The Dagster layer runs the stage through `driver.run_analysis_stage`.

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "STEPS": "corpus_dagster.analysis.steps.registry",
    "AnalysisError": "corpus_dagster.core.errors",
    "CorpusFiles": "corpus_dagster.analysis.inputs",
    "corpus_from_dir": "corpus_dagster.analysis.inputs",
    "corpus_from_sources": "corpus_dagster.analysis.inputs",
    "plan_analysis": "corpus_dagster.analysis.runner",
    "run_analysis": "corpus_dagster.analysis.runner",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
