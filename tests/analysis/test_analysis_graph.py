"""The analysis as views over dedup's near-duplicate graph: the same tables as scoring the pairs itself, no
pair scored twice, and a graph over other documents refused."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dedup_factory import make_sources, mutate, random_doc, sections

from corpus_dagster.analysis.inputs import corpus_from_sources
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.settings import NearDupSettings
from corpus_dagster.dedup.corpus_dedup import run_dedup
from corpus_dagster.lib.near_graph import GraphSpec

STEPS_TO_CLUSTERS = ["clusters"]


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(40):  # families of near duplicates from 0.5 to 0.95, unrelated documents between them
        base = random_doc(rng, 150)
        texts += [base] + [mutate(rng, base, rng.choice([1, 3, 6, 10, 16])) for _ in range(rng.randint(0, 3))]
        texts.append(random_doc(rng, rng.choice([3, 60, 200])))
    texts += texts[:5]  # exact copies
    return texts


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list, dict]:
    root = tmp_path_factory.mktemp("graph")
    cfg, near = sections()
    sources = make_sources(root, {"a": _texts(1), "b": _texts(2)}, near)
    stats = run_dedup(sources, cfg, root / "dedup", near=near)
    return root, sources, stats


def _spec(stats: dict) -> GraphSpec:
    return GraphSpec.from_dict(stats["graph"])


def _analysis_cfg():
    return load_settings(None).analysis


def _tables(out: Path) -> dict[str, bytes]:
    files = sorted(out.glob("doc_duplicates_t70/*.parquet")) + sorted(out.glob("near_dup_clusters_t*.jsonl"))
    return {p.name: p.read_bytes() for p in files + [out / "duplicate_groups.jsonl"]}


def test_the_graph_gives_the_tables_the_analysis_computes_itself(built, tmp_path: Path) -> None:
    root, sources, stats = built
    docs = corpus_from_sources({s.source_id: s.doc_files for s in sources})
    sigs = [s.signature_file for s in sources]
    own = run_analysis(docs, tmp_path / "own", _analysis_cfg(), signature_files=sigs, steps=STEPS_TO_CLUSTERS)
    read = run_analysis(docs, tmp_path / "read", _analysis_cfg(), near=NearDupSettings(), signature_files=sigs,
                        graph=(root / "dedup" / "pairs.parquet", _spec(stats)), steps=STEPS_TO_CLUSTERS)
    assert _tables(tmp_path / "own") == _tables(tmp_path / "read")
    assert own["steps"]["jaccard"]["verified_pairs"] == read["steps"]["jaccard"]["verified_pairs"] > 10
    assert read["steps"]["jaccard"]["source"] == "near-duplicate graph"
    assert read["steps"]["candidates"]["graph_pairs"] == stats["pairs_rows"]
    assert not (tmp_path / "read" / "_work" / "shingles.u64").exists()


def test_counts_read_from_the_signature_files_equal_reading_the_texts(built, tmp_path: Path) -> None:
    _root, sources, _stats = built
    docs = corpus_from_sources({s.source_id: s.doc_files for s in sources})
    counted_stats = run_analysis(docs, tmp_path / "counted", _analysis_cfg(), steps=["scan"])
    read_stats = run_analysis(docs, tmp_path / "read", _analysis_cfg(),
                              signature_files=[s.signature_file for s in sources], steps=["scan"])
    counted, read = (pq.read_table(tmp_path / d / "_work" / "docs.parquet") for d in ("counted", "read"))
    assert read.equals(counted)  # word and byte counts, digests: every column
    assert min(counted.column("n_words").to_pylist()) == 3 and min(counted.column("n_bytes").to_pylist()) > 0
    assert counted_stats["steps"]["scan"]["texts_read"] is True
    assert read_stats["steps"]["scan"]["texts_read"] is False  # the clean files' sha256 column, no text


def test_a_sha256_column_that_is_not_digests_is_refused(built, tmp_path: Path) -> None:
    _root, sources, _stats = built
    table = pq.read_table(sources[0].doc_files[0])
    bad = table.set_column(table.schema.get_field_index("sha256"), "sha256",
                           pa.array([b"short"] * table.num_rows, pa.binary()))
    pq.write_table(bad, tmp_path / "docs.parquet")
    docs = corpus_from_sources({sources[0].source_id: [tmp_path / "docs.parquet"]})
    with pytest.raises(AnalysisError, match="not 32 bytes"):
        run_analysis(docs, tmp_path / "out", _analysis_cfg(), signature_files=[sources[0].signature_file],
                     steps=["scan"])


def test_a_pair_is_scored_once_for_dedup_and_the_analysis(built) -> None:
    _root, _sources, stats = built
    assert stats["scored_pairs"] == stats["candidate_pairs"] - stats["signature_filtered"] >= stats["pairs_rows"] > 0
    assert stats["graph"]["bands"] * stats["graph"]["rows"] <= stats["graph"]["num_perm"]
    assert stats["settings"]["bands"] == stats["graph"]["bands"]


def test_a_graph_over_other_documents_is_refused(built, tmp_path: Path) -> None:
    root, sources, stats = built
    only_a = corpus_from_sources({"a": sources[0].doc_files})
    with pytest.raises(AnalysisError, match="computed over other documents than the analysis reads"):
        run_analysis(only_a, tmp_path / "out", _analysis_cfg(), graph=(root / "dedup" / "pairs.parquet", _spec(stats)),
                     steps=["candidates"])


def test_a_graph_above_the_pair_threshold_is_refused(built, tmp_path: Path) -> None:
    root, sources, stats = built
    docs = corpus_from_sources({s.source_id: s.doc_files for s in sources})
    high = GraphSpec(0.8, 25, 5, 128, 5)
    with pytest.raises(AnalysisError, match="keeps pairs from Jaccard 0.8, above analysis.pair_threshold"):
        run_analysis(docs, tmp_path / "out", _analysis_cfg(), graph=(root / "dedup" / "pairs.parquet", high))


def test_the_graph_holds_pairs_of_decontaminated_documents_that_dedup_never_merges(tmp_path: Path) -> None:
    rng = random.Random(5)
    base = random_doc(rng, 200)
    twin = mutate(rng, base, 2)
    protected = " ".join(base.split(" ")[50:70])
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text(json.dumps({"text": protected}) + "\n")
    cfg, near = sections(protected_sets=[{"name": "ev", "path": str(eval_file)}])
    sources = make_sources(tmp_path, {"s": [base, twin, random_doc(rng, 100)]}, near)
    stats = run_dedup(sources, cfg, tmp_path / "out", near=near)
    pairs = pq.read_table(tmp_path / "out" / "pairs.parquet").to_pylist()
    assert [(p["id_a"], p["id_b"]) for p in pairs] == [("s:0", "s:1")]  # both carry the protected passage
    assert pairs[0]["intersection"] * 1.0 / pairs[0]["union"] == pytest.approx(pairs[0]["jaccard"])
    assert stats["decontaminated"] == 2 and stats["near_dropped"] == 0 and stats["verified_pairs"] == 0


def test_the_agreement_filter_sets_aside_only_pairs_below_the_threshold(tmp_path: Path, monkeypatch) -> None:
    import corpus_dagster.lib.near_graph as near_graph

    cfg, near = sections()
    sources = make_sources(tmp_path, {"a": _texts(3), "b": _texts(4)}, near)
    filtered = run_dedup(sources, cfg, tmp_path / "filtered", near=near)
    monkeypatch.setattr(near_graph, "AGREEMENT_MISS", 0.0)  # floor 0: every candidate scored
    everything = run_dedup(sources, cfg, tmp_path / "everything", near=near)
    for name in ("pairs", "dropped", "clusters"):
        assert (tmp_path / "filtered" / f"{name}.parquet").read_bytes() == (
            tmp_path / "everything" / f"{name}.parquet").read_bytes(), name
    assert everything["signature_filtered"] == 0 and everything["scored_pairs"] == everything["candidate_pairs"]
    assert filtered["candidate_pairs"] == everything["candidate_pairs"]
    assert filtered["scored_pairs"] < everything["scored_pairs"] and filtered["shingled_docs"] < everything["shingled_docs"]
