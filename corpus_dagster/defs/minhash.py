"""minhash_signatures[source_id]: one source's MinHash signatures, cached per source."""

import time

import dagster as dg

from corpus_dagster.defs.common import (
    corpus_failure,
    source_for_partition,
    step_seconds,
    table_metadata,
    when_inputs_change,
)
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.minhash import driver, outputs


@dg.asset(
    deps=["clean_documents"],
    partitions_def=source_partitions,
    group_name="dedup",
    kinds={"parquet", "numpy"},
    code_version=outputs.SIGNATURES_CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def minhash_signatures(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """MinHash signatures of one source's clean documents; adding a source hashes only that source."""
    with corpus_failure(f"minhash_signatures[{context.partition_key}]"):
        settings, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        start = time.monotonic()
        stats = driver.run_signatures(layout, settings, source.source_id, log=context.log.info)
        own = time.monotonic() - start
    if stats["no_signature"]:
        context.log.info(
            f"{stats['no_signature']} document(s) have fewer words than shingle_size: no signature, "
            "only exact dedup can catch them"
        )
    return dg.MaterializeResult(
        data_version=dg.DataVersion(stats["key"]),
        metadata={
            **table_metadata(stats["docs"]),
            "signatures": stats["docs"] - stats["no_signature"],
            "no_signature": dg.MetadataValue.int(stats["no_signature"]),
            "documents": stats["docs"],
            "cached": stats["cached"],
            "stage_key": stats["key"],
            **step_seconds(own, stats.get("seconds", 0.0), bool(stats["cached"])),
        },
    )
