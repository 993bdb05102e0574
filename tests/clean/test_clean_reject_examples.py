"""The rejected examples the clean asset's metadata shows: read only the rows they show, the same rows a full
read would pick."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.clean import outputs as clean_outputs


def _write(path, rows: list[dict], row_group: int) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=clean_driver.REJECT_SCHEMA), path, row_group_size=row_group)


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

    expected = clean_outputs.reject_examples(None, "s")  # no reason counts: reads every reject
    full_rows = sum(counts.values())
    monkeypatch.setattr(clean_outputs.pq, "ParquetFile", Counting)
    early = clean_outputs.reject_examples(None, "s", counts)
    assert early == expected
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

    monkeypatch.setattr(clean_outputs.pq, "ParquetFile", Counting)
    examples = clean_outputs.reject_examples(None, "s", {"a": 5000, "b": 5000})
    assert [r["id"] for r in examples] == ["00000", "00001", "00002", "00003", "00004", "00005"]
    assert read == [clean_outputs.REJECT_SCAN_ROWS]


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

    monkeypatch.setattr(clean_outputs.pq, "ParquetFile", Counting)
    assert clean_outputs.texts_at(path, [1, 7, 4500]) == ["t1", "t7", "t4500"]
    assert groups == [0, 2]
    assert clean_outputs.texts_at(path, []) == []
