"""A pair whose exact Jaccard equals a threshold stays above it in every stored form of the analysis."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.analysis.views import NEAR_TYPE, float32_at_least
from corpus_dagster.core.config import load_settings
from verify._reference import corpus_files
from verify.cluster_jaccard import check_clusters
from verify.rescore_sample import check_duplicates_sample


def _words(lo: int, hi: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(lo, hi))


# 5-word shingles over distinct words: shingle i starts at word i. A has words 0..232 (shingles 0..228),
# B words 40..273 (shingles 40..269): 189 shared of 270, Jaccard 189/270 = 0.7 exactly, which float32
# rounded to nearest stores as 0.69999999.
DOC_A, DOC_B = _words(0, 233), _words(40, 274)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("exact")
    texts = [DOC_A, DOC_B] + [_words(0, 300, prefix=f"filler{k}x") for k in range(6)]
    ids = [f"doc{k:02d}" for k in range(len(texts))]
    table = pa.table({"id": ids, "source_id": ["s"] * len(texts), "text": texts})
    (root / "in").mkdir()
    pq.write_table(table, root / "in" / "shard_00000.parquet")
    cfg = load_settings(None, {"analysis": {"bands": 32, "rows": 4}}).analysis
    run_analysis(corpus_from_dir(root / "in"), root / "out", cfg, steps=["clusters"])
    return root / "in", root / "out", cfg


def _near(out: Path) -> dict[str, list[dict]]:
    rows = pq.read_table(out / "doc_duplicates_t70").to_pylist()
    return {r["doc_id"]: r["near_duplicates"] for r in rows}


def test_pair_at_exactly_the_threshold_passes_a_float_and_an_integer_filter(analysed):
    _, out, _ = analysed
    near = _near(out)
    assert set(near) == {"doc00", "doc01"}
    for me, other in (("doc00", "doc01"), ("doc01", "doc00")):
        (entry,) = near[me]
        assert entry["doc_id"] == other
        assert entry["jaccard"] >= 0.7
        assert (entry["intersection"], entry["union"]) == (189, 270)
        assert np.float32(entry["jaccard"]) >= np.float32(0.7)
        assert entry["intersection"] * 100 >= 70 * entry["union"]
        assert Fraction(entry["jaccard"]) >= Fraction(189, 270)


def test_near_struct_keeps_the_contract_fields_first(analysed):
    _, out, _ = analysed
    near_type = pq.read_schema(next((out / "doc_duplicates_t70").glob("*.parquet"))).field("near_duplicates").type
    assert near_type.value_type == NEAR_TYPE
    assert [f.name for f in NEAR_TYPE] == ["doc_id", "jaccard", "intersection", "union"]
    assert [str(f.type) for f in NEAR_TYPE] == ["string", "float", "int32", "int32"]


def test_cluster_file_min_reaches_the_threshold_and_verify_scripts_pass(analysed):
    corpus, out, cfg = analysed
    (line,) = [json.loads(x) for x in (out / "near_dup_clusters_t70.jsonl").read_text().splitlines()]
    assert line["doc_ids"] == ["doc00", "doc01"] and line["min_jaccard"] >= 0.7
    assert (out / "near_dup_clusters_t80.jsonl").read_text() == ""
    files = corpus_files(corpus, out)
    assert check_clusters(files, out / "near_dup_clusters_t70.jsonl", 0.7)["passed"]
    res = check_duplicates_sample(files, out / "doc_duplicates_t70", 0.7, cfg.verify_sample, 0)
    assert res["passed"], res["failures"]
    assert res["pairs_scored"] == 2


def test_rescore_catches_a_wrong_intersection(analysed, tmp_path):
    corpus, out, _ = analysed
    (tmp_path / "dup").mkdir()
    for part in sorted((out / "doc_duplicates_t70").glob("*.parquet")):
        rows = pq.read_table(part).to_pylist()
        for r in rows:
            for n in r["near_duplicates"]:
                n["intersection"] -= 1
        pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(part)), tmp_path / "dup" / part.name)
    res = check_duplicates_sample(corpus_files(corpus, out), tmp_path / "dup", 0.7, 200, 0)
    assert not res["passed"] and any("intersection/union" in f for f in res["failures"])


def test_float32_at_least_is_the_smallest_float32_not_below_the_ratio():
    rng = random.Random(5)
    dens = [rng.randrange(1, 1000) for _ in range(3000)] + [rng.randrange(1, 1 << 28) for _ in range(3000)]
    dens += [rng.randrange(1 << 29, 1 << 31) for _ in range(50)]  # the exact-rational fallback
    nums = [rng.randrange(0, d + 1) for d in dens]
    nums[:200] = [d * rng.randrange(1, 100) // 100 for d in dens[:200]]  # many two-decimal ratios
    nums.append(189)
    dens.append(270)
    got = float32_at_least(np.array(nums), np.array(dens))
    assert got.dtype == np.float32
    for p, q, f in zip(nums, dens, got.tolist(), strict=True):
        exact = Fraction(p, q)
        assert Fraction(f) >= exact, (p, q)
        below = np.nextafter(np.float32(f), np.float32(-np.inf))
        assert f == 0.0 or Fraction(float(below)) < exact, (p, q)
    assert float(got[-1]) >= 0.7 > float(np.float32(189 / 270))  # nearest rounding falls below 0.7
    assert float32_at_least(np.array([0, 5, 3]), np.array([0, 0, 3])).tolist() == [0.0, 0.0, 1.0]


def test_float32_at_least_at_every_two_decimal_threshold():
    for t100 in range(1, 101):
        for union in (100, 270, 999, 12345, 1 << 20):
            if (t100 * union) % 100:
                continue
            inter = t100 * union // 100
            f = float32_at_least(np.array([inter]), np.array([union]))[0]
            assert float(f) >= t100 / 100, (t100, union)
