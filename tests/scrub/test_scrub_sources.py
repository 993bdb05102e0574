"""The scrub stage sends the files of every changed source through one pool (a corpus of many one-file
sources scrubs in parallel), commits each source's record, and writes the same bytes at any worker count."""

import dataclasses

import dagster as dg
import pytest
from corpus_factory import write_setup

from corpus_dagster.core import records
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.dedup import driver as dedup
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_sources
from corpus_dagster.scrub import driver as scrub
from corpus_dagster.scrub import outputs as scrub_outputs


@pytest.fixture(scope="module")
def deduped(tmp_path_factory):
    corpus = CorpusConfig(config_path=str(write_setup(tmp_path_factory.mktemp("scrub"))))
    materialize_sources(corpus, dg.DagsterInstance.ephemeral())
    layout = corpus.layout()
    settings = corpus.settings()
    ids = ["alpha", "beta", "gamma"]
    dedup.run_global_dedup(layout, settings, ids)
    return settings, layout, ids


def _hashes(layout, ids):
    return {sid: [sha256_file(p) for p in scrub_outputs.scrubbed_files(layout, sid)] for sid in ids}


def test_one_map_over_every_source_and_the_same_bytes_at_any_worker_count(deduped, monkeypatch):
    settings, layout, ids = deduped
    maps = []
    real_map = scrub.ordered_map

    def recording_map(fn, jobs, workers):
        jobs = list(jobs)
        maps.append(([str(job[0]) for job in jobs], workers))
        return real_map(fn, jobs, workers)

    monkeypatch.setattr(scrub, "ordered_map", recording_map)
    first = scrub.run_scrub(layout, dataclasses.replace(settings, workers=1))
    assert [s["cached"] for s in first.values()] == [False] * 3 and list(first) == ids
    one = _hashes(layout, ids)
    files = sum(len(p) for p in one.values())
    assert len(maps) == 1 and len(maps[0][0]) == files  # every source's files in one map

    again = scrub.run_scrub(layout, dataclasses.replace(settings, workers=1))
    assert all(s["cached"] for s in again.values()) and len(maps) == 1  # nothing changed: no map at all

    for sid in ids:  # drop the records so the same key is recomputed, now with 2 workers
        (layout.stage(scrub.STAGE, sid) / records.RECORD).unlink()
    rebuilt = scrub.run_scrub(layout, dataclasses.replace(settings, workers=2))
    assert not any(s["cached"] for s in rebuilt.values())
    assert _hashes(layout, ids) == one
    assert [s["docs"] for s in rebuilt.values()] == [s["docs"] for s in first.values()]


def test_read_table_gives_what_pyarrow_reads(tmp_path):
    # The clean stage's column types (strings, a list, fixed-size binary, int32, float), schema metadata
    # and several row groups; and a type polars reads back differently (uint8 in a dictionary), which
    # falls back to pyarrow. Either way the table is pyarrow's own.
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 5000
    table = pa.table({
        "id": [f"s:{i}" for i in range(n)],
        "text": ["é" * (i % 7) + f"text {i}" for i in range(n)],
        "n_chars": pa.array(range(n), pa.int32()),
        "sha256": pa.array([bytes([i % 256]) * 32 for i in range(n)], pa.binary(32)),
        "repairs": [[f"r{i}"] if i % 3 else [] for i in range(n)],
        "lang_score": pa.array([i / n for i in range(n)], pa.float32()),
    }).replace_schema_metadata({"k": "v"})
    odd = pa.table({"x": pa.array([1, 2, 1], pa.uint8()).dictionary_encode()})
    for name, t in (("docs.parquet", table), ("odd.parquet", odd)):
        path = tmp_path / name
        pq.write_table(t, path, row_group_size=2048)
        got, want = scrub.read_table(path), pq.read_table(path)
        assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
