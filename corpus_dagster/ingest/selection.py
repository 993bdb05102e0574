"""Source-level selection from a ledger row: the `where` predicate and the `keep_fields` side table.

Both work on batches of the source's own records (before they are reduced to the raw contract's four
keys), so a predicate can use any field the source ships (`int_score >= 3`) and kept fields (`title`,
`repo`, `path`) survive beside the raw documents in a table keyed by document id.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from corpus_dagster.core.documents import INFO_COLUMNS, INFO_DOC_ID
from corpus_dagster.core.errors import SelectionError
from corpus_dagster.core.row_predicate import predicate_problem

Records = pl.DataFrame | pa.Table | list[dict[str, Any]]

BATCH_ROWS = 4096  # records per vectorized `where` evaluation; the result does not depend on it
RESERVED_FIELDS = INFO_COLUMNS  # columns the document info table has already


def _frame(records: Records) -> pl.DataFrame:
    if isinstance(records, pl.DataFrame):
        return records
    if isinstance(records, pa.Table):
        return pl.from_arrow(records)  # type: ignore[return-value]
    if not records:
        return pl.DataFrame()
    return pl.from_dicts(records, infer_schema_length=None)


def _first_line(exc: BaseException) -> str:
    """Polars errors span several lines (plans, hints); an error message here stays on one line."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def compile_where(where: str, source_id: str) -> pl.Expr:
    """The ledger's `where` as a polars expression; a predicate outside the row-predicate grammar (checked before
    polars sees it, as the ledger loader does) or that polars cannot parse is a SelectionError."""
    refused = predicate_problem(where)
    if refused is not None:
        raise SelectionError(source_id, f"ledger `where` {where!r}: {refused}; fix the predicate in the ledger row")
    try:
        return pl.sql_expr(where)
    except Exception as exc:  # polars raises several error types for bad SQL
        raise SelectionError(
            source_id, f"ledger `where` {where!r} is not a valid polars SQL predicate: {_first_line(exc)}"
        ) from exc


def where_fields(where: str, source_id: str) -> tuple[str, ...]:
    """The source fields a predicate names, in the order it names them."""
    return tuple(dict.fromkeys(compile_where(where, source_id).meta.root_names()))


def _evaluate(frame: pl.DataFrame, expr: pl.Expr, where: str, source_id: str) -> pl.Series:
    """Keep mask of `expr` over `frame`; null (unknown) means excluded."""
    if frame.height == 0:
        return pl.Series("keep", [], dtype=pl.Boolean)
    try:
        mask = frame.select(expr.alias("keep")).to_series()
    except Exception as exc:
        fields = ", ".join(frame.columns)
        raise SelectionError(
            source_id,
            f"ledger `where` {where!r} cannot be evaluated on the source's fields ({fields}): {_first_line(exc)}; "
            f"fix the predicate in the ledger row",
        ) from exc
    if mask.len() == 1 and frame.height != 1:  # a predicate that names no field is one constant
        mask = mask.extend_constant(mask[0], frame.height - 1)
    if mask.dtype == pl.Null:  # every value the predicate looked at was null in this batch
        return pl.Series("keep", [False] * frame.height, dtype=pl.Boolean)
    if mask.dtype != pl.Boolean:
        raise SelectionError(
            source_id, f"ledger `where` {where!r} gives {mask.dtype} values, not true/false; write a comparison"
        )
    return mask.fill_null(False)


def where_mask(records: Records, where: str, source_id: str) -> pl.Series:
    """Boolean keep mask of `where` (polars SQL over the records' fields); a null result means excluded."""
    expr = compile_where(where, source_id)
    return _evaluate(_frame(records), expr, where, source_id)


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


# --- kept fields -------------------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """A kept value as a JSON-able scalar: nested values become JSON text, dates ISO text, NaN null."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _as_text(value: Any) -> str | None:
    """A scalar as the text a string column holds: strings as they are, other values as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def kept_column(values: Sequence[Any]) -> pa.Array:
    """One kept field of a batch as an Arrow array: bool, int64, float64 or string (JSON text of mixed values).

    A batch whose values are all null is a null array; `unify_chunks` gives it the type of the other batches.
    """
    vals = [jsonable(v) for v in values]
    kinds = {type(v) for v in vals if v is not None}
    if not kinds:
        return pa.nulls(len(vals))
    if kinds == {bool}:
        return pa.array(vals, type=pa.bool_())
    huge = int in kinds and any(type(v) is int and not -(2**63) <= v < 2**63 for v in vals)
    if kinds == {int} and not huge:
        return pa.array(vals, type=pa.int64())
    if kinds <= {int, float} and not huge:
        return pa.array([None if v is None else float(v) for v in vals], type=pa.float64())
    return pa.array([_as_text(v) for v in vals], type=pa.string())


def unify_chunks(chunks: Sequence[pa.Array]) -> pa.ChunkedArray:
    """Batches of one kept field under one type: the common type, float64 for ints and floats, else string."""
    types = list(dict.fromkeys(c.type for c in chunks if c.type != pa.null()))
    if not types:
        target = pa.string()
    elif len(types) == 1:
        target = types[0]
    elif set(types) <= {pa.int64(), pa.float64()}:
        target = pa.float64()
    else:
        target = pa.string()
    out = []
    for c in chunks:
        if c.type == target:
            out.append(c)
        elif c.type == pa.null() or target != pa.string():
            out.append(c.cast(target))
        else:
            out.append(pa.array([_as_text(v) for v in c.to_pylist()], type=pa.string()))
    return pa.chunked_array(out, type=target)


def document_ids(source_id: str, n: int) -> pa.Array:
    """`<source_id>:<k>` for k = 0..n-1, built vectorized (a source may hold millions of documents)."""
    frame = pl.select((pl.lit(f"{source_id}:") + pl.int_range(0, n, eager=False).cast(pl.String)).alias("id"))
    return frame.to_series().to_arrow().cast(pa.string())


def keep_fields_table(
    records: Records, doc_ids: Sequence[str], keep_fields: Sequence[str], source_id: str
) -> pa.Table:
    """Table `_doc_id` + one column per kept field (in ledger order), one row per record in record order.

    A field missing from every record is an error (a typo in the ledger); one missing from some records
    is null there. Values follow the kept-value rules of `kept_column`.
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
    rows = frame.to_dicts()
    cols = {INFO_DOC_ID: pa.array(list(doc_ids), type=pa.string())}
    for f in keep_fields:
        cols[f] = unify_chunks([kept_column([r.get(f) for r in rows])])
    return pa.table(cols)


