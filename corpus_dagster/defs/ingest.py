"""raw_documents[source_id]: fetch one ledger source into zstd JSON Lines parts (data.01)."""


import dagster as dg

from corpus_dagster.defs.common import md_table, source_for_partition
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.errors import CorpusError
from corpus_dagster.ingest.fetch import fetch_source


@dg.asset(
    partitions_def=source_partitions,
    group_name="ingest",
    kinds={"jsonl", "zstd"},
    code_version="1",
)
def raw_documents(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Fetch one source (checksums verified and recorded) and stream it into raw parts."""
    resolved, layout = corpus.load()
    source = source_for_partition(layout, context.partition_key)
    try:
        result = fetch_source(source, layout, resolved["ingest"], log=context.log)
    except CorpusError as exc:
        raise dg.Failure(description=str(exc)) from exc
    folder = layout.raw_source(source.source_id) / result.date
    quarantined = sum(result.quarantined.values())
    if quarantined:
        context.log.warning(f"{quarantined} document(s) quarantined: {result.quarantined}; see {folder}/_QUARANTINE.jsonl")
    return dg.MaterializeResult(
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
            "path": dg.MetadataValue.path(str(folder)),
            "seconds": round(result.seconds, 3),
        }
    )
