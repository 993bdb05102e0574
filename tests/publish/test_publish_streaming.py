"""A shard is written a window of rows at a time: the bytes are those of writing the whole shard table with
`row_group_cuts`, input row groups are each read once and dropped after their last row, and a row larger
than the row-group limit stands alone."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.core.parquet import INTERMEDIATE, ParquetSettings, row_group_cuts, write_parquet
from corpus_dagster.publish import row_source
from corpus_dagster.publish.row_source import RowSource
from corpus_dagster.publish.shards import (
    DICT_COLUMNS,
    SHARD_COLUMNS,
    row_sizes,
    shard_table,
    write_shard,
)


def _inputs(tmp_path: Path, n_files: int = 3, rows: int = 700, with_pii: bool = True) -> list[Path]:
    """Files shaped like the scrub stage's (small row groups), texts of very different lengths."""
    rng = np.random.default_rng(7)
    files = []
    for f in range(n_files):
        lengths = rng.integers(0, 3000, rows)
        lengths[::97] = 40_000  # a few long documents
        texts = [f"wörd {i} " * (int(n) // 7) for i, n in enumerate(lengths)]
        cols = {
            "id": [f"s{f}:{k}" for k in range(rows)],
            "text": texts,
            "source_id": [f"s{f}"] * rows,
            "url": [None if k % 5 == 0 else f"https://x/{f}/{k}" for k in range(rows)],
            "license_spdx": ["MIT"] * rows,
            "lang": ["en"] * rows,
            "n_chars": pa.array([len(t) for t in texts], pa.int32()),
            "sha256": pa.array([hashlib.sha256(t.encode()).digest() for t in texts], pa.binary(32)),
        }
        if with_pii or f != 1:  # one file without the column: zeros
            cols["pii_redactions"] = pa.array(rng.integers(0, 3, rows), pa.int32())
        path = tmp_path / f"part-{f}.parquet"
        write_parquet(pa.table(cols), path, INTERMEDIATE)
        files.append(path)
    return files


def _plan(files: list[Path], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows in id order as the publish plan sorts them (`<source>:<k>` compared as strings)."""
    ids = sorted((f"s{f}:{k}", f, k) for f in range(len(files)) for k in range(rows))
    return np.array([f for _, f, _ in ids], dtype=np.int32), np.array([k for _, _, k in ids], dtype=np.int64)


def _whole_table_shard(files, file_idx, row_idx, mc, out: Path, val_permille: int, limit: int, level: int) -> str:
    """The shard as one table, cut by `row_group_cuts` and written by `write_parquet`: the reference bytes."""
    whole = pa.concat_tables(
        [pq.read_table(p, columns=[c for c in SHARD_COLUMNS if c in pq.read_schema(p).names]) for p in files],
        promote_options="default",
    )
    offsets = np.concatenate([[0], np.cumsum([pq.ParquetFile(p).metadata.num_rows for p in files])])
    t = whole.take(pa.array(offsets[file_idx] + row_idx)).combine_chunks()
    if t["pii_redactions"].null_count:
        t = t.set_column(t.schema.get_field_index("pii_redactions"), "pii_redactions",
                         pa.array(np.nan_to_num(t["pii_redactions"].to_numpy(zero_copy_only=False)).astype(np.int32)))
    table = shard_table(t, mc, val_permille)
    cuts = row_group_cuts(row_sizes(table), limit)
    write_parquet(table, out, ParquetSettings(compression_level=level, use_dictionary=tuple(DICT_COLUMNS)), row_groups=cuts)
    return hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.parametrize("window", [1, 37, 256, 10_000])
def test_streamed_shard_has_the_bytes_of_the_whole_table(tmp_path, monkeypatch, window):
    files = _inputs(tmp_path)
    file_idx, row_idx = _plan(files, 700)
    mc = np.arange(len(file_idx), dtype=np.int64) // 3
    limit = 200_000  # many row groups, cut inside windows and across them
    monkeypatch.setattr(row_source, "WINDOW_ROWS", window)
    streamed = write_shard(files, file_idx, row_idx, mc, tmp_path / "streamed.parquet", 50, limit, 3)
    reference = _whole_table_shard(files, file_idx, row_idx, mc, tmp_path / "whole.parquet", 50, limit, 3)
    assert streamed["sha256"] == reference and streamed["rows"] == len(file_idx)
    assert pq.ParquetFile(tmp_path / "streamed.parquet").num_row_groups > 10


def test_a_row_over_the_limit_stands_alone_and_no_group_passes_it_otherwise(tmp_path):
    files = _inputs(tmp_path, n_files=1, rows=300)
    file_idx, row_idx = _plan(files, 300)
    limit = 30_000
    write_shard(files, file_idx, row_idx, np.zeros(len(file_idx), np.int64), tmp_path / "s.parquet", 0, limit, 1)
    pf = pq.ParquetFile(tmp_path / "s.parquet")
    for g in range(pf.num_row_groups):
        table = pf.read_row_group(g)
        total = int(row_sizes(table).sum())
        assert total <= limit or table.num_rows == 1


def test_each_input_row_group_is_read_once_and_dropped_after_its_last_row(tmp_path, count_row_group_reads):
    files = _inputs(tmp_path, n_files=2, rows=9000, with_pii=True)  # 5 row groups of 2,048 rows per file
    file_idx, row_idx = _plan(files, 9000)
    reads = count_row_group_reads()
    source = RowSource(files, file_idx, row_idx, ["id"])
    got = pa.concat_tables([t for _, t in source.windows(100)])
    expected = sorted(f"s{f}:{k}" for f in range(2) for k in range(9000))
    assert got["id"].to_pylist() == expected
    assert len(reads) == 10  # every row group of both files, once
    # ids sort by decimal prefix, so a few groups are live at once, not every group of the file
    assert source.peak_live_groups <= 6 and not source._live


def test_an_empty_shard_is_a_valid_file_with_no_rows(tmp_path):
    files = _inputs(tmp_path, n_files=1, rows=10)
    out = write_shard(files, np.array([], np.int32), np.array([], np.int64), np.array([], np.int64),
                      tmp_path / "empty.parquet", 0, 1000, 3)
    assert out["rows"] == 0 and pq.read_table(tmp_path / "empty.parquet").num_rows == 0
