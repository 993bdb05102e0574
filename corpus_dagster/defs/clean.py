"""clean_documents[source_id] and rejects[source_id]: repaired, filtered documents and every drop explained."""

import time

import dagster as dg
import pyarrow.parquet as pq

from corpus_dagster.clean import driver, outputs
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.parquet import head_rows
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

EXAMPLES_PER_REASON = 3
REJECT_SCAN_ROWS = 256  # rows decoded at a time while looking for examples


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


def reason_threshold(reason: str, clean_cfg: CleanSettings) -> str:
    """The configured limits a reason code's decision reads, as its filter declares them: `key=value` in the
    section's order for each declared key set to a number (a null threshold is switched off; word lists and
    switches are shown on the review page); lang names its allowed languages and its score threshold."""
    try:
        flt, declared = outputs.find_reason(reason)
    except ValueError:
        return ""
    section = getattr(clean_cfg, flt.name).to_dict()
    if reason == "lang":
        return f"allowed={','.join(section.get('allowed') or [])}, min_score={section.get('min_score')}"
    return ", ".join(f"{k}={v}" for k, v in section.items()
                     if k in declared.keys and isinstance(v, int | float) and not isinstance(v, bool))


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
    files = outputs.clean_doc_files(layout, source_id)
    head = head_rows(files[0], ["id", "lang", "n_chars", "text"], rows) if files else []
    return table(["id", "lang", "n_chars", "preview"],
                 [[r["id"], r["lang"], r["n_chars"], preview_text(r["text"])] for r in head],
                 {"preview": "the start of the text; a cut text ends in its length"})


def explain_first(files: list, location: str) -> dict[str, dg.MetadataValue]:
    """`explain`: a link that explains the first document of these files in one click (none when empty)."""
    head = head_rows(files[0], ["id"], 1) if files else []
    return {"explain": explain_link(head[0]["id"], location)} if head else {}


def texts_at(path, rows: list[int]) -> list[str | None]:
    """The `text` of the given rows (ascending) of a Parquet file, reading only the row groups that hold them."""
    pf = pq.ParquetFile(path)
    out: list[str | None] = []
    start = 0
    for rg in range(pf.metadata.num_row_groups):
        stop = start + pf.metadata.row_group(rg).num_rows
        local = [i - start for i in rows if start <= i < stop]
        if local:
            out += pf.read_row_group(rg, columns=["text"], use_threads=False).column("text").take(local).to_pylist()
        start = stop
    return out


def rejected_preview(layout, source_id: str, clean_cfg: CleanSettings,
                     reasons: dict[str, int] | None = None) -> dg.MetadataValue:
    """Up to EXAMPLES_PER_REASON rejected documents per reason, with the measured value and the threshold.

    `reasons` (rejected documents per reason, from the stage's stats) lets the scan stop once every reason
    has its examples: the rejects of a source can be most of its text, and a preview needs a few rows."""
    seen: dict[str, int] = {}
    rows = []
    wanted = None if reasons is None else {k: min(v, EXAMPLES_PER_REASON) for k, v in reasons.items() if v > 0}

    def complete() -> bool:
        return wanted is not None and all(seen.get(k, 0) >= v for k, v in wanted.items())

    for path in outputs.reject_files(layout, source_id):
        if complete():
            break
        # the small columns pick the examples; only the picked rows' texts are read into Python strings
        picked: list[tuple[int, dict]] = []
        offset = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=REJECT_SCAN_ROWS, columns=["id", "reason", "value"],
                                                       use_threads=False):
            for j, r in enumerate(batch.to_pylist()):
                if seen.get(r["reason"], 0) < EXAMPLES_PER_REASON:
                    seen[r["reason"]] = seen.get(r["reason"], 0) + 1
                    picked.append((offset + j, r))
            offset += batch.num_rows
            if complete():
                break
        texts = texts_at(path, [i for i, _ in picked])
        rows += [[r["id"], r["reason"], measured(r["value"]), reason_threshold(r["reason"], clean_cfg), preview_text(text)]
                 for (_, r), text in zip(picked, texts, strict=True)]
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
        corpus_rows = outputs.corpus_clean_counts(layout, [s.source_id for s in load_ledger(layout.ledger)])
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
                             [[k, v, reason_threshold(k, settings.clean)]
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
                               [[k, v, reason_threshold(k, settings.clean)] for k, v in reasons.items()]),
            "examples": rejected,
            **explain_first(outputs.reject_files(layout, sid), location_of(context)),
        },
    )
