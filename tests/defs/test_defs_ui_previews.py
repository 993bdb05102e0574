"""UI previews read only the rows they show, and show the same rows as a full read would."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.clean import outputs as clean_outputs
from corpus_dagster.core.parquet import head_rows
from corpus_dagster.core.settings import CleanSettings
from corpus_dagster.defs import clean as clean_defs


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


def _full_scan_preview(layout, sid, cfg):
    return clean_defs.rejected_preview(layout, sid, cfg)  # no reason counts: reads every reject


@pytest.mark.parametrize("seed", range(4))
def test_rejected_preview_stops_early_with_the_same_examples(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    reasons = ["lang", "gopher_short", "repetition_lines", "ppl_high"]
    files, counts = [], {}
    for f in range(3):  # several files, several scan batches each, one rare reason only near the end
        rows = []
        for i in range(rng.randint(100, 900)):
            reason = rng.choice(reasons[:3]) if not (f == 2 and i > 50 and rng.random() < 0.01) else reasons[3]
            counts[reason] = counts.get(reason, 0) + 1
            rows.append({"id": f"{f}-{i:05d}", "url": None, "reason": reason, "value": rng.random(), "text": "w " * 30})
        path = tmp_path / f"rejects-{f:05d}.parquet"
        _write(path, rows, row_group=128)
        files.append(path)
    monkeypatch.setattr(clean_outputs, "reject_files", lambda layout, sid: files)
    read: list = []
    real = pq.ParquetFile

    class Counting(real):  # counts the batches the preview decodes
        def iter_batches(self, *a, **k):
            for b in super().iter_batches(*a, **k):
                read.append(b.num_rows)
                yield b

    expected = _full_scan_preview(None, "s", CleanSettings())
    full_rows = sum(counts.values())
    monkeypatch.setattr(clean_defs.pq, "ParquetFile", Counting)
    early = clean_defs.rejected_preview(None, "s", CleanSettings(), counts)
    assert early.records == expected.records
    assert sum(read) <= full_rows
    seen_rare = counts.get("ppl_high", 0)
    if not seen_rare:  # no rare reason: the first batch of the first file has every other reason's examples
        assert sum(read) < full_rows


def test_rejected_preview_stops_after_the_first_batch_when_it_has_every_example(tmp_path, monkeypatch):
    rows = [{"id": f"{i:05d}", "url": None, "reason": ["a", "b"][i % 2], "value": 1.0, "text": "x"} for i in range(5000)]
    path = tmp_path / "rejects-00000.parquet"
    _write(path, rows, row_group=2048)
    monkeypatch.setattr(clean_outputs, "reject_files", lambda layout, sid: [path, path])
    read: list = []
    real = pq.ParquetFile

    class Counting(real):
        def iter_batches(self, *a, **k):
            for b in super().iter_batches(*a, **k):
                read.append(b.num_rows)
                yield b

    monkeypatch.setattr(clean_defs.pq, "ParquetFile", Counting)
    preview = clean_defs.rejected_preview(None, "s", CleanSettings(), {"a": 5000, "b": 5000})
    assert [r.data["id"] for r in preview.records] == ["00000", "00002", "00004", "00001", "00003", "00005"]
    assert read == [clean_defs.REJECT_SCAN_ROWS]


def test_texts_at_reads_only_the_row_groups_of_the_picked_rows(tmp_path, monkeypatch):
    rows = [{"id": f"{i:05d}", "url": None, "reason": "a", "value": 1.0, "text": f"t{i}"} for i in range(5000)]
    path = tmp_path / "rejects-00000.parquet"
    _write(path, rows, row_group=2048)  # row groups [0, 2048) [2048, 4096) [4096, 5000)
    groups: list[int] = []
    real = pq.ParquetFile

    class Counting(real):
        def read_row_group(self, i, *a, **k):
            groups.append(i)
            return super().read_row_group(i, *a, **k)

    monkeypatch.setattr(clean_defs.pq, "ParquetFile", Counting)
    assert clean_defs.texts_at(path, [1, 7, 4500]) == ["t1", "t7", "t4500"]
    assert groups == [0, 2]
    assert clean_defs.texts_at(path, []) == []
