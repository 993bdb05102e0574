"""Readers that decode only the row groups holding the rows they are asked for."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.parquet import (
    INTERMEDIATE,
    ParquetSettings,
    locate_rows,
    read_row_range,
    row_group_cuts,
    rows_by_group,
    write_parquet,
)

TABLE = pa.table({"n": list(range(10)), "s": [f"r{i}" for i in range(10)]})


@pytest.fixture()
def parquet_file(tmp_path) -> pq.ParquetFile:
    """TABLE's rows 0..9 in row groups of 4, 4 and 2 rows."""
    pq.write_table(TABLE, tmp_path / "t.parquet", row_group_size=4)
    return pq.ParquetFile(tmp_path / "t.parquet")


def test_locate_rows_names_the_group_and_the_row_within_it(parquet_file):
    group, local = locate_rows(parquet_file, np.array([0, 3, 4, 9]))
    assert group.tolist() == [0, 0, 1, 2] and local.tolist() == [0, 3, 0, 1]


def test_rows_by_group_reads_each_needed_group_once(parquet_file, count_row_group_reads):
    reads = count_row_group_reads()
    got = []
    for positions, local, table in rows_by_group(parquet_file, [9, 1, 8, 2], ["n"]):
        got += [(int(p), table["n"][int(r)].as_py()) for p, r in zip(positions, local, strict=True)]
    assert reads == [0, 2]  # group 1 (rows 4..7) is never decoded
    assert sorted(got) == [(0, 9), (1, 1), (2, 8), (3, 2)]


@pytest.mark.parametrize(("start", "stop"), [(0, 10), (3, 5), (4, 8), (5, 6), (7, 10), (9, 10)])
def test_read_row_range_equals_a_slice_of_the_whole_file(parquet_file, start, stop, count_row_group_reads):
    reads = count_row_group_reads()
    got = read_row_range(parquet_file, start, stop, ["s", "n"])
    assert got.equals(TABLE.select(["s", "n"]).slice(start, stop - start))
    assert reads == sorted({r // 4 for r in range(start, stop)})


def test_read_row_range_of_no_rows_is_empty_and_outside_the_file_is_an_error(parquet_file):
    empty = read_row_range(parquet_file, 3, 3, ["n"])
    assert empty.num_rows == 0 and empty.column_names == ["n"]
    with pytest.raises(IndexError, match="rows 8..11 outside a file of 10 rows"):
        read_row_range(parquet_file, 8, 11, ["n"])


def test_row_group_cuts_bound_bytes_and_rows():
    sizes = np.array([10, 10, 10, 50, 0, 0, 5, 5, 5])
    assert row_group_cuts(sizes, 30) == [0, 3, 4, 9]  # the row of 50 stands alone
    assert row_group_cuts(sizes, 30, max_rows=2) == [0, 2, 3, 4, 6, 8, 9]
    assert row_group_cuts(np.array([], dtype=np.int64), 30, max_rows=2) == [0]


def test_intermediate_files_end_a_row_group_before_its_text_passes_the_byte_bound(tmp_path):
    settings = ParquetSettings(compression_level=1, row_group_rows=4, row_group_max_bytes=100)
    texts = ["a" * 40] * 5 + ["b" * 250] + ["c"] * 9
    write_parquet(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), tmp_path / "t.parquet", settings)
    meta = pq.read_metadata(tmp_path / "t.parquet")
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [2, 2, 1, 1, 4, 4, 1]
    assert pq.read_table(tmp_path / "t.parquet")["text"].to_pylist() == texts
    assert INTERMEDIATE.row_group_rows == 2048 and INTERMEDIATE.row_group_max_bytes == 32 << 20
