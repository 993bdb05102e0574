"""Corpus analysis: token lengths per tokenizer, exact and near-duplicate views, complete-linkage
clusters, figures and a report. Pure logic modules plus one driver (all reading and writing).

Entry points for the Dagster layer and the command line (all in `driver`):
- run_analysis(documents, out_dir, cfg, ...): run the resumable steps, return stats;
- plan_analysis(documents, cfg, ...): the dry-run cost estimate per step;
- corpus_from_dir(folder) / corpus_from_sources({source_id: files}): describe the input corpus.
"""

from corpus_dagster.analysis.driver import (
    STEPS,
    CorpusFiles,
    corpus_from_dir,
    corpus_from_sources,
    plan_analysis,
    run_analysis,
)
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
