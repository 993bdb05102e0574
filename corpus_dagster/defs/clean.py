"""clean_documents[source_id] and rejects[source_id]: repaired, filtered documents and every drop explained."""

import time

import dagster as dg

from corpus_dagster.clean import driver, outputs
from corpus_dagster.core.settings import CleanSettings
from corpus_dagster.defs.charts import charts_markdown, stacked_bars
from corpus_dagster.defs.common import (
    PREVIEW_ROWS,
    corpus_failure,
    measured,
    preview_text,
    source_for_partition,
    step_seconds,
    table,
    table_metadata,
    when_inputs_change,
)
from corpus_dagster.defs.explain_link import explain_link, location_of
from corpus_dagster.defs.partitions import source_partitions
from corpus_dagster.defs.resources import CorpusConfig


def _spec(key: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key,
        deps=["raw_documents"],
        partitions_def=source_partitions,
        group_name="clean",
        kinds={"parquet"},
        description=description,
        code_version=driver.CODE_VERSION,
        automation_condition=when_inputs_change(),
    )


def corpus_table(rows: list[dict]) -> dg.MetadataValue:
    """Kept and rejected per cleaned source and in all, with each source's top reasons (a table of the
    corpus so far: a rule that drops what the build exists for shows at a glance)."""
    total = ["all sources", sum(r["docs_in"] for r in rows), sum(r["kept"] for r in rows),
             sum(r["rejected"] for r in rows), ""]
    body = [[r["source_id"], r["docs_in"], r["kept"], r["rejected"],
             ", ".join(f"{k} {v:,}" for k, v in list(r["reasons"].items())[:3])] for r in rows]
    return table(["source", "documents in", "kept", "rejected", "top reject reasons"], [total, *body])


def kept_preview(layout, source_id: str, rows: int = PREVIEW_ROWS) -> dg.MetadataValue:
    """The first kept documents of a source: id, language, length and the start of the text (its length at the
    end when cut), narrow enough to read without a sideways scroll."""
    return table(["id", "lang", "n_chars", "preview"],
                 [[r["id"], r["lang"], r["n_chars"], preview_text(r["text"])]
                  for r in outputs.kept_head(layout, source_id, rows)],
                 {"preview": "the start of the text; a cut text ends in its length"})


def explain_first(files: list, location: str) -> dict[str, dg.MetadataValue]:
    """`explain`: a link that explains the first document of these files in one click (none when empty)."""
    doc_id = outputs.first_id(files)
    return {"explain": explain_link(doc_id, location)} if doc_id is not None else {}


def rejected_preview(layout, source_id: str, clean_cfg: CleanSettings,
                     reasons: dict[str, int] | None = None) -> dg.MetadataValue:
    """A few rejected documents per reason (outputs.reject_examples), with the measured value and the threshold."""
    rows = [[r["id"], r["reason"], measured(r["value"]), outputs.threshold_text(r["reason"], clean_cfg),
             preview_text(r["text"])] for r in outputs.reject_examples(layout, source_id, reasons)]
    return table(["id", "reason", "value", "threshold", "preview"], sorted(rows, key=lambda r: (r[1], r[0])),
                 {"value": "what the rule measured", "threshold": "the configured limit it broke",
                  "preview": "the start of the text; a cut text ends in its length"})


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
        settings, layout = corpus.load()
        source = source_for_partition(layout, context.partition_key)
        sid = source.source_id
        start = time.monotonic()
        stats = driver.run_clean_source(layout, settings, sid, log=context.log.info)
        own = time.monotonic() - start
        kept = kept_preview(layout, sid)
        rejected = rejected_preview(layout, sid, settings.clean, stats["reasons"])
        corpus_rows = outputs.corpus_clean_counts(layout)
    version = dg.DataVersion(stats["key"])
    reasons = stats["reasons"]
    chart = stacked_bars({sid: {"kept": stats["kept"], **reasons}}, f"{sid}: kept and dropped per reason")
    yield dg.MaterializeResult(
        asset_key="clean_documents",
        data_version=version,
        metadata={
            # first: the whole corpus so far (every cleaned source), then this source's reasons
            "corpus_kept_and_rejected": corpus_table(corpus_rows),
            "reasons": table(["reason", "documents", "threshold"],
                             [[k, v, outputs.threshold_text(k, settings.clean)]
                              for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])) if v]),
            **table_metadata(stats["kept"], driver.CLEAN_DOC_SCHEMA),
            "documents_in": dg.MetadataValue.int(stats["docs_in"]),
            "kept": dg.MetadataValue.int(stats["kept"]),
            "rejected": dg.MetadataValue.int(stats["rejected"]),
            "bytes_in": dg.MetadataValue.int(stats["bytes_in"]),
            "counts": table(["outcome", "documents"], [["kept", stats["kept"]], *[[f"dropped: {k}", v] for k, v in reasons.items()]]),
            "repairs": table(["repair", "documents"], [[k, v] for k, v in stats["repairs"].items()]),
            "languages": table(["lang", "documents"], [[k, v] for k, v in stats.get("langs", {}).items()]),
            "kept_and_dropped_chart": charts_markdown({f"{sid}: kept and dropped per reason": chart}),
            "preview": kept,
            **explain_first(outputs.clean_doc_files(layout, sid), location_of(context)),
            "parts": stats["parts"],
            "cached": stats["cached"],
            "stage_key": stats["key"],
            **step_seconds(own, stats["seconds"], stats["cached"]),
            "path": dg.MetadataValue.path(str(layout.stage(driver.STAGE, sid))),
        },
    )
    yield dg.MaterializeResult(
        asset_key="rejects",
        data_version=version,
        metadata={
            **table_metadata(stats["rejected"], driver.REJECT_SCHEMA),
            "rejected": dg.MetadataValue.int(stats["rejected"]),
            "by_reason": table(["reason", "documents", "threshold"],
                               [[k, v, outputs.threshold_text(k, settings.clean)] for k, v in reasons.items()]),
            "examples": rejected,
            **explain_first(outputs.reject_files(layout, sid), location_of(context)),
        },
    )
