"""minhash_signatures[source_id] (cached per source) and the global dedup + decontamination step (data.04)."""

import dagster as dg

from corpus_dagster.dedup import driver
from corpus_dagster.defs.common import corpus_failure, materialized_sources, md_table, source_for_partition
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig


@dg.asset(
    deps=["clean_documents"],
    partitions_def=source_partitions,
    group_name="dedup",
    kinds={"parquet", "numpy"},
    code_version=driver.SIGNATURES_CODE_VERSION,
    automation_condition=dg.AutomationCondition.eager(),
)
def minhash_signatures(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """MinHash signatures of one source's clean documents; adding a source hashes only that source."""
    with corpus_failure(f"minhash_signatures[{context.partition_key}]"):
        resolved, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        stats = driver.run_signatures(layout, source.source_id, resolved)
    if stats["no_signature"]:
        context.log.info(
            f"{stats['no_signature']} document(s) have fewer words than shingle_size: no signature, "
            "only exact dedup can catch them"
        )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(stats["key"]),
        metadata={
            "signatures": stats["docs"] - stats["no_signature"],
            "no_signature": dg.MetadataValue.int(stats["no_signature"]),
            "documents": stats["docs"],
            "cached": stats["cached"],
            "stage_key": stats["key"],
            "seconds": stats.get("seconds", 0.0),
        },
    )


@dg.asset(
    deps=["clean_documents", "minhash_signatures"],
    group_name="dedup",
    kinds={"parquet", "scipy"},
    code_version=driver.DEDUP_CODE_VERSION,
    automation_condition=dg.AutomationCondition.eager(),
)
def dedup(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Decontaminate, exact-dedup and near-dedup (verified Jaccard) across every materialized source."""
    sources, waiting = materialized_sources(context, "minhash_signatures")
    if not sources:
        raise dg.Failure(
            "dedup: no source partition has materialized minhash_signatures yet "
            f"(waiting: {', '.join(waiting) or 'none; the ledger sensor adds partitions'}); materialize the sources first"
        )
    with corpus_failure("dedup"):
        resolved, layout = corpus.load()
        stats = driver.run_global_dedup(layout, resolved, sources)
    largest = [[c["cluster_min_id"], c["size"]] for c in stats.get("largest_clusters", [])]
    pairs = [[p["id_a"], p["id_b"], p["jaccard"]] for p in stats.get("example_pairs", [])]
    return dg.MaterializeResult(
        data_version=dg.DataVersion(stats["key"]),
        metadata={
            "sources": len(sources),
            "sources_waiting": ", ".join(waiting) or "none",
            "exact_dropped": stats["exact_dropped"],
            "near_dropped": stats["near_dropped"],
            "decontaminated": stats["decontaminated"],
            "no_signature": stats.get("no_signature", 0),
            "clusters": stats.get("n_clusters", 0),
            "largest_clusters": md_table(["cluster_min_id", "size"], largest),
            "example_pairs": md_table(["id_a", "id_b", "jaccard"], pairs),
            "cached": stats["cached"],
            "stage_key": stats["key"],
            "seconds": dg.MetadataValue.json(stats.get("seconds", {})),
            "path": dg.MetadataValue.path(str(layout.stage(driver.DEDUP))),
        },
    )
