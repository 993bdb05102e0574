"""The scrub stage cuts a file larger than its share of the work into row slices when workers > 1; the file it
writes has the bytes of the uncut scrub, also when dedup dropped rows and the file has several row groups."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pyarrow as pa

from corpus_dagster.clean.driver import CLEAN_DOC_SCHEMA
from corpus_dagster.core.parquet import INTERMEDIATE, write_parquet
from corpus_dagster.scrub import default_pii_config
from corpus_dagster.scrub import driver as scrub
from tests.corpus_factory import document

PII = ("Mail jane.doe@harbor-mail.net or call (202) 555-0143.", "Server at 81.2.69.160 answered.", "")


def _clean_file(path: Path, n: int) -> Path:
    rng = random.Random(3)
    texts = [document(rng, rng.randint(1, 4)) + " " + PII[i % 3] for i in range(n)]
    table = pa.table({
        "id": [f"src:{i}" for i in range(n)], "text": texts, "source_id": ["src"] * n,
        "url": [f"https://x.example/{i}" for i in range(n)], "license_spdx": ["MIT"] * n, "lang": ["en"] * n,
        "n_chars": pa.array([len(t) for t in texts], pa.int32()),
        "sha256": pa.array([hashlib.sha256(t.encode()).digest() for t in texts], pa.binary(32)),
        "repairs": pa.array([[] for _ in texts], pa.list_(pa.string())),
        "lang_score": pa.array([0.9] * n, pa.float32()), "lang_sample_chars": pa.array([100] * n, pa.int32()),
    }, schema=CLEAN_DOC_SCHEMA)
    write_parquet(table, path, INTERMEDIATE)  # 2,048 rows per row group: three groups
    return path


def test_a_large_file_is_scrubbed_in_slices_with_the_bytes_of_the_whole_file(tmp_path, monkeypatch):
    src = _clean_file(tmp_path / "docs-00000.parquet", 5000)
    small = _clean_file(tmp_path / "docs-00001.parquet", 30)
    drop = sorted(f"src:{i}" for i in range(0, 5000, 7))  # dropped rows unalign the chunks from the row groups
    cfg = default_pii_config()
    whole = scrub.scrub_file(src, tmp_path / "whole.parquet", drop, cfg)
    monkeypatch.setattr(scrub, "MIN_SLICE_BYTES", 1)
    assert len(scrub.row_slices(src, 3)) == 3
    jobs = [(src, tmp_path / "sliced.parquet", drop, cfg), (small, tmp_path / "small.parquet", [], cfg)]
    stats = list(scrub._scrub_files(jobs, 2))  # a real pool of two processes
    assert (tmp_path / "sliced.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    for key in ("docs", "dropped", "docs_redacted", "pii", "preexisting", "bytes"):
        assert stats[0][key] == whole[key], key
    assert stats[0]["pii"]["emails"] > 1000 and stats[0]["pii"]["ips"] > 1000 and stats[0]["dropped"] == len(drop)
    assert stats[0]["examples"] and len(stats[0]["examples"]) <= cfg["max_examples"]
    assert stats[1]["docs"] == 30 and (tmp_path / "small.parquet").exists()


def test_row_slices_cover_every_row_in_order(tmp_path):
    src = _clean_file(tmp_path / "docs-00000.parquet", 300)
    for pieces in (1, 2, 5, 300, 1000):
        cuts = scrub.row_slices(src, pieces)
        assert cuts[0][0] == 0 and cuts[-1][1] == 300 and len(cuts) <= pieces
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(cuts, cuts[1:], strict=False))
    assert len(scrub.row_slices(src, 5)) == 5
