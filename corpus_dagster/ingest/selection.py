"""Source-level selection from a ledger row: the `where` predicate and the `keep_fields` side table.

Both work on a batch of the source's own records (before they are reduced to the raw contract's four
keys), so a predicate can use any field the source ships (`int_score >= 3`) and kept fields (`title`,
`repo`, `path`) survive beside the raw documents in a table keyed by document id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from corpus_dagster.core.errors import SelectionError

Records = pl.DataFrame | pa.Table | list[dict[str, Any]]


def _frame(records: Records) -> pl.DataFrame:
    if isinstance(records, pl.DataFrame):
        return records
    if isinstance(records, pa.Table):
        return pl.from_arrow(records)  # type: ignore[return-value]
    if not records:
        return pl.DataFrame()
    return pl.from_dicts(records, infer_schema_length=None)


def where_mask(records: Records, where: str, source_id: str) -> pl.Series:
    """Boolean keep mask of `where` (polars SQL over the records' fields); a null result means excluded."""
    frame = _frame(records)
    try:
        expr = pl.sql_expr(where)
    except Exception as exc:  # polars raises several error types for bad SQL
        raise SelectionError(
            source_id, f"ledger `where` {where!r} is not a valid polars SQL predicate: {exc}"
        ) from exc
    if frame.height == 0:
        return pl.Series("keep", [], dtype=pl.Boolean)
    try:
        mask = frame.select(expr.alias("keep")).to_series()
    except Exception as exc:
        fields = ", ".join(frame.columns)
        raise SelectionError(
            source_id,
            f"ledger `where` {where!r} cannot be evaluated on the source's fields ({fields}): {exc}. "
            f"Fix the predicate in the ledger row; it may only name fields the source has.",
        ) from exc
    if mask.dtype != pl.Boolean:
        raise SelectionError(
            source_id, f"ledger `where` {where!r} gives {mask.dtype} values, not true/false; write a comparison"
        )
    return mask.fill_null(False)


def apply_where(records: Records, where: str | None, source_id: str) -> tuple[Records, int]:
    """(kept records in their input order and type, number excluded). `where` None keeps everything."""
    if where is None:
        return records, 0
    mask = where_mask(records, where, source_id)
    excluded = int(mask.len() - mask.sum())
    if isinstance(records, list):
        return [r for r, keep in zip(records, mask.to_list(), strict=True) if keep], excluded
    if isinstance(records, pa.Table):
        return records.filter(pa.array(mask.to_arrow())), excluded
    return records.filter(mask), excluded


def keep_fields_table(
    records: Records, doc_ids: Sequence[str], keep_fields: Sequence[str], source_id: str
) -> pa.Table:
    """Table `id` + one column per kept field (in ledger order), one row per record in record order.

    A field missing from every record is an error (a typo in the ledger); one missing from some records
    is null there. Values keep the source's type.
    """
    frame = _frame(records)
    if len(doc_ids) != frame.height:
        raise SelectionError(source_id, f"{len(doc_ids)} document ids for {frame.height} records")
    missing = [f for f in keep_fields if f not in frame.columns]
    if missing and frame.height:
        raise SelectionError(
            source_id,
            f"ledger keep_fields {missing} not found in the source's fields ({', '.join(frame.columns)}); "
            f"fix keep_fields in the ledger row",
        )
    ids = pl.Series("id", list(doc_ids), dtype=pl.String)
    cols = [ids] + [frame[f] if f in frame.columns else pl.Series(f, [], dtype=pl.String) for f in keep_fields]
    return pl.DataFrame(cols).to_arrow()
