"""minhash_signatures[source_id] (cached per source) and the global dedup + decontamination step (data.04)."""

import dagster as dg

from corpus_dagster.defs.common import ledger_source_ids, md_table, source_for_partition, upstream_required
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.stages.dedup import run_global_dedup, run_signatures


@dg.asset(
    deps=["clean_documents"],
    partitions_def=source_partitions,
    group_name="dedup",
    kinds={"parquet", "numpy"},
    automation_condition=dg.AutomationCondition.eager(),
)
def minhash_signatures(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """MinHash signatures of one source's clean documents; adding a source hashes only that source."""
    resolved, layout = corpus.load()
    source = source_for_partition(layout, context.partition_key)
    stats = run_signatures(layout, source.source_id, resolved)
    if stats["no_signature"]:
        context.log.info(
            f"{stats['no_signature']} document(s) have fewer words than shingle_size: no signature, "
            "only exact dedup can catch them"
        )
    return dg.MaterializeResult(
        metadata={
            "signatures": stats["docs"] - stats["no_signature"],
            "no_signature": dg.MetadataValue.int(stats["no_signature"]),
            "documents": stats["docs"],
            "cached": stats["cached"],
            "seconds": stats.get("seconds", 0.0),
        }
    )


@dg.asset(
    deps=["clean_documents", "minhash_signatures"],
    group_name="dedup",
    kinds={"parquet", "scipy"},
    automation_condition=dg.AutomationCondition.eager(),
)
def dedup(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Decontaminate, exact-dedup and near-dedup (verified Jaccard) across every source."""
    resolved, layout = corpus.load()
    with upstream_required("every source partition"):
        stats = run_global_dedup(layout, resolved, ledger_source_ids(layout))
    largest = [[c["cluster_min_id"], c["size"]] for c in stats.get("largest_clusters", [])]
    pairs = [[p["id_a"], p["id_b"], p["jaccard"]] for p in stats.get("example_pairs", [])]
    return dg.MaterializeResult(
        metadata={
            "exact_dropped": stats["exact_dropped"],
            "near_dropped": stats["near_dropped"],
            "decontaminated": stats["decontaminated"],
            "no_signature": stats.get("no_signature", 0),
            "clusters": stats.get("n_clusters", 0),
            "largest_clusters": md_table(["cluster_min_id", "size"], largest),
            "example_pairs": md_table(["id_a", "id_b", "jaccard"], pairs),
            "seconds": dg.MetadataValue.json(stats.get("seconds", {})),
            "path": dg.MetadataValue.path(str(layout.stage("dedup"))),
        }
    )
