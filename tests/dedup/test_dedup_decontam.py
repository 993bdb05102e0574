"""Decontamination: exactly the documents sharing an `ngram`-word n-gram with a protected set are dropped."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dedup_factory import dedup_cfg, make_sources, random_doc

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.dedup.corpus_dedup import run_dedup
from corpus_dagster.dedup.decontam import find_contaminated
from corpus_dagster.dedup.protected import build_protected_index, protected_set_specs, read_protected_texts
from corpus_dagster.lib.text import words


def ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    ws = words(text)
    return [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]


def write_jsonl(path: Path, texts: list[str], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({field: t, "label": 1}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_drops_exactly_the_documents_sharing_a_13_gram(tmp_path: Path) -> None:
    rng = random.Random(11)
    protected = [random_doc(rng, 40) for _ in range(20)]
    eval_file = write_jsonl(tmp_path / "eval.jsonl", protected)
    docs = []
    for i in range(200):
        body = random_doc(rng, 60).split(" ")
        src = protected[i % 20].split(" ")
        span = rng.choice([11, 12, 13, 14, 20])
        start = rng.randrange(0, 40 - span + 1)
        if i % 3:  # two thirds carry a protected span of 11..20 words, re-cased and re-punctuated
            window = [
                w.upper() if rng.random() < 0.3 else w + rng.choice(["", ",", "."])
                for w in src[start : start + span]
            ]
            at = rng.randrange(0, 61)
            body[at:at] = window
        docs.append(" ".join(body))
    # one document holds the end of protected doc 0 and the start of doc 1: 13 words, but no single
    # protected document contains them in a row, so it is not contamination.
    docs.append(" ".join(protected[0].split(" ")[-7:] + protected[1].split(" ")[:6]))
    cfg = dedup_cfg(protected_sets=[{"name": "evalset", "path": str(eval_file)}])
    sources = make_sources(tmp_path, {"web": docs})
    stats = run_dedup(sources, cfg, tmp_path / "out")
    protected_grams = {g for t in protected for g in ngrams(t, 13)}
    truth = {f"web:{k}" for k, t in enumerate(docs) if set(ngrams(t, 13)) & protected_grams}
    dropped = pq.read_table(tmp_path / "out" / "dropped.parquet").to_pylist()
    assert {r["id"] for r in dropped} == truth
    assert 0 < len(truth) < len(docs) - 60
    assert stats["decontaminated"] == len(truth) and stats["decontaminated_by_set"] == {"evalset": len(truth)}
    for r in dropped:
        k = int(r["id"].split(":")[1])
        first = next(g for g in ngrams(docs[k], 13) if g in protected_grams)
        assert r["reason"] == "decontaminated" and r["matched_id"] is None and r["jaccard"] is None
        assert r["detail"] == "evalset: " + " ".join(first)


def test_first_set_in_config_order_is_named_and_formats_are_read(tmp_path: Path) -> None:
    shared = "one two three four five six seven eight nine ten eleven twelve thirteen"
    only_b = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu"
    pq.write_table(pa.table({"question": [shared, None]}), tmp_path / "a.parquet")
    (tmp_path / "b-1.txt").write_text(f"\n{only_b}\n\n", encoding="utf-8")
    write_jsonl(tmp_path / "b-2.jsonl", [shared], field="prompt")
    cfg = dedup_cfg(
        ngram=13,
        protected_sets=[
            {"name": "a", "path": str(tmp_path / "a.parquet"), "field": "question"},
            {"name": "b", "path": str(tmp_path / "b-*"), "field": "prompt"},
        ],
    )
    index = build_protected_index(cfg)
    texts = [f"intro {only_b.upper()} then {shared}", f"{shared}!", "nothing here " + only_b[:-3], None]
    found = find_contaminated(pa.array(texts), index)
    assert [(c.row, c.set_name, c.ngram) for c in found] == [(0, "b", only_b), (1, "a", shared)]


def test_protected_texts_shorter_than_ngram_never_match(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "e.jsonl", ["just a short question"])
    index = build_protected_index(
        dedup_cfg(protected_sets=[{"name": "e", "path": str(tmp_path / "e.jsonl")}])
    )
    assert len(index.hashes) == 0
    assert find_contaminated(["just a short question"], index) == []


def test_protected_set_errors_name_the_set_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{broken\n', encoding="utf-8")
    with pytest.raises(DedupInputError, match=r"protected set 'x': .*bad.jsonl, line 2: not JSON"):
        read_protected_texts({"name": "x", "path": str(bad), "format": None, "field": "text"})
    nofield = write_jsonl(tmp_path / "nofield.jsonl", ["a"], field="other")
    with pytest.raises(DedupInputError, match=r"line 1: no string field 'text'"):
        read_protected_texts({"name": "x", "path": str(nofield), "format": "jsonl", "field": "text"})
    with pytest.raises(DedupInputError, match="no file at"):
        read_protected_texts(
            {"name": "x", "path": str(tmp_path / "missing-*.jsonl"), "format": None, "field": "text"}
        )
    pq.write_table(pa.table({"q": ["a"]}), tmp_path / "p.parquet")
    with pytest.raises(DedupInputError, match="no column 'text'"):
        read_protected_texts(
            {"name": "x", "path": str(tmp_path / "p.parquet"), "format": None, "field": "text"}
        )


def test_protected_set_names_must_be_unique_and_defaults_come_from_the_schema(tmp_path: Path) -> None:
    spec = {"name": "x", "path": "p.jsonl"}
    assert protected_set_specs(dedup_cfg(protected_sets=[spec])) == [
        {**spec, "format": None, "field": "text"}
    ]
    with pytest.raises(DedupInputError, match="unique"):
        protected_set_specs(dedup_cfg(protected_sets=[spec, spec]))


def test_no_protected_sets_drops_nothing(tmp_path: Path) -> None:
    rng = random.Random(2)
    docs = [random_doc(rng, 30) for _ in range(10)]
    stats = run_dedup(make_sources(tmp_path, {"s": docs}), dedup_cfg(), tmp_path / "out")
    assert stats["decontaminated"] == 0 and stats["decontaminated_by_set"] == {}


def test_index_lookup_agrees_with_set_membership() -> None:
    import numpy as np

    from corpus_dagster.dedup.protected import ProtectedIndex

    rng = np.random.default_rng(0)
    stored = np.unique(rng.integers(0, 2**64, 50_000, dtype=np.uint64))
    index = ProtectedIndex(
        13, ["x"], stored, np.zeros(len(stored), np.int32), np.zeros(len(stored), np.int64), []
    )
    queries = np.concatenate(
        [rng.integers(0, 2**64, 50_000, dtype=np.uint64), stored[::7], stored[-1:], stored[:1]]
    )
    hit, slot = index.lookup(queries)
    members = set(stored.tolist())
    assert hit.tolist() == [int(q) in members for q in queries]
    assert (stored[slot[hit]] == queries[hit]).all() and hit.sum() >= len(stored[::7]) + 2