class Selection:
    """A ledger row's `where` and `keep_fields` for one source, applied batch by batch while it is read.

    Feed it the fields of every readable record in source order (`select`); it returns the keep mask,
    counts the excluded records, and collects the kept fields of the records that become documents.
    """

    def __init__(self, source_id: str, where: str | None, keep_fields: Sequence[str]):
        self.source_id = source_id
        self.where = where
        self.keep_fields = tuple(keep_fields)
        reserved = [f for f in self.keep_fields if f in RESERVED_FIELDS]
        if reserved:
            raise SelectionError(
                source_id,
                f"ledger keep_fields {reserved} clash with the document info columns {list(RESERVED_FIELDS)}; "
                f"remove them from keep_fields",
            )
        self._expr = compile_where(where, source_id) if where is not None else None
        self.where_fields = where_fields(where, source_id) if where is not None else ()
        self.fields = tuple(dict.fromkeys(self.where_fields + self.keep_fields))
        self.excluded = 0
        self.readable = 0
        self.kept = 0
        self._seen: set[str] = set()
        self._chunks: dict[str, list[pa.Array]] = {f: [] for f in self.keep_fields}

    @classmethod
    def for_source(cls, source: Any) -> Selection | None:
        """The selection of a ledger row, or None when it sets neither `where` nor `keep_fields`."""
        if source.where is None and not source.keep_fields:
            return None
        return cls(source.source_id, source.where, source.keep_fields)

    def check_columns(self, columns: Sequence[str], file: str) -> None:
        """A file with a schema (Parquet) must have every field the ledger row names."""
        have = set(columns)
        missing_where = [f for f in self.where_fields if f not in have]
        if missing_where:
            raise SelectionError(
                self.source_id,
                f"ledger `where` {self.where!r} names field(s) {missing_where} the file lacks "
                f"(it has {', '.join(columns)}); fix the predicate in the ledger row",
                file=file,
            )
        missing_keep = [f for f in self.keep_fields if f not in have]
        if missing_keep:
            raise SelectionError(
                self.source_id,
                f"ledger keep_fields {missing_keep} not found in the file (it has {', '.join(columns)}); "
                f"fix keep_fields in the ledger row",
                file=file,
            )

    def select(self, rows: Sequence[Mapping[str, Any]]) -> list[bool]:
        """Keep mask of a batch of records (each the record's fields among `self.fields`, missing = absent)."""
        self.readable += len(rows)
        for f in self.fields:
            if f not in self._seen and any(f in r for r in rows):
                self._seen.add(f)
        if self._expr is not None:
            columns = [pl.Series(f, [r.get(f) for r in rows], strict=False) for f in self.where_fields]
            frame = pl.DataFrame(columns or [pl.Series("_row", [None] * len(rows))])
            keep = _evaluate(frame, self._expr, self.where or "", self.source_id).to_list()
        else:
            keep = [True] * len(rows)
        kept_rows = [r for r, k in zip(rows, keep, strict=True) if k]
        self.excluded += len(rows) - len(kept_rows)
        self.kept += len(kept_rows)
        for f in self.keep_fields:
            self._chunks[f].append(kept_column([r.get(f) for r in kept_rows]))
        return keep

    def check_seen(self) -> None:
        """After the whole source: a named field that no record had is a typo in the ledger row."""
        if self.readable == 0:
            return
        missing_where = [f for f in self.where_fields if f not in self._seen]
        if missing_where:
            raise SelectionError(
                self.source_id,
                f"ledger `where` {self.where!r} names field(s) {missing_where} that no record of the source has; "
                f"fix the predicate in the ledger row",
            )
        missing_keep = [f for f in self.keep_fields if f not in self._seen]
        if missing_keep:
            raise SelectionError(
                self.source_id,
                f"ledger keep_fields {missing_keep} not found in any record of the source; "
                f"fix keep_fields in the ledger row",
            )

    def fields_table(self) -> pa.Table:
        """`_doc_id` then the kept fields in ledger order, one row per written document in k order."""
        cols: dict[str, Any] = {INFO_DOC_ID: document_ids(self.source_id, self.kept)}
        for f in self.keep_fields:
            cols[f] = unify_chunks(self._chunks[f]) if self._chunks[f] else pa.chunked_array([], type=pa.string())
        return pa.table(cols)
