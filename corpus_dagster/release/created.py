"""Stable `created_at`: the first build in which a row's content appeared, kept by content hash across builds.

A row's `created_at` would otherwise be its document's fetch time, which every refetch renews: one edited
document would then rewrite every part file. The release keeps, beside its versions
(`release/<name>/_CREATED_AT.parquet`), the `created_at` it gave each content hash (sha256 of the row's
text); a later build gives an unchanged content that value again, and a new content its own (the ledger's
`date_field`, else its fetch time, else `release.created_at_fallback`). The table only grows: a row that
left the release keeps its entry, so content that comes back keeps its first date.

The file is read back as untrusted input: a table of another schema, a hash of another width or a repeated
hash is refused with an error naming the file, never believed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.errors import ReleaseError

CREATED_NAME = "_CREATED_AT.parquet"
SCHEMA = pa.schema([("content_sha256", pa.binary(32)), ("created_at", pa.timestamp("us", tz="UTC"))])
POLARS_SCHEMA = {"content_sha256": pl.Binary, "created_at": pl.Datetime("us", "UTC")}


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=POLARS_SCHEMA)


def read_created(path: str | Path | None) -> pl.DataFrame:
    """The kept (content_sha256, created_at) pairs; empty when there is no file yet."""
    if path is None or not Path(path).is_file():
        return empty()
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ReleaseError(f"{path}: not a readable Parquet file ({exc}); restore it, or delete it to date every "
                           "row afresh") from exc
    if not table.schema.equals(SCHEMA):
        raise ReleaseError(f"{path}: schema {table.schema} is not the created_at table's {SCHEMA}; restore it, or "
                           "delete it to date every row afresh")
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if frame["content_sha256"].is_duplicated().any() or frame.null_count().sum_horizontal().item():
        raise ReleaseError(f"{path}: a content hash is repeated or a value is missing; restore it, or delete it to "
                           "date every row afresh")
    return frame.cast(POLARS_SCHEMA)  # type: ignore[arg-type]


def parse_date(value: object) -> datetime | None:
    """An ISO 8601 date or time as UTC (a date is its midnight, a time without offset is UTC); None when it
    is not one."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def dates_from_field(plan: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """created_at from the ledger's `date_field` (a kept field) for the rows of sources that name one; a row
    whose value is missing or no ISO 8601 date keeps its fetch time."""
    fields = {sid: f["date_field"] for sid, f in facts.items() if f.get("date_field")}
    if not fields or plan.height == 0:
        return plan
    sources = plan["source_id"].to_list()
    # the kept source fields are one JSON object per row (`kept`, release.build.attach_metadata)
    kept = plan["kept"].to_list() if "kept" in plan.columns else [None] * plan.height
    own = plan["created_at"].to_list()
    dated = []
    for i, sid in enumerate(sources):
        field = fields.get(sid)
        value = json.loads(kept[i]).get(field) if field is not None and kept[i] else None
        moment = parse_date(value) if value is not None else None
        dated.append(moment or own[i])
    return plan.with_columns(pl.Series("created_at", dated, dtype=pl.Datetime("us", "UTC")))


def stable_created_at(plan: pl.DataFrame, kept: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(plan with created_at replaced by the kept value of its content hash where there is one, the pairs of
    the contents seen for the first time). `plan` has content_sha256 and its own created_at."""
    joined = plan.join(kept.rename({"created_at": "_kept_at"}), on="content_sha256", how="left", maintain_order="left")
    new = joined.filter(pl.col("_kept_at").is_null()).select("content_sha256", "created_at")
    dated = joined.with_columns(pl.coalesce("_kept_at", "created_at").alias("created_at")).drop("_kept_at")
    return dated, new.unique("content_sha256", keep="first", maintain_order=True)


def write_created(path: str | Path, kept: pl.DataFrame, new: pl.DataFrame) -> bool:
    """Add the new pairs to the file (sorted by hash, so equal tables are equal bytes); False when nothing
    was new and the file was left as it is."""
    if new.height == 0:
        return False
    merged = pl.concat([kept, new.cast(POLARS_SCHEMA)]).unique("content_sha256", keep="first")  # type: ignore[arg-type]
    atomic_write_bytes(path, created_bytes(merged))
    return True


def created_bytes(pairs: pl.DataFrame) -> bytes:
    """The table's Parquet bytes: (content_sha256, created_at) sorted by hash, fixed writer settings."""
    table = pairs.select("content_sha256", "created_at").unique("content_sha256").sort("content_sha256").to_arrow()
    sink = pa.BufferOutputStream()
    pq.write_table(table.cast(SCHEMA), sink, compression="zstd", write_statistics=False)
    return sink.getvalue().to_pybytes()
