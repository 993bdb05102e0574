"""One Parquet-writing helper: every table is written atomically with settings named by its caller.

Writer settings decide output bytes, so each table kind states its own (`ParquetSettings`) instead of
inheriting library defaults that may change between pyarrow versions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.atomic import atomic_path


@dataclass(frozen=True)
class ParquetSettings:
    """Writer settings that decide a file's bytes."""

    compression: str = "zstd"
    compression_level: int = 3
    row_group_rows: int | None = None  # None: one row group per `row_groups` cut (or pyarrow's default size)
    use_dictionary: bool | tuple[str, ...] = True
    write_statistics: bool = True
    # With `row_group_rows`: a row group also ends before its `text` column would pass this many bytes.
    row_group_max_bytes: int | None = None


# Intermediate per-part stage tables: fast to write, small row groups so a later stage reads only the rows it needs.
# Bounded in bytes too: 2,048 long documents (recombined changelogs) were 240 MB of text in one group, and
# every reader of these files (publish, the review) holds at least one group.
INTERMEDIATE = ParquetSettings(compression_level=1, row_group_rows=2048, row_group_max_bytes=32 << 20)
# Small side tables (dedup decisions, token counts, analysis tables).
TABLE = ParquetSettings(compression_level=3)


@contextmanager
def parquet_writer(path: str | Path, schema: pa.Schema, settings: ParquetSettings) -> Iterator[pq.ParquetWriter]:
    """A writer of `path` with the settings that decide its bytes; the file appears (atomically) only when
    the block ends without an error. For files written a row group at a time."""
    with atomic_path(path) as tmp:
        use_dict = list(settings.use_dictionary) if isinstance(settings.use_dictionary, tuple) else settings.use_dictionary
        with pq.ParquetWriter(
            tmp,
            schema,
            compression=settings.compression,
            compression_level=settings.compression_level,
            use_dictionary=use_dict,
            write_statistics=settings.write_statistics,
            version="2.6",
            data_page_version="1.0",
        ) as writer:
            yield writer


def write_parquet(
    table: pa.Table, path: str | Path, settings: ParquetSettings, row_groups: list[int] | None = None
) -> None:
    """Write `table` to `path` atomically; `row_groups` (row boundaries incl. 0 and n) cuts row groups by hand."""
    if row_groups is None and settings.row_group_max_bytes and "text" in table.column_names:
        sizes = pc.fill_null(pc.binary_length(table["text"]), 0).to_numpy(zero_copy_only=False)
        row_groups = row_group_cuts(sizes, settings.row_group_max_bytes, settings.row_group_rows)
    with parquet_writer(path, table.schema, settings) as writer:
        if row_groups is not None:
            for a, b in zip(row_groups[:-1], row_groups[1:], strict=True):
                writer.write_table(table.slice(a, b - a), row_group_size=max(b - a, 1))
        else:
            writer.write_table(table, row_group_size=settings.row_group_rows)


def row_group_cuts(sizes: np.ndarray, limit: int, max_rows: int | None = None) -> list[int]:
    """Row boundaries (0 and n included) so each row group's bytes (`sizes` per row) stay within `limit` and
    its rows within `max_rows`; a lone row larger than `limit` stands alone."""
    cuts = [0]
    acc = 0
    for i, s in enumerate(np.asarray(sizes).tolist()):
        if (acc and acc + s > limit) or (max_rows and i - cuts[-1] >= max_rows):
            cuts.append(i)
            acc = 0
        acc += s
    if len(sizes):
        cuts.append(len(sizes))
    return cuts


def row_group_starts(pf: pq.ParquetFile) -> np.ndarray:
    """The first row of every row group, and the row count last."""
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def locate_rows(pf: pq.ParquetFile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row group, row within that group) of each of the file's `rows`: what a reader that reads only
    the row groups it needs takes from them."""
    starts = row_group_starts(pf)
    group = np.searchsorted(starts, rows, side="right") - 1
    return group, np.asarray(rows, dtype=np.int64) - starts[group]


def rows_by_group(pf: pq.ParquetFile, rows: Sequence[int] | np.ndarray, columns: list[str]
                  ) -> Iterator[tuple[np.ndarray, np.ndarray, pa.Table]]:
    """The file's `rows` one row group at a time: (positions in `rows`, their rows within the group, the
    group's `columns`). A reader that holds one group at a time is bounded by a row group, not a file."""
    rows = np.asarray(rows, dtype=np.int64)
    group, local = locate_rows(pf, rows)
    for g in np.unique(group).tolist():
        positions = np.flatnonzero(group == g)
        yield positions, local[positions], pf.read_row_group(g, columns=columns, use_threads=False)


def read_row_range(pf: pq.ParquetFile, start: int, stop: int, columns: list[str]) -> pa.Table:
    """Rows [start, stop) of the file's `columns`, decoding only the row groups that hold them."""
    starts = row_group_starts(pf)
    if not 0 <= start <= stop <= int(starts[-1]):
        raise IndexError(f"rows {start}..{stop} outside a file of {int(starts[-1])} rows")
    if start == stop:
        return pf.schema_arrow.empty_table().select(columns)
    first = int(np.searchsorted(starts, start, side="right")) - 1
    last = int(np.searchsorted(starts, stop - 1, side="right")) - 1
    table = pa.concat_tables([pf.read_row_group(g, columns=columns, use_threads=False) for g in range(first, last + 1)])
    return table.slice(start - int(starts[first]), stop - start)


def head_rows(path: str | Path, columns: list[str], n: int) -> list[dict]:
    """The first `n` rows of a Parquet file as dicts, decoding no more than the batch that holds them.

    A preview of a large file (a source of 60 MB of changelogs in one part) read the whole text column
    before slicing: about 1 s per preview instead of a few ms."""
    if n <= 0:
        return []
    batch = next(pq.ParquetFile(path).iter_batches(batch_size=n, columns=columns, use_threads=False), None)
    return [] if batch is None else batch.to_pylist()  # a batch holds at most n rows
