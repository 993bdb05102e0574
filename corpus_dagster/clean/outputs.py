"""Reading the clean stage's outputs: the only way other stages and the Dagster layer see them.

Kept apart from the clean driver so that a stage which reads clean documents (MinHash, dedup, the
analysis, scrub, release) loads the record and file helpers only, not the cleaner with its language ID
and quality filters; a damaged file is rebuilt through the driver, imported when that happens.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.declare import Threshold
from corpus_dagster.core import records
from corpus_dagster.core.doc_keys import stable_keys
from corpus_dagster.core.documents import INFO_DOC_ID
from corpus_dagster.core.errors import StageOutputError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import CleanSettings, Settings

STAGE = "clean"


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
    from corpus_dagster.ingest import driver as ingest_driver  # a reader of ingest's outputs

    sid = source.source_id
    files = clean_doc_files(layout, sid)
    frames = [pl.from_arrow(pq.read_table(p, columns=["id", "url", "sha256"])) for p in files]
    docs = pl.concat(frames) if frames else pl.DataFrame(schema={"id": pl.String, "url": pl.String, "sha256": pl.Binary})
    own = None
    if source.id_field:
        info = pl.from_arrow(ingest_driver.document_info(layout, sid))
        assert isinstance(info, pl.DataFrame)
        if source.id_field not in info.columns:
            raise StageOutputError(f"source {sid!r}: the fetch kept no field {source.id_field!r} (the ledger's id_field); "
                                   f"rerun raw_documents[{sid}]")
        values = info.select(pl.col(INFO_DOC_ID).alias("id"), pl.col(source.id_field).cast(pl.String).alias("own"))
        own = docs.select("id").join(values, on="id", how="left", maintain_order="left")["own"].to_list()
    keys = stable_keys(
        sid, [d.hex() for d in docs["sha256"].to_list()], own_ids=own,
        urls=docs["url"].to_list() if source.url_field else None,
        ledger_urls=[ingest_driver.normalize_url(u) for u in source.urls],
    )
    return pa.table({"id": docs["id"].to_arrow().cast(pa.string()), "key": pa.array(keys, pa.string())})
