"""Analysis logic units: exact groups, all-pairs buckets, greedy complete linkage, lengths, reuse of counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.analysis.clusters import complete_linkage
from corpus_dagster.analysis.exact import exact_representatives
from corpus_dagster.analysis.inputs import corpus_from_dir, corpus_from_sources
from corpus_dagster.analysis.lengths import length_tables
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.analysis.tokenizers import LengthTokenizer, load_tokenizers
from corpus_dagster.analysis.views import log_bins
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.settings import NearDupSettings
from corpus_dagster.lib.near_graph import graph_spec


def _cfg(**kw) -> dict:
    return load_settings(None, {"analysis": kw} if kw else None).analysis


def test_exact_representatives_smallest_row_of_identical_digests():
    d = np.zeros((5, 32), np.uint8)
    d[1, 31] = d[3, 31] = 7  # rows 1 and 3 equal; rows 0, 2, 4 equal
    d[2, 0] = d[0, 0] = d[4, 0] = 0
    d[4, 31] = 0
    assert exact_representatives(d).tolist() == [0, 1, 0, 1, 0]


def test_the_default_graph_reaches_the_recall_target_at_the_pair_threshold():
    spec = graph_spec(NearDupSettings(), _cfg().pair_threshold)
    assert (spec.bands, spec.rows, spec.threshold) == (32, 4, 0.7)
    assert spec.probability(0.7) >= 0.995 and spec.probability(0.8) > 0.999999


def test_complete_linkage_refuses_a_member_not_linked_to_all():
    # 0-1, 0-2 linked, 1-2 not: 2 cannot join {0, 1}; 2-3 linked, so {2, 3} is the next cluster.
    pairs = np.array([[0, 1], [0, 2], [2, 3]])
    jac = np.array([0.9, 0.8, 0.95])
    size = np.ones(4, np.int64)
    cs = complete_linkage(pairs, jac, 0.75, size, np.ones(4, bool))
    assert [c.tolist() for c in cs.reps] == [[0, 1], [2, 3]]
    assert cs.min_jaccard.tolist() == [0.9, 0.95]
    cs = complete_linkage(pairs, jac, 0.85, size, np.ones(4, bool))
    assert [c.tolist() for c in cs.reps] == [[0, 1], [2, 3]]


def test_complete_linkage_weights_exact_groups():
    # node 0 stands for 3 identical documents, node 5 for 1; their pair is 0.8.
    size = np.zeros(6, np.int64)
    size[0], size[5] = 3, 1
    cs = complete_linkage(np.array([[0, 5]]), np.array([0.8]), 0.7, size, np.ones(6, bool))
    assert cs.docs.tolist() == [4] and cs.min_jaccard.tolist() == [0.8]
    assert cs.mean_jaccard[0] == pytest.approx((3 * 1.0 + 3 * 0.8) / 6)


def test_log_bins_cover_zero_and_max():
    edges = log_bins(1000, 10)
    assert edges[0] == 0 and edges[1] == 1 and edges[-1] > 1000 and (np.diff(edges) > 0).all()


def test_length_tables_percentiles_and_histogram_per_scope():
    counts = np.array([0, 1, 10, 100, 1000])
    summary, hist = length_tables("tok", counts, np.array([0, 0, 1, 1, 1]), ["b", "a"],
                                  np.zeros(5, np.int64), ["all"], 8)
    rows = {(r["scope"], r["key"]): r for r in summary.to_pylist()}
    assert rows[("overall", "all")]["total"] == 1111 and rows[("overall", "all")]["max"] == 1000
    assert rows[("overall", "all")]["p50"] == 10.0
    assert rows[("source", "a")]["docs"] == 3 and rows[("source", "b")]["total"] == 1
    assert [r["key"] for r in summary.to_pylist() if r["scope"] == "source"] == ["a", "b"]
    assert set(hist.column("tokenizer").to_pylist()) == {"tok"}
    overall = [r for r in hist.to_pylist() if r["scope"] == "overall"]
    assert sum(r["docs"] for r in overall) == 5 and overall[0]["docs"] == 1  # the empty document


def test_unknown_tokenizer_is_an_error():
    with pytest.raises(AnalysisError, match="neither a known encoding"):
        LengthTokenizer("no-such-tokenizer")
    with pytest.raises(AnalysisError, match="same tokenizer name"):
        load_tokenizers(["cl100k", "cl100k_base"])


def _corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    texts = ["alpha beta gamma delta epsilon zeta", "same text twice here", "same text twice here",
             "Ünïcode wörds ärë tokenized differently by each tokenizer, eh?", "x"]
    pq.write_table(pa.table({"id": [f"s:{i}" for i in range(5)], "text": texts, "source_id": ["s"] * 5,
                             "split": ["train", "train", "val", "train", "train"]}), folder / "p.parquet")
    return folder


def test_two_tokenizers_each_named_and_duplicates_tokenized_once(tmp_path):
    corpus = _corpus(tmp_path / "in")
    res = run_analysis(corpus_from_dir(corpus), tmp_path / "out", _cfg(tokenizers=["cl100k", "o200k"]))
    lengths = res["steps"]["lengths"]
    assert lengths["tokenizers"] == ["cl100k_base", "o200k_base"]
    assert lengths["tokenized_docs"] == {"cl100k_base": 4, "o200k_base": 4}  # 5 docs, 4 distinct texts
    counts = pq.read_table(tmp_path / "out" / "doc_token_counts.parquet").to_pylist()
    by = {(r["tokenizer"], r["id"]): r["n_tokens"] for r in counts}
    assert by[("cl100k_base", "s:1")] == by[("cl100k_base", "s:2")] > 0
    summary = pq.read_table(tmp_path / "out" / "token_lengths.parquet").to_pylist()
    assert {(r["tokenizer"], r["scope"], r["key"]) for r in summary} >= {
        ("cl100k_base", "split", "val"), ("o200k_base", "source", "s")}
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert "cl100k_base" in report and "o200k_base" in report and "lower bounds" in report


def test_token_counts_of_the_streams_are_reused(tmp_path):
    corpus = _corpus(tmp_path / "in")
    tok_dir = tmp_path / "tokens"
    tok_dir.mkdir()
    known = {"s:0": 6, "s:1": 4, "s:2": 4, "s:3": 20, "s:4": 1}
    pq.write_table(pa.table({"id": list(known), "n_tokens": pa.array([v + 1 for v in known.values()], pa.int32()),
                             "tokenizer": ["cl100k_base"] * 5, "split": ["train"] * 5}), tok_dir / "token_counts.parquet")
    (tok_dir / "_TOKENS.json").write_text(json.dumps({"tokenizer": {"special_tokens": {"eod": {}, "bos": None}}}))
    res = run_analysis(corpus_from_sources({"s": [corpus / "p.parquet"]}), tmp_path / "out", _cfg(),
                       token_counts=[tok_dir / "token_counts.parquet"])
    assert res["steps"]["lengths"]["tokenized_docs"] == {"cl100k_base": 0}
    counts = pq.read_table(tmp_path / "out" / "doc_token_counts.parquet").to_pylist()
    assert {r["id"]: r["n_tokens"] for r in counts} == known  # the EOD the streams add is subtracted


def test_dedup_signature_files_are_reused(tmp_path):
    from corpus_dagster.analysis.planted import planted_corpus
    from corpus_dagster.minhash.signatures import compute_signatures
    from verify.rescore_sample import check_duplicates_sample

    p = planted_corpus(300, seed=3, near_share=0.3)
    (tmp_path / "in").mkdir()
    doc_file = tmp_path / "in" / "docs.parquet"
    pq.write_table(p.table, doc_file)
    compute_signatures([doc_file], tmp_path / "sig.parquet", NearDupSettings())
    out = tmp_path / "out"
    res = run_analysis(corpus_from_sources({"src": [doc_file]}), out, _cfg(),
                       signature_files=[tmp_path / "sig.parquet"], steps=["duplicates"])
    assert res["steps"]["scan"]["signatures"] == "reused from dedup signature files"
    assert res["steps"]["jaccard"]["verified_pairs"] > 20
    assert check_duplicates_sample([doc_file], out / "doc_duplicates_t70", 0.7, sample=300)["passed"]
    with pytest.raises(AnalysisError, match="at least 200 values"):
        run_analysis(corpus_from_sources({"src": [doc_file]}), tmp_path / "out2", _cfg(),
                     near=NearDupSettings(num_perm=256, bands=40, rows=5),
                     signature_files=[tmp_path / "sig.parquet"], steps=["candidates"])
