"""corpus_analysis: token lengths, two views of duplication, clusters, figures and a report, verified independently."""

import dagster as dg

from corpus_dagster.analysis import driver
from corpus_dagster.defs.common import (
    check_result,
    corpus_failure,
    figures_markdown,
    materialized_sources,
    table,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig


@dg.asset(
    deps=["clean_documents", "minhash_signatures", "shards", "token_streams"],
    group_name="analysis",
    kinds={"parquet", "matplotlib"},
    code_version=driver.CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def corpus_analysis(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Measure the clean (pre-dedup) documents and the published shards: lengths per tokenizer, duplicates, clusters."""
    with corpus_failure("corpus_analysis"):
        resolved, layout = corpus.load()
    sources, waiting = materialized_sources(context, "clean_documents", layout)
    with corpus_failure("corpus_analysis"):
        stats = driver.run_analysis_stage(layout, resolved, sources, log=context.log.info)
    report = layout.analysis / "REPORT.md"
    overall = stats.get("steps", {}).get("clusters", {}).get("overall", {})
    views = [[view, v.get("affected_pct"), v.get("removable_pct")] for view, v in overall.items()]
    figures = [str(layout.analysis / f) for f in stats.get("figures", []) if str(f).endswith(".png")]
    metadata = {
        "sources": len(sources),
        "sources_waiting": ", ".join(waiting) or "none",
        "documents": stats.get("steps", {}).get("scan", {}).get("docs", 0),
        "views": table(["view", "affected %", "removable % (lower bound)"], views),
        "cached": stats["cached"],
        "stage_key": stats["key"],
        "report": dg.MetadataValue.path(str(report)),
        "path": dg.MetadataValue.path(str(layout.analysis)),
    }
    if report.exists():
        metadata["report_preview"] = dg.MetadataValue.md(report.read_text(encoding="utf-8").split("![")[0][:6000])
    if figures:
        metadata["figures"] = figures_markdown(figures)
    return dg.MaterializeResult(data_version=dg.DataVersion(stats["key"]), metadata=metadata)


def _verify(corpus: CorpusConfig, which: str) -> dg.AssetCheckResult:
    with corpus_failure(f"analysis check {which}"):
        resolved, layout = corpus.load()
        return check_result(driver.verify_analysis(layout, resolved, which))


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="Clusters' min Jaccard recomputed from the texts by verify/ (a seeded sample per build) >= the threshold.")
def clusters_complete_linkage(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "clusters")


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="Exact duplicate groups recounted by hashing the corpus directly (verify/).")
def exact_groups_recounted(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "exact_groups")


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="A seeded sample of doc_duplicates records re-scored by exact Jaccard (verify/).")
def duplicates_sample_rescored(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "duplicates_sample")


ANALYSIS_ASSETS = [corpus_analysis]
ANALYSIS_CHECKS = [clusters_complete_linkage, exact_groups_recounted, duplicates_sample_rescored]
