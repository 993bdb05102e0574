"""raw_documents[source_id]: fetch one ledger source into zstd JSON Lines parts (data.01)."""

import dagster as dg

from corpus_dagster.defs.common import corpus_failure, md_table, source_for_partition
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.ingest import driver


@dg.asset(
    partitions_def=source_partitions,
    group_name="ingest",
    kinds={"jsonl", "zstd"},
    code_version=driver.CODE_VERSION,
)
def raw_documents(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Fetch one source (checksums verified and recorded) and stream it into raw parts."""
    with corpus_failure(f"raw_documents[{context.partition_key}]"):
        resolved, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        result = driver.fetch_source(source, layout, resolved["ingest"], log=context.log)
        key = driver.raw_parts(layout, source.source_id)[2].key
    folder = layout.raw_source(source.source_id) / result.date
    quarantined = sum(result.quarantined.values())
    if quarantined:
        context.log.warning(f"{quarantined} document(s) quarantined: {result.quarantined}; see {folder}/_QUARANTINE.jsonl")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(key),
        metadata={
            "files": result.files,
            "files_fetched": result.files_fetched,
            "files_skipped": result.files_skipped,
            "unchanged": result.unchanged,
            "documents": result.docs,
            "bytes_uncompressed": result.bytes_uncompressed,
            "parts": result.parts,
            "quarantined": quarantined,
            "quarantine_reasons": md_table(["reason", "documents"], [[k, v] for k, v in result.quarantined.items()]),
            "fetch_date": result.date,
            "stage_key": key,
            "path": dg.MetadataValue.path(str(folder)),
            "seconds": round(result.seconds, 3),
        },
    )
