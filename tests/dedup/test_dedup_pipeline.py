"""run_dedup end to end: planted near duplicates, keep rules, modes, order of operations, determinism."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dedup_factory import make_sources, mutate, random_doc, sections, true_jaccard, write_clean_docs

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.dedup.corpus_dedup import (
    CLUSTERS_SCHEMA,
    DROPPED_SCHEMA,
    PAIRS_SCHEMA,
    DedupSource,
    run_dedup,
)
from corpus_dagster.minhash.signatures import compute_signatures

TARGETS = [0.5, 0.65, 0.75, 0.8, 0.85, 0.87, 0.9, 0.92, 0.95, 0.98]


def edits_for(n_words: int, target: float, k: int = 5) -> int:
    """Word replacements that bring a copy to about `target` Jaccard (each edit changes up to k shingles)."""
    shingles = n_words - k + 1
    return max(1, round(shingles * (1 - target) / (k * (1 + target))))


def planted_corpus(
    seed: int = 0, families: int = 300
) -> tuple[dict[str, list[str]], list[tuple[str, str, float]]]:
    """Two sources of unrelated base documents, each with one mutated copy in the other source.

    Returns the corpus and the planted (base id, copy id, true Jaccard) pairs.
    """
    rng = random.Random(seed)
    corpus: dict[str, list[str]] = {"alpha": [], "beta": []}
    planted = []
    for f in range(families):
        n_words = rng.randint(80, 200)
        base = random_doc(rng, n_words)
        copy = mutate(rng, base, edits_for(n_words, TARGETS[f % len(TARGETS)]))
        home, away = ("alpha", "beta") if f % 2 else ("beta", "alpha")
        corpus[home].append(base)
        corpus[away].append(copy)
        planted.append(
            (f"{home}:{len(corpus[home]) - 1}", f"{away}:{len(corpus[away]) - 1}", true_jaccard(base, copy))
        )
    return corpus, planted


def read(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / f"{name}.parquet").to_pylist()


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("planted")
    corpus, planted = planted_corpus()
    cfg, near = sections()
    stats = run_dedup(make_sources(root, corpus, near, files_per_source=3), cfg, root / "out", near=near)
    return root, corpus, planted, stats


def test_planted_recall_and_no_merge_under_threshold(planted_run) -> None:
    root, corpus, planted, stats = planted_run
    cluster_of = {r["id"]: r["cluster_min_id"] for r in read(root / "out", "clusters")}
    high = [(a, b) for a, b, j in planted if j >= 0.85]
    found = sum(1 for a, b in high if a in cluster_of and cluster_of[a] == cluster_of.get(b))
    assert len(high) >= 100 and found / len(high) >= 0.95
    # No two documents in one cluster have a true Jaccard under the threshold (families are pairs, so
    # a cluster is a pair here), and every planted pair under 0.8 stays apart.
    texts = {f"{s}:{k}": t for s, docs in corpus.items() for k, t in enumerate(docs)}
    members: dict[str, list[str]] = {}
    for doc, keeper in cluster_of.items():
        members.setdefault(keeper, []).append(doc)
    for group in members.values():
        for i, x in enumerate(group):
            for y in group[i + 1 :]:
                assert true_jaccard(texts[x], texts[y]) >= 0.8, (x, y)
    low = [(a, b) for a, b, j in planted if j < 0.8]
    assert low and not any(a in cluster_of and cluster_of[a] == cluster_of.get(b) for a, b in low)
    assert stats["rejected_pairs"] >= 0 and stats["near_dropped"] == len(cluster_of) - stats["n_clusters"]


def test_dropped_rows_name_the_kept_document_and_the_exact_jaccard(planted_run) -> None:
    root, corpus, planted, stats = planted_run
    texts = {f"{s}:{k}": t for s, docs in corpus.items() for k, t in enumerate(docs)}
    dropped = read(root / "out", "dropped")
    assert dropped and [r["id"] for r in dropped] == sorted(r["id"] for r in dropped)
    for r in dropped:
        assert r["reason"] == "near"
        assert r["matched_id"].encode() < r["id"].encode()  # the smallest id of the cluster is kept
        assert r["jaccard"] == pytest.approx(true_jaccard(texts[r["id"]], texts[r["matched_id"]]), abs=1e-12)
        assert r["jaccard"] >= 0.8 and r["detail"] == "cluster_size=2"
    pairs = read(root / "out", "pairs")
    assert pairs and all(p["jaccard"] >= 0.7 for p in pairs)
    assert any(p["jaccard"] < 0.8 for p in pairs)  # analysis pairs go below the merge threshold
    for p in pairs:
        assert p["jaccard"] == pytest.approx(true_jaccard(texts[p["id_a"]], texts[p["id_b"]]), abs=1e-12)
        assert p["id_a"].encode() < p["id_b"].encode()
    assert stats["largest_clusters"] and stats["largest_clusters"][0]["size"] == 2
    assert 0 < len(stats["example_pairs"]) <= 5


def test_tables_have_their_schemas(planted_run) -> None:
    out = planted_run[0] / "out"
    assert pq.read_schema(out / "dropped.parquet").equals(DROPPED_SCHEMA)
    assert pq.read_schema(out / "clusters.parquet").equals(CLUSTERS_SCHEMA)
    assert pq.read_schema(out / "pairs.parquet").equals(PAIRS_SCHEMA)
    ids = [r["id"] for r in read(out, "clusters")]
    assert ids == sorted(ids, key=str.encode)
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp or work leftovers


def test_order_of_operations_and_byte_order_keeper(tmp_path: Path) -> None:
    rng = random.Random(5)
    a = random_doc(rng, 150)
    texts = [random_doc(rng, 50) for _ in range(12)]
    # s:10 < s:9 in byte order: s:10 keeps, although k = 9 comes first in the source.
    texts[9] = a  # exact duplicate of s:10
    texts[10] = a
    texts[11] = mutate(rng, a, 2)  # near duplicate of s:10
    texts[3] = mutate(rng, a, 1) + " " + "protected words " * 7  # near duplicate, but contaminated
    eval_file = tmp_path / "eval.txt"
    eval_file.write_text("protected words " * 7 + "\n", encoding="utf-8")
    cfg, near = sections(protected_sets=[{"name": "ev", "path": str(eval_file)}])
    stats = run_dedup(make_sources(tmp_path, {"s": texts}, near), cfg, tmp_path / "out", near=near)
    rows = {r["id"]: r for r in read(tmp_path / "out", "dropped")}
    assert set(rows) == {"s:3", "s:9", "s:11"}
    assert rows["s:3"]["reason"] == "decontaminated" and rows["s:3"]["detail"].startswith(
        "ev: protected words"
    )
    assert (rows["s:9"]["reason"], rows["s:9"]["matched_id"], rows["s:9"]["jaccard"]) == (
        "exact",
        "s:10",
        None,
    )
    assert (rows["s:11"]["reason"], rows["s:11"]["matched_id"]) == ("near", "s:10")
    assert (stats["decontaminated"], stats["exact_dropped"], stats["near_dropped"]) == (1, 1, 1)
    assert read(tmp_path / "out", "clusters") == [
        {"id": "s:10", "cluster_min_id": "s:10"},
        {"id": "s:11", "cluster_min_id": "s:10"},
    ]


def test_keep_mode_annotates_without_dropping(tmp_path: Path) -> None:
    corpus, _ = planted_corpus(seed=1, families=40)
    (drop_cfg, near), (keep_cfg, _) = sections(), sections(action="keep")
    sources = make_sources(tmp_path, corpus, near)
    kept = run_dedup(sources, keep_cfg, tmp_path / "keep")
    dropped = run_dedup(sources, drop_cfg, tmp_path / "drop")
    assert read(tmp_path / "keep", "dropped") == []
    assert kept["near_dropped"] == 0 and kept["near_duplicates"] == dropped["near_dropped"] > 0
    assert read(tmp_path / "keep", "clusters") == read(tmp_path / "drop", "clusters")
    assert read(tmp_path / "keep", "pairs") == read(tmp_path / "drop", "pairs")


def test_short_documents_are_counted_and_only_exact_deduped(tmp_path: Path) -> None:
    texts = [
        "Four words only here",
        "four words, only here!",
        "Four words only here",
        "five words are now here",
    ]
    texts += ["five words are now here", "five words are now there"]
    cfg, near = sections()
    stats = run_dedup(make_sources(tmp_path, {"s": texts}, near), cfg, tmp_path / "out", near=near)
    assert stats["no_signature"] == 3  # the 4-word documents have no 5-word shingle
    rows = {r["id"]: (r["reason"], r["matched_id"]) for r in read(tmp_path / "out", "dropped")}
    # s:1 normalizes like s:0 but is not byte-identical: a short document is only caught as an exact copy.
    assert rows == {"s:2": ("exact", "s:0"), "s:4": ("exact", "s:3")}


def test_verification_blocks_lsh_false_merges(tmp_path: Path) -> None:
    rng = random.Random(8)
    base = random_doc(rng, 200)
    texts = [base, mutate(rng, base, 14)]  # true Jaccard about 0.5
    assert true_jaccard(*texts) < 0.7
    loose = dict(num_perm=64, bands=64)  # one row per band: almost any overlap is a candidate
    (on, near), (off, _) = sections(**loose), sections(**loose, verify=False)
    sources = make_sources(tmp_path, {"s": texts}, near)
    with_verify = run_dedup(sources, on, tmp_path / "on", near=near)
    without = run_dedup(sources, off, tmp_path / "off", near=near)
    assert with_verify["candidate_pairs"] == 1 and with_verify["rejected_pairs"] == 1
    assert read(tmp_path / "on", "dropped") == [] and read(tmp_path / "on", "clusters") == []
    # without verify every candidate pair merges; the graph is still scored, so the drop shows its Jaccard
    (row,) = read(tmp_path / "off", "dropped")
    assert (row["id"], row["reason"]) == ("s:1", "near")
    assert row["jaccard"] == pytest.approx(true_jaccard(*texts), abs=1e-12)
    assert without["verified_pairs"] is None and read(tmp_path / "off", "pairs") == []


def test_chained_cluster_reports_exact_jaccard_to_the_kept_document(tmp_path: Path) -> None:
    rng = random.Random(4)
    middle = random_doc(rng, 300)
    ws = middle.split(" ")
    left = " ".join(["qa" + str(i) if i in range(0, 60, 10) else w for i, w in enumerate(ws)])
    right = " ".join(["qb" + str(i) if i in range(200, 260, 10) else w for i, w in enumerate(ws)])
    texts = [left, middle, right]  # s:0 ~ s:1 ~ s:2, but s:0 and s:2 are under the threshold
    assert true_jaccard(left, middle) >= 0.8 and true_jaccard(middle, right) >= 0.8 > true_jaccard(
        left, right
    )
    cfg, near = sections(bands=32)
    stats = run_dedup(make_sources(tmp_path, {"s": texts}, near), cfg, tmp_path / "out", near=near)
    rows = {r["id"]: r for r in read(tmp_path / "out", "dropped")}
    assert set(rows) == {"s:1", "s:2"} and {r["matched_id"] for r in rows.values()} == {"s:0"}
    assert rows["s:2"]["jaccard"] == pytest.approx(true_jaccard(left, right), abs=1e-12)
    assert stats["near_below_threshold_to_kept"] == 1 and stats["largest_clusters"][0]["size"] == 3


def test_byte_identical_across_workers_and_source_order(tmp_path: Path) -> None:
    corpus, _ = planted_corpus(seed=2, families=60)
    cfg, near = sections(verify_batch_shingles=2048, batch_bytes=65536)
    sources = make_sources(tmp_path, corpus, near, files_per_source=2)
    run_dedup(sources, cfg, tmp_path / "w1", workers=1, near=near)
    run_dedup(list(reversed(sources)), cfg, tmp_path / "w2", workers=2, near=near)
    for name in ("dropped", "clusters", "pairs"):
        one, two = (tmp_path / d / f"{name}.parquet" for d in ("w1", "w2"))
        assert one.read_bytes() == two.read_bytes(), name
    assert read(tmp_path / "w1", "dropped")


def test_stale_or_mismatched_signature_files_are_refused(tmp_path: Path) -> None:
    rng = random.Random(1)
    texts = [random_doc(rng, 20) for _ in range(5)]
    cfg, near = sections()
    (src,) = make_sources(tmp_path, {"s": texts}, near)
    write_clean_docs(src.doc_files[0], "s", texts + [random_doc(rng, 20)])  # a document was added since
    with pytest.raises(DedupInputError, match="does not match its clean documents|has 5 rows"):
        run_dedup([src], cfg, tmp_path / "out", near=near)
    write_clean_docs(src.doc_files[0], "s", texts)
    with pytest.raises(DedupInputError, match="was computed with .*recompute it"):
        run_dedup([src], cfg, tmp_path / "out", near=sections(seed=2)[1])
    with pytest.raises(DedupInputError, match="signature file .* does not exist"):
        run_dedup([DedupSource("s", src.doc_files, tmp_path / "none.parquet")], cfg, tmp_path / "out", near=near)
    with pytest.raises(DedupInputError, match="listed twice"):
        run_dedup([src, src], cfg, tmp_path / "out", near=near)
    assert not (tmp_path / "out" / "dropped.parquet").exists()


def test_duplicate_document_ids_are_refused(tmp_path: Path) -> None:
    cfg, near = sections()
    one = write_clean_docs(tmp_path / "a.parquet", "s", ["x y z w v u"])
    two = write_clean_docs(tmp_path / "b.parquet", "s", ["a b c d e f"])
    compute_signatures([one, two], tmp_path / "sig.parquet", near)
    with pytest.raises(DedupInputError, match="'s:0' occurs twice"):
        run_dedup([DedupSource("s", [one, two], tmp_path / "sig.parquet")], cfg, tmp_path / "out", near=near)


def test_empty_corpus_writes_empty_tables(tmp_path: Path) -> None:
    cfg, near = sections()
    stats = run_dedup(make_sources(tmp_path, {"s": []}, near), cfg, tmp_path / "out", near=near)
    assert (
        stats["docs"] == 0
        and read(tmp_path / "out", "dropped") == []
        and read(tmp_path / "out", "pairs") == []
    )


def test_batch_sizes_change_no_output_byte_and_report_examples_limits_the_report(tmp_path: Path) -> None:
    corpus, _ = planted_corpus(seed=3, families=50)
    big, near = sections()
    small, small_near = sections(batch_bytes=65536, verify_batch_shingles=1024, report_examples=1)
    sources = make_sources(tmp_path, corpus, near)
    run_dedup(sources, big, tmp_path / "big", near=near)
    stats = run_dedup(sources, small, tmp_path / "small", near=small_near)
    for name in ("dropped", "clusters", "pairs"):
        assert (tmp_path / "big" / f"{name}.parquet").read_bytes() == (
            tmp_path / "small" / f"{name}.parquet"
        ).read_bytes()
    assert len(stats["largest_clusters"]) == 1 and len(stats["example_pairs"]) == 1


def test_bad_clean_inputs_are_refused_with_the_file_named(tmp_path: Path) -> None:
    import pyarrow as pa

    cfg, near = sections()
    (src,) = make_sources(tmp_path, {"s": ["one two three four five six"]}, near)
    gone = DedupSource("s", [tmp_path / "gone.parquet"], src.signature_file)
    with pytest.raises(
        DedupInputError, match=r"source 's': clean document file .*gone.parquet does not exist"
    ):
        run_dedup([gone], cfg, tmp_path / "out", near=near)
    no_sha = tmp_path / "nosha.parquet"
    pq.write_table(pa.table({"id": ["s:0"], "text": ["one two three four five six"]}), no_sha)
    with pytest.raises(DedupInputError, match=r"nosha.parquet lacks column\(s\) \['sha256'\]"):
        run_dedup([DedupSource("s", [no_sha], src.signature_file)], cfg, tmp_path / "out", near=near)
    null_sha = tmp_path / "nullsha.parquet"
    table = pq.read_table(src.doc_files[0])
    table = table.set_column(7, "sha256", pa.array([None], pa.binary(32)))
    pq.write_table(table, null_sha)
    with pytest.raises(DedupInputError, match="nullsha.parquet: row group 0 has null sha256"):
        run_dedup([DedupSource("s", [null_sha], src.signature_file)], cfg, tmp_path / "out", near=near)
    with pytest.raises(DedupInputError, match=r"bands x rows \(7 x 20\) exceeds near_dup.num_perm \(128\)"):
        run_dedup([src], cfg, tmp_path / "out", near=dataclasses.replace(near, bands=7, rows=20))



def test_the_graph_names_each_texts_first_document_and_the_kept_copy_follows_the_stable_key(tmp_path) -> None:
    """Exact copies at rows 3 and 4 whose stable keys (urls) sort the other way round (row 4's first, so its copy is kept)
    and a near copy at row 2 (a later key than row 4's): the pairs table names the text by its first document (alpha:3), as the analysis
    reads it, while the exact group keeps alpha:4 and the near copy is matched to the kept copy."""
    import pyarrow as pa

    rng = random.Random(5)
    texts = [random_doc(rng, 300) for _ in range(8)]
    texts[4] = texts[3]
    texts[2] = mutate(rng, texts[3], 2)
    path = write_clean_docs(tmp_path / "clean" / "alpha" / "docs-00000.parquet", "alpha", texts)
    table = pq.read_table(path)
    urls = pa.array([f"https://example.org/alpha/{99 - k}" for k in range(len(texts))], pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("url"), "url", urls), path)
    cfg, near = sections()
    sig = tmp_path / "sig" / "alpha.parquet"
    compute_signatures([path], sig, near)
    run_dedup([DedupSource("alpha", [path], sig, keys=urls.to_pylist())], cfg, tmp_path / "out", near=near)
    dropped = {r["id"]: r for r in read(tmp_path / "out", "dropped")}
    assert dropped["alpha:3"]["reason"] == "exact" and dropped["alpha:3"]["matched_id"] == "alpha:4"
    assert "alpha:4" not in dropped
    assert dropped["alpha:2"]["reason"] == "near" and dropped["alpha:2"]["matched_id"] == "alpha:4"
    named = {i for p in read(tmp_path / "out", "pairs") for i in (p["id_a"], p["id_b"])}
    assert named == {"alpha:2", "alpha:3"}
