"""clean_documents[source_id] and rejects[source_id]: repaired, filtered documents and every drop explained."""


import dagster as dg
import pyarrow.parquet as pq

from corpus_dagster.clean.part import run_clean_source
from corpus_dagster.defs.common import md_table, source_for_partition
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.errors import CorpusError
from corpus_dagster.ingest.raw_parts import RawPartError
from corpus_dagster.store import stage_files

EXAMPLES_PER_REASON = 3


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "clean_documents",
            deps=["raw_documents"],
            partitions_def=source_partitions,
            group_name="clean",
            kinds={"parquet"},
            description="Documents of one source with ids, repaired and NFC, that passed every filter.",
            automation_condition=dg.AutomationCondition.eager(),
        ),
        dg.AssetSpec(
            "rejects",
            deps=["raw_documents"],
            partitions_def=source_partitions,
            group_name="clean",
            kinds={"parquet"},
            description="Every document a clean filter dropped: id, url, reason code, measured value, text.",
            automation_condition=dg.AutomationCondition.eager(),
        ),
    ],
    can_subset=False,
)
def clean_documents(context: dg.AssetExecutionContext, corpus: CorpusConfig):
    """Assign ids, repair, detect language and filter one source; rejects keep what was dropped."""
    resolved, layout = corpus.load()
    source = source_for_partition(layout, context.partition_key)
    try:
        stats = run_clean_source(layout, source.source_id, resolved, log=context.log)
    except (CorpusError, RawPartError) as exc:
        raise dg.Failure(description=str(exc)) from exc
    examples = []
    for path in stage_files(layout, "clean", source.source_id, "rejects"):
        table = pq.read_table(path, columns=["id", "reason", "value"])
        for row in table.to_pylist():
            if sum(1 for e in examples if e[1] == row["reason"]) < EXAMPLES_PER_REASON:
                examples.append([row["id"], row["reason"], row["value"]])
    yield dg.MaterializeResult(
        asset_key="clean_documents",
        metadata={
            "documents_in": stats["docs_in"],
            "kept": stats["kept"],
            "bytes_in": stats["bytes_in"],
            "repairs": md_table(["repair", "documents"], [[k, v] for k, v in stats["repairs"].items()]),
            "parts": stats["parts"],
            "seconds": stats["seconds"],
            "path": dg.MetadataValue.path(str(layout.stage("clean", source.source_id))),
        },
    )
    yield dg.MaterializeResult(
        asset_key="rejects",
        metadata={
            "rejected": stats["rejected"],
            "by_reason": md_table(["reason", "documents"], [[k, v] for k, v in stats["reasons"].items()]),
            "examples": md_table(["id", "reason", "value"], sorted(examples)),
        },
    )
