"""Corpus analysis: token lengths per tokenizer, exact and near-duplicate views, complete-linkage
clusters, figures and a report. Pure logic modules, one module per step beside them (`steps/`), the
resumable step runner (`runner`) and the graph's driver (`driver`).

Entry points for the command line and other callers:
- run_analysis(documents, out_dir, cfg, ...): run the resumable steps, return stats (`runner`);
- plan_analysis(documents, cfg, ...): the dry-run cost estimate per step (`runner`);
- corpus_from_dir(folder) / corpus_from_sources({source_id: files}): describe the input corpus (`inputs`).
The Dagster layer runs the stage through `driver.run_analysis_stage`.

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.analysis.inputs": "CorpusFiles corpus_from_dir corpus_from_sources",
    "corpus_dagster.analysis.runner": "plan_analysis run_analysis",
    "corpus_dagster.analysis.steps.registry": "STEPS",
    "corpus_dagster.core.errors": "AnalysisError",
})
