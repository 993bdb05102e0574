"""The clean stage cuts a source with fewer raw parts than workers into slices: same bytes as whole parts."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest

from corpus_dagster.clean import driver as clean
from corpus_dagster.core.config import load_config
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.driver import fetch_source, raw_parts
from corpus_dagster.ingest.raw_parts import raw_record_sizes, read_raw_part
from tests.corpus_factory import document

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)


def _source(tmp_path: Path, n: int) -> Path:
    rng = random.Random(5)
    rows = []
    for i in range(n):  # kept prose, short texts Gopher drops, and non-English: every outcome in each slice
        text = document(rng) if i % 3 else ("short" if i % 2 else "Le chat est sur la table et il dort. " * 20)
        rows.append(json.dumps({"text": text, "url": f"https://x.example/{i}"}))
    path = tmp_path / "one.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _clean_files(tmp_path: Path, workers: int, name: str) -> dict[str, bytes]:
    resolved = load_config(None, {"paths": {"artifacts": str(tmp_path / name)}, "workers": workers})
    layout = Layout.from_config(resolved)
    fetch_source(Source("one", (f"file://{_source(tmp_path, 90)}",), "jsonl", "MIT", url_field="url"), layout,
                 resolved["ingest"], now=NOW)
    stats = clean.run_clean_source(layout, "one", resolved)
    assert stats["docs_in"] == 90 and stats["kept"] and stats["rejected"]
    folder = layout.stage("clean", "one") / stats["key"]
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


def test_a_one_part_source_is_cleaned_in_slices_with_the_bytes_of_the_whole_part(tmp_path, monkeypatch):
    monkeypatch.setattr(clean, "MIN_SLICE_BYTES", 2048)
    calls = []
    real = clean.clean_slice
    monkeypatch.setattr(clean, "clean_slice", lambda *a: calls.append(a[1:3]) or real(*a))
    whole = _clean_files(tmp_path, 1, "w1")
    assert calls == [(0, None)]  # one worker: the part whole
    calls.clear()
    # two workers, one part: four slices (two per worker), run inline here (the patched function is local)
    monkeypatch.setattr(clean, "ordered_map", lambda fn, jobs, workers: (fn(*j) for j in jobs))
    sliced = _clean_files(tmp_path, 2, "w2")
    assert len(calls) == 4 and calls[0][0] == 0 and calls[-1][1] == 90
    assert all(a[1] == b[0] for a, b in zip(calls, calls[1:], strict=False))  # contiguous, in order
    assert sliced == whole and set(whole) == {"docs-00000.parquet", "rejects-00000.parquet"}


def test_sliced_clean_through_a_real_pool_gives_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(clean, "MIN_SLICE_BYTES", 1)  # read again in the pool processes: only the parent cuts
    assert _clean_files(tmp_path, 2, "w2") == _clean_files(tmp_path, 1, "w1")


def test_part_slices_balance_bytes_and_cover_every_record(tmp_path, monkeypatch):
    resolved = load_config(None, {"paths": {"artifacts": str(tmp_path / "a")}})
    layout = Layout.from_config(resolved)
    fetch_source(Source("one", (f"file://{_source(tmp_path, 90)}",), "jsonl", "MIT", url_field="url"), layout,
                 resolved["ingest"], now=NOW)
    (part,), _, _ = raw_parts(layout, "one")
    sizes = raw_record_sizes(part)
    assert len(sizes) == 90
    monkeypatch.setattr(clean, "MIN_SLICE_BYTES", 1)
    cuts = clean.part_slices(part, 3)
    assert cuts[0][0] == 0 and cuts[-1][1] == 90 and len(cuts) == 3
    shares = [sum(sizes[a:b]) / sum(sizes) for a, b in cuts]
    assert all(0.2 < s < 0.5 for s in shares), shares
    assert [r["url"] for a, b in cuts for r in read_raw_part(part, a, b)] == [r["url"] for r in read_raw_part(part)]
    monkeypatch.setattr(clean, "MIN_SLICE_BYTES", 1 << 30)  # too small a part to cut
    assert clean.part_slices(part, 3) == [(0, 90)]


@pytest.mark.parametrize("start,stop", [(0, 0), (89, None), (10, 20), (95, None)])
def test_read_raw_part_ranges(tmp_path, start, stop):
    resolved = load_config(None, {"paths": {"artifacts": str(tmp_path / "a")}})
    layout = Layout.from_config(resolved)
    fetch_source(Source("one", (f"file://{_source(tmp_path, 90)}",), "jsonl", "MIT", url_field="url"), layout,
                 resolved["ingest"], now=NOW)
    (part,), _, _ = raw_parts(layout, "one")
    every = list(read_raw_part(part))
    assert list(read_raw_part(part, start, stop)) == every[start:stop]
