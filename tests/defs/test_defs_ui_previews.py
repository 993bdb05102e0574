"""UI previews read only the rows they show, and show the same rows as a full read would."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.core.parquet import head_rows


def _write(path, rows: list[dict], row_group: int) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=clean_driver.REJECT_SCHEMA), path, row_group_size=row_group)


@pytest.mark.parametrize("n", [0, 1, 3, 10, 500])
def test_head_rows_is_the_start_of_a_full_read(tmp_path, n):
    rows = [{"id": f"{i:05d}", "url": None, "reason": "x", "value": float(i), "text": "t" * (i % 50)} for i in range(300)]
    _write(tmp_path / "a.parquet", rows, row_group=64)
    full = pq.read_table(tmp_path / "a.parquet", columns=["id", "text"]).slice(0, n).to_pylist()
    assert head_rows(tmp_path / "a.parquet", ["id", "text"], n) == full


def test_head_rows_of_an_empty_file(tmp_path):
    _write(tmp_path / "e.parquet", [], row_group=64)
    assert head_rows(tmp_path / "e.parquet", ["id"], 5) == []
