"""clean_documents[source_id] and rejects[source_id]: repaired, filtered documents and every drop explained."""

import dagster as dg

from corpus_dagster.clean import driver
from corpus_dagster.defs.common import corpus_failure, md_table, source_for_partition
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig

EXAMPLES_PER_REASON = 3


def _spec(key: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key,
        deps=["raw_documents"],
        partitions_def=source_partitions,
        group_name="clean",
        kinds={"parquet"},
        description=description,
        code_version=driver.CODE_VERSION,
        automation_condition=dg.AutomationCondition.eager(),
    )


@dg.multi_asset(
    specs=[
        _spec("clean_documents", "Documents of one source with ids, repaired and NFC, that passed every filter."),
        _spec("rejects", "Every document a clean filter dropped: id, url, reason code, measured value, text."),
    ],
    can_subset=False,
)
def clean_documents(context: dg.AssetExecutionContext, corpus: CorpusConfig):
    """Assign ids, repair, detect language and filter one source; rejects keep what was dropped."""
    with corpus_failure(f"clean_documents[{context.partition_key}]"):
        resolved, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        stats = driver.run_clean_source(layout, source.source_id, resolved, log=context.log)
        examples = driver.reject_examples(layout, source.source_id, EXAMPLES_PER_REASON)
    version = dg.DataVersion(stats["key"])
    yield dg.MaterializeResult(
        asset_key="clean_documents",
        data_version=version,
        metadata={
            "documents_in": stats["docs_in"],
            "kept": stats["kept"],
            "bytes_in": stats["bytes_in"],
            "repairs": md_table(["repair", "documents"], [[k, v] for k, v in stats["repairs"].items()]),
            "parts": stats["parts"],
            "cached": stats["cached"],
            "stage_key": stats["key"],
            "seconds": stats["seconds"],
            "path": dg.MetadataValue.path(str(layout.stage(driver.STAGE, source.source_id))),
        },
    )
    yield dg.MaterializeResult(
        asset_key="rejects",
        data_version=version,
        metadata={
            "rejected": stats["rejected"],
            "by_reason": md_table(["reason", "documents"], [[k, v] for k, v in stats["reasons"].items()]),
            "examples": md_table(["id", "reason", "value"], examples),
        },
    )
