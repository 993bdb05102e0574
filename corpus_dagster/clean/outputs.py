"""Reading the clean stage's outputs: the only way other stages, explain and the Dagster layer see them.

Kept apart from the clean driver so that a stage which reads clean documents (MinHash, dedup, the
analysis, scrub, release) loads the record and file helpers only, not the cleaner with its language ID
and quality filters; a damaged file is rebuilt through the driver, imported when that happens (the driver
never imports this module, so the two make no circle). The filter declarations other stages read (reason
codes, manifest filter keys, which rule a reason belongs to) are `clean.filters`' names, loaded on first use:
the filters load numba kernels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.declare import Threshold
from corpus_dagster.core import records
from corpus_dagster.core.doc_keys import stable_keys
from corpus_dagster.core.documents import INFO_DOC_ID
from corpus_dagster.core.errors import StageOutputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.lazy import lazy_names
from corpus_dagster.core.ledger import Source, load_ledger
from corpus_dagster.core.parquet import head_rows
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import CleanSettings, Settings
from corpus_dagster.ingest import outputs as ingest_outputs

if TYPE_CHECKING:
    from corpus_dagster.clean.filters import (
        BASE_FILTER_KEYS,
        FILTER_KEYS,
        REASON_CODES,
        filter_key,
        find_reason,
    )

__all__ = [
    "BASE_FILTER_KEYS", "FILTER_KEYS", "REASON_CODES", "STAGE", "clean_doc_files", "clean_record", "corpus_clean_counts",
    "document_keys", "filter_and_repair_counts", "filter_key", "find_reason", "first_id", "kept_head",
    "reason_threshold", "reject_examples", "reject_files", "texts_at", "threshold_text",
]

STAGE = "clean"  # the clean driver's stage folder (`clean.driver.STAGE`)
__getattr__, _ = lazy_names(__name__, {
    "corpus_dagster.clean.filters": "BASE_FILTER_KEYS FILTER_KEYS REASON_CODES filter_key find_reason",
})


def clean_record(layout: Layout, source_id: str) -> StageRecord:
    """The clean stage record of a source (UpstreamMissing when the source was never cleaned)."""
    return records.require_record(layout.stage(STAGE, source_id), "clean_documents", source_id)


def clean_doc_files(layout: Layout, source_id: str, settings: Settings | None = None) -> list[Path]:
    """The clean document files of one source, in k order (schema CLEAN_DOC_SCHEMA), checked against the
    clean record. With `settings`, a damaged file is rebuilt here (the clean stage reruns for that source)."""
    return records.record_files(layout.stage(STAGE, source_id), clean_record(layout, source_id), "docs",
                                _rebuild(layout, source_id, settings))


def reject_files(layout: Layout, source_id: str, settings: Settings | None = None) -> list[Path]:
    """The rejects files of one source, in k order (schema REJECT_SCHEMA); `settings` as in clean_doc_files."""
    return records.record_files(layout.stage(STAGE, source_id), clean_record(layout, source_id), "rejects",
                                _rebuild(layout, source_id, settings))


def _rebuild(layout: Layout, source_id: str, settings: Settings | None) -> Callable[[], None] | None:
    """The clean stage of one source as a rebuild for `records.record_files`, when its key is unchanged (a
    changed raw input or config is not this reader's to rebuild: the damage is refused instead)."""
    if settings is None:
        return None

    def rebuild() -> None:
        from corpus_dagster.clean.driver import clean_key, run_clean_source  # the cleaner, only to rebuild

        if clean_key(layout, source_id, settings)[0] == clean_record(layout, source_id).key:
            run_clean_source(layout, settings, source_id)

    return rebuild


def threshold_text(reason: str, clean: CleanSettings) -> str:
    """What a clean reason code's recorded value was compared with under these settings, as text (the
    review page and explain read it here; the filter declarations are loaded on first use)."""
    from corpus_dagster.clean.filters import threshold_text as text

    return text(reason, clean)


def reason_threshold(reason: str, clean: CleanSettings) -> Threshold | None:
    """The configured limits of a clean reason code as its filter declares them (None for an unknown code)."""
    from corpus_dagster.clean.filters import reason_threshold as threshold

    return threshold(reason, clean)


def document_keys(layout: Layout, source: Source) -> pa.Table:
    """`id`, `key` of every clean document of a source in k order: its stable key (core.doc_keys), from the
    ledger `id_field` value (ingest's document info), else its url (a `url_field` source), else its clean
    text's SHA-256 and occurrence. Dedup chooses keepers by it and the release hashes it into its ids."""
    sid = source.source_id
    files = clean_doc_files(layout, sid)
    frames = [pl.from_arrow(pq.read_table(p, columns=["id", "url", "sha256"])) for p in files]
    docs = pl.concat(frames) if frames else pl.DataFrame(schema={"id": pl.String, "url": pl.String, "sha256": pl.Binary})
    own = None
    if source.id_field:
        info = pl.from_arrow(ingest_outputs.document_info(layout, sid))
        assert isinstance(info, pl.DataFrame)
        if source.id_field not in info.columns:
            raise StageOutputError(f"source {sid!r}: the fetch kept no field {source.id_field!r} (the ledger's id_field); "
                                   f"rerun raw_documents[{sid}]")
        values = info.select(pl.col(INFO_DOC_ID).alias("id"), pl.col(source.id_field).cast(pl.String).alias("own"))
        own = docs.select("id").join(values, on="id", how="left", maintain_order="left")["own"].to_list()
    keys = stable_keys(
        sid, [d.hex() for d in docs["sha256"].to_list()], own_ids=own,
        urls=docs["url"].to_list() if source.url_field else None,
        ledger_urls=[ingest_outputs.normalize_url(u) for u in source.urls],
    )
    return pa.table({"id": docs["id"].to_arrow().cast(pa.string()), "key": pa.array(keys, pa.string())})


def filter_and_repair_counts(
    layout: Layout, source_ids: list[str], clean_cfg: CleanSettings
) -> tuple[dict[str, int], dict[str, int]]:
    """Manifest `filters` and `repairs`, summed over the sources' clean records.

    `filters` holds the BASE_FILTER_KEYS always, plus every further filter that is enabled (or that dropped
    something), in the fixed FILTER_KEYS order.
    """
    from corpus_dagster.clean.filters import BASE_FILTER_KEYS, FILTER_KEYS, filter_key
    from corpus_dagster.clean.repair import REPAIR_KINDS

    filters: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    for sid in source_ids:
        stats = clean_record(layout, sid).stats
        for reason, n in stats.get("reasons", {}).items():
            filters[filter_key(reason)] += n
        repairs.update(stats.get("repairs", {}))
    keys = [k for k in FILTER_KEYS
            if k in BASE_FILTER_KEYS or getattr(getattr(clean_cfg, k, None), "enabled", False) or filters[k]]
    return {k: filters[k] for k in keys}, {k: repairs[k] for k in REPAIR_KINDS}


def corpus_clean_counts(layout: Layout, source_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Per source with a clean record (of `source_ids`, default every ledger source): documents in, kept,
    rejected and the reject reasons (largest first), read from the stage records; the sources not cleaned
    yet are left out."""
    out = []
    for sid in source_ids if source_ids is not None else [s.source_id for s in load_ledger(layout.ledger)]:
        record = records.read_record(layout.stage(STAGE, sid))
        if record is None:
            continue
        st = record.stats
        reasons = {str(k): int(v) for k, v in (st.get("reasons") or {}).items() if int(v) > 0}
        out.append({"source_id": sid, "docs_in": int(st.get("docs_in", 0)), "kept": int(st.get("kept", 0)),
                    "rejected": int(st.get("rejected", 0)),
                    "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))})
    return out


# --- What the Dagster metadata shows of a source's outputs: a few rows, read without decoding the rest -------

EXAMPLES_PER_REASON = 3
REJECT_SCAN_ROWS = 256  # rows decoded at a time while looking for examples


def kept_head(layout: Layout, source_id: str, rows: int) -> list[dict[str, Any]]:
    """`id`, `lang`, `n_chars`, `text` of the first kept documents of a source (its first file's start)."""
    files = clean_doc_files(layout, source_id)
    return head_rows(files[0], ["id", "lang", "n_chars", "text"], rows) if files else []


def first_id(files: list[Path]) -> str | None:
    """The id of the first row of these clean files (docs or rejects), None when there is none."""
    head = head_rows(files[0], ["id"], 1) if files else []
    return head[0]["id"] if head else None


def texts_at(path: Path, rows: list[int]) -> list[str | None]:
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


def reject_examples(layout: Layout, source_id: str, reasons: dict[str, int] | None = None,
                    per_reason: int = EXAMPLES_PER_REASON) -> list[dict[str, Any]]:
    """The first `per_reason` rejected documents of each reason (`id`, `reason`, `value`, `text`), in file order.

    `reasons` (rejected documents per reason, from the stage's stats) lets the scan stop once every reason
    has its examples: the rejects of a source can be most of its text, and a preview needs a few rows."""
    seen: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    wanted = None if reasons is None else {k: min(v, per_reason) for k, v in reasons.items() if v > 0}

    def complete() -> bool:
        return wanted is not None and all(seen.get(k, 0) >= v for k, v in wanted.items())

    for path in reject_files(layout, source_id):
        if complete():
            break
        # the small columns pick the examples; only the picked rows' texts are read into Python strings
        picked: list[tuple[int, dict]] = []
        offset = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=REJECT_SCAN_ROWS, columns=["id", "reason", "value"],
                                                       use_threads=False):
            for j, r in enumerate(batch.to_pylist()):
                if seen.get(r["reason"], 0) < per_reason:
                    seen[r["reason"]] = seen.get(r["reason"], 0) + 1
                    picked.append((offset + j, r))
            offset += batch.num_rows
            if complete():
                break
        texts = texts_at(path, [i for i, _ in picked])
        out += [{**r, "text": text} for (_, r), text in zip(picked, texts, strict=True)]
    return out
