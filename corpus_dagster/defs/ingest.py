"""raw_documents[source_id]: fetch one ledger source into zstd JSON Lines parts (data.01)."""

import datetime as dt

import dagster as dg

from corpus_dagster.defs.common import (
    corpus_failure,
    size,
    source_for_partition,
    table,
    table_metadata,
    timing,
)
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
    """Fetch one source (checksums verified and recorded) and stream it into raw parts.

    A refetch of unchanged bytes records a materialization with the same data version, so nothing downstream
    is requested by automation.
    """
    with corpus_failure(f"raw_documents[{context.partition_key}]"):
        settings, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        result = driver.run_fetch(layout, settings, source, log=context.log.info)
    folder = layout.raw_source(source.source_id) / result.date
    quarantined = sum(result.quarantined.values())
    if quarantined:
        context.log.warning(f"{quarantined} document(s) quarantined: {result.quarantined}; see {folder}/_QUARANTINE.jsonl")
    context.log.info(
        f"{source.source_id}: {result.files} file(s) ({result.files_fetched} fetched, {result.files_skipped} unchanged), "
        f"{result.docs} documents, {size(result.bytes_uncompressed)} in {result.seconds:.1f} s"
        + (" - unchanged, nothing downstream rebuilds" if result.unchanged else "")
    )
    try:
        fetched_at = dg.MetadataValue.timestamp(dt.datetime.fromisoformat(result.date).replace(tzinfo=dt.UTC))
    except ValueError:
        fetched_at = dg.MetadataValue.text(result.date)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(result.key),
        metadata={
            **table_metadata(result.docs),
            "counts": table(["what", "count"], [
                ["files", result.files], ["files fetched", result.files_fetched], ["files unchanged (skipped)", result.files_skipped],
                ["documents", result.docs], ["parts", result.parts], ["quarantined", quarantined],
                ["excluded by where", result.excluded_by_where],
            ]),
            "documents": dg.MetadataValue.int(result.docs),
            "bytes_uncompressed": dg.MetadataValue.int(result.bytes_uncompressed),
            "size_uncompressed": size(result.bytes_uncompressed),
            "files": result.files,
            "files_fetched": result.files_fetched,
            "files_skipped": result.files_skipped,
            "unchanged": result.unchanged,
            "parts": result.parts,
            "quarantined": quarantined,
            "quarantine_reasons": table(["reason", "documents"], [[k, v] for k, v in result.quarantined.items()]),
            "fetch_date": fetched_at,
            "stage_key": result.key,
            "path": dg.MetadataValue.path(str(folder)),
            "seconds": timing(result.seconds),
        },
    )
