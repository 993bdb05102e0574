"""The dedup test helpers themselves: the clean schema they write, the Jaccard range their mutations reach."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pyarrow.parquet as pq
from dedup_factory import mutate, random_doc, true_jaccard, write_clean_docs

from corpus_dagster.clean.driver import CLEAN_DOC_SCHEMA


def test_write_clean_docs_follows_the_clean_schema(tmp_path: Path) -> None:
    path = write_clean_docs(tmp_path / "d.parquet", "s", ["one two", "three"])
    table = pq.read_table(path)
    assert table.schema.equals(CLEAN_DOC_SCHEMA)
    assert table.column("id").to_pylist() == ["s:0", "s:1"]
    assert table.column("sha256")[0].as_py() == hashlib.sha256(b"one two").digest()


def test_mutate_reaches_the_planned_jaccard_range() -> None:
    rng = random.Random(3)
    base = random_doc(rng, 200)
    assert true_jaccard(base, base) == 1.0
    assert 0.6 < true_jaccard(base, mutate(rng, base, 10)) < 0.9
