"""Corpus analysis: token lengths per tokenizer, exact and near-duplicate views, complete-linkage
clusters, figures and a report. Pure logic modules, one module per step beside them (`steps/`), the
resumable step runner (`runner`) and the graph's driver (`driver`).

Entry points for the command line and other callers:
- run_analysis(documents, out_dir, cfg, ...): run the resumable steps, return stats (`runner`);
- plan_analysis(documents, cfg, ...): the dry-run cost estimate per step (`runner`);
- corpus_from_dir(folder) / corpus_from_sources({source_id: files}): describe the input corpus (`inputs`).
The Dagster layer runs the stage through `driver.run_analysis_stage`.
"""

from corpus_dagster.analysis.inputs import CorpusFiles, corpus_from_dir, corpus_from_sources
from corpus_dagster.analysis.runner import plan_analysis, run_analysis
from corpus_dagster.analysis.steps import STEPS
from corpus_dagster.core.errors import AnalysisError

__all__ = [
    "STEPS",
    "AnalysisError",
    "CorpusFiles",
    "corpus_from_dir",
    "corpus_from_sources",
    "plan_analysis",
    "run_analysis",
]
