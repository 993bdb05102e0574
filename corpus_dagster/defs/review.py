"""review_sample: a seeded sample per source and rule (clean, dedup, PII, kept) as Parquet and one HTML page."""

import dagster as dg

from corpus_dagster.defs.common import corpus_failure, md_table, when_inputs_change
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.review import driver


@dg.asset(
    deps=["clean_documents", "rejects", "dedup", "scrubbed"],
    group_name="review",
    kinds={"parquet", "html"},
    code_version=driver.CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def review_sample(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Sample N documents per (source, rule) with the measured value and threshold beside each, to read what
    every curation rule drops or redacts; duplicates beside their kept partner, redactions in context."""
    with corpus_failure("review_sample"):
        settings, layout = corpus.load()
        stats = driver.run_review_stage(layout, settings, log=context.log.info)
    if stats.get("enabled") is False:
        return dg.MaterializeResult(data_version=dg.DataVersion("disabled"),
                                    metadata={"enabled": False, "note": "review.enabled is false: nothing built"})
    strata = [[g["source_id"], g["stratum"], g["reason"], g["sampled"], g["available"]] for g in stats["strata"]]
    return dg.MaterializeResult(
        data_version=dg.DataVersion(stats["key"]),
        metadata={
            "page": dg.MetadataValue.path(stats["paths"]["html"]),
            "sample": dg.MetadataValue.path(stats["paths"]["parquet"]),
            "rows": stats["rows"],
            "sources": len(stats["sources"]),
            "strata": md_table(["source", "stratum", "reason", "sampled", "available"], strata),
            "cached": stats["cached"],
            "stage_key": stats["key"],
            "seconds": stats.get("seconds", 0.0),
        },
    )


REVIEW_ASSETS = [review_sample]
