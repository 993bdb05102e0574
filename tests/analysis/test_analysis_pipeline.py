"""Corpus analysis end to end on a planted corpus: tables, clusters, views, verification, resume, CLI."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_dagster.analysis.cli import main as cli_main
from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.planted import jaccard, planted_corpus, reference_shingles
from corpus_dagster.analysis.runner import INTERNAL, plan_analysis, run_analysis
from corpus_dagster.analysis.steps import clusters as clusters_step
from corpus_dagster.analysis.steps.registry import STEPS
from corpus_dagster.analysis.views import DUPLICATES_SCHEMA
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import AnalysisError
from verify._reference import corpus_files
from verify.cluster_jaccard import check_clusters
from verify.exact_groups import check_exact_groups
from verify.rescore_sample import check_duplicates_sample

N_DOCS = 1200


def _cfg(**kw) -> dict:
    return load_settings(None, {"analysis": kw} if kw else None).analysis


def _write_shards(table: pa.Table, folder: Path, n_files: int = 3, drop_id: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    n = table.num_rows
    for k in range(n_files):
        part = table.slice(k * n // n_files, (k + 1) * n // n_files - k * n // n_files)
        if drop_id:
            part = part.drop_columns(["id", "source_id"])
        pq.write_table(part, folder / f"shard_{k:05d}.parquet", row_group_size=150)
    return folder


@pytest.fixture(scope="module")
def planted():
    return planted_corpus(N_DOCS, seed=7, near_share=0.15)


@pytest.fixture(scope="module")
def analysed(planted, tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    corpus = _write_shards(planted.table, root / "in")
    out = root / "out"
    res = run_analysis(corpus_from_dir(corpus), out, _cfg())
    return corpus, out, res


def _dup_rows(out: Path) -> list[dict]:
    return pq.read_table(out / "doc_duplicates_t70").to_pylist()


def test_doc_duplicates_schema_both_directions_disjoint_descending(analysed):
    _, out, _ = analysed
    table = pq.read_table(out / "doc_duplicates_t70")
    assert table.schema.equals(DUPLICATES_SCHEMA)
    rows = table.to_pylist()
    assert [r["doc_id"] for r in rows] == sorted(r["doc_id"] for r in rows)
    by_id = {r["doc_id"]: r for r in rows}
    for r in rows:
        near_ids = [n["doc_id"] for n in r["near_duplicates"]]
        assert not set(near_ids) & set(r["exact_duplicates"])
        assert r["doc_id"] not in near_ids and r["doc_id"] not in r["exact_duplicates"]
        js = [n["jaccard"] for n in r["near_duplicates"]]
        assert js == sorted(js, reverse=True) and all(j >= 0.7 - 1e-6 for j in js)
        assert (r["n_exact"], r["n_near"]) == (len(r["exact_duplicates"]), len(near_ids))
        for n in r["near_duplicates"]:  # the other direction is present with the same Jaccard
            back = {m["doc_id"]: m["jaccard"] for m in by_id[n["doc_id"]]["near_duplicates"]}
            assert back[r["doc_id"]] == n["jaccard"]
        for d in r["exact_duplicates"]:
            assert r["doc_id"] in by_id[d]["exact_duplicates"]


def test_planted_pairs_found_with_exact_jaccard(analysed, planted):
    _, out, _ = analysed
    ids = planted.table.column("id").to_pylist()
    texts = planted.table.column("text").to_pylist()
    near = {r["doc_id"]: {n["doc_id"]: n["jaccard"] for n in r["near_duplicates"]} for r in _dup_rows(out)}
    want = [(a, b, j) for a, b, j in planted.near_pairs if j >= 0.7 and texts[a] != texts[b]]
    assert len(want) > 50
    found = [(a, b, j) for a, b, j in want if ids[b] in near.get(ids[a], {})]
    assert len(found) / len(want) >= 0.95
    for a, b, j in found:  # never an estimate: the stored float32 is the exact Jaccard
        assert near[ids[a]][ids[b]] == pytest.approx(j, abs=1e-6)
    for (a, b) in planted.exact_pairs:
        row = next(r for r in _dup_rows(out) if r["doc_id"] == ids[b])
        assert ids[a] in row["exact_duplicates"]


def test_clusters_complete_linkage_and_ordered(analysed, planted):
    _, out, _ = analysed
    texts = dict(zip(planted.table.column("id").to_pylist(), planted.table.column("text").to_pylist(), strict=True))
    for t in (0.7, 0.8, 0.9):
        lines = [json.loads(x) for x in (out / f"near_dup_clusters_t{round(t * 100)}.jsonl").read_text().splitlines()]
        assert [c["component"] for c in lines] == list(range(len(lines)))
        assert [c["doc_ids"][0] for c in lines] == sorted(c["doc_ids"][0] for c in lines)
        seen = set()
        for c in lines:
            assert c["doc_ids"] == sorted(c["doc_ids"]) and c["size"] == len(c["doc_ids"]) >= 2
            assert not seen & set(c["doc_ids"])
            seen |= set(c["doc_ids"])
            js = [jaccard(reference_shingles(texts[a]), reference_shingles(texts[b]))
                  for a, b in combinations(c["doc_ids"], 2)]
            assert min(js) >= t and c["min_jaccard"] >= t
            assert c["min_jaccard"] == pytest.approx(min(js), abs=1e-6)


def test_affected_at_least_removable_with_exact_gap(analysed):
    _, out, _ = analysed
    rows = pq.read_table(out / "duplication_views.parquet").to_pylist()
    overall = {r["view"]: r for r in rows if r["scope"] == "overall"}
    assert list(overall) == ["exact", "0.7", "0.8", "0.9"]
    for r in rows:
        assert r["affected"] >= r["removable"]
        assert r["affected"] - r["removable"] == r["kept_representatives"] + r["stranded"]
    for view in overall:  # sources add up to the overall row
        per_source = [r for r in rows if r["scope"] == "source" and r["view"] == view]
        assert sum(r["affected"] for r in per_source) == overall[view]["affected"]
        assert sum(r["removable"] for r in per_source) == overall[view]["removable"]
    assert overall["exact"]["affected"] <= overall["0.9"]["affected"] <= overall["0.7"]["affected"]
    lines = [json.loads(x) for x in (out / "near_dup_clusters_t70.jsonl").read_text().splitlines()]
    short_groups = overall["0.7"]["no_shingle_removable"]
    assert overall["0.7"]["removable"] == sum(c["size"] - 1 for c in lines) + short_groups


def test_short_documents_counted_separately(analysed, planted):
    _, out, res = analysed
    n_short = sum(len(reference_shingles(t)) == 0 for t in planted.table.column("text").to_pylist())
    assert n_short > 0
    assert res["steps"]["scan"]["no_shingle_docs"] == n_short
    overall = [r for r in pq.read_table(out / "duplication_views.parquet").to_pylist() if r["scope"] == "overall"]
    assert {r["no_shingle_docs"] for r in overall} == {n_short}


def test_verify_scripts_pass_on_good_outputs(analysed):
    corpus, out, _ = analysed
    files = corpus_files(corpus)
    for t in (70, 80, 90):
        assert check_clusters(files, out / f"near_dup_clusters_t{t}.jsonl", t / 100)["passed"]
    assert check_exact_groups(files, out / "duplicate_groups.jsonl")["passed"]
    assert check_duplicates_sample(files, out / "doc_duplicates_t70", 0.7, sample=100, seed=3)["passed"]


def test_verify_cluster_check_catches_corruption(analysed, tmp_path):
    corpus, out, _ = analysed
    lines = [json.loads(x) for x in (out / "near_dup_clusters_t90.jsonl").read_text().splitlines()]
    a, b = lines[0], lines[1]  # merging two clusters breaks complete linkage
    bad = [{**a, "doc_ids": sorted(a["doc_ids"] + b["doc_ids"]), "size": a["size"] + b["size"]}] + lines[2:]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in bad))
    res = check_clusters(corpus_files(corpus), path, 0.9)
    assert not res["passed"] and any("< 0.9" in f for f in res["failures"])


def test_verify_exact_check_catches_corruption(analysed, tmp_path):
    corpus, out, _ = analysed
    lines = (out / "duplicate_groups.jsonl").read_text().splitlines()
    path = tmp_path / "groups.jsonl"
    path.write_text("\n".join(lines[1:]) + "\n")
    assert not check_exact_groups(corpus_files(corpus), path)["passed"]


def test_verify_rescore_catches_corruption(analysed, tmp_path):
    corpus, out, _ = analysed
    rows = _dup_rows(out)
    for r in rows:
        for n in r["near_duplicates"]:
            n["jaccard"] = min(1.0, n["jaccard"] + 0.01)
    (tmp_path / "dd").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=DUPLICATES_SCHEMA), tmp_path / "dd" / "part-00000.parquet")
    res = check_duplicates_sample(corpus_files(corpus), tmp_path / "dd", 0.7, sample=50, seed=1)
    assert not res["passed"] and any("recomputed" in f for f in res["failures"])


def test_resume_after_a_killed_step(planted, tmp_path, monkeypatch):
    corpus = _write_shards(planted.table.slice(0, 400), tmp_path / "in")
    out = tmp_path / "out"

    def boom(*args, **kwargs):
        raise RuntimeError("killed midway")

    monkeypatch.setattr(clusters_step, "complete_linkage", boom)
    with pytest.raises(RuntimeError, match="killed midway"):
        run_analysis(corpus_from_dir(corpus), out, _cfg())
    assert sorted(p.parent.name for p in (out / "_state").glob("*/_RECORD.json")) == sorted(
        ["scan", "exact", "candidates", "jaccard", "duplicates"]
    )
    assert not list(out.glob(".*tmp-*")) and not (out / "duplication_views.parquet").exists()
    monkeypatch.undo()
    res = run_analysis(corpus_from_dir(corpus), out, _cfg())
    assert res["skipped"] == ["scan", "exact", "candidates", "jaccard", "duplicates"]
    assert res["ran"] == ["clusters", "lengths", "figures", "report"]
    assert run_analysis(corpus_from_dir(corpus), out, _cfg())["ran"] == []
    # a changed setting invalidates the records: everything runs again
    assert run_analysis(corpus_from_dir(corpus), out, _cfg(cluster_thresholds=[0.75]))["skipped"] == []


def test_determinism_across_runs_and_workers(planted, tmp_path):
    corpus = _write_shards(planted.table.slice(0, 500), tmp_path / "in")
    run_analysis(corpus_from_dir(corpus), tmp_path / "a", _cfg(), workers=1)
    run_analysis(corpus_from_dir(corpus), tmp_path / "b", _cfg(), workers=2)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and p.relative_to(root).parts[0] not in INTERNAL}

    fa, fb = files(tmp_path / "a"), files(tmp_path / "b")
    assert fa.keys() == fb.keys() and "figures/affected_vs_removable.svg" in fa
    assert [k for k in fa if fa[k] != fb[k]] == []


def test_cli_on_foreign_shards_without_ids(planted, tmp_path, capsys):
    corpus = _write_shards(planted.table.slice(0, 300), tmp_path / "in", drop_id=True)
    out = tmp_path / "out"
    assert cli_main(["--corpus-dir", str(corpus), "--out-dir", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "jaccard" in printed and "est. time" in printed and not out.exists()
    assert cli_main(["--corpus-dir", str(corpus), "--out-dir", str(out), "--step", "duplicates"]) == 0
    assert not (out / "REPORT.md").exists()
    assert cli_main(["--corpus-dir", str(corpus), "--out-dir", str(out)]) == 0
    assert "report:" in capsys.readouterr().out
    ids = pq.read_table(out / "doc_token_counts.parquet").column("id").to_pylist()
    assert ids[0] == "shard_00000_00000" and "shard_00002_00099" in ids
    assert check_exact_groups(corpus_files(corpus), out / "duplicate_groups.jsonl")["passed"]


def test_cli_refuses_duplicate_ids(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    for k in range(2):
        pq.write_table(pa.table({"id": ["x:1"], "text": ["some text here"]}), tmp_path / "in" / f"f{k}.parquet")
    assert cli_main(["--corpus-dir", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out")]) == 2
    assert "'x:1' occurs twice" in capsys.readouterr().err


def test_cli_refuses_missing_text_column(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "in" / "f.parquet")
    assert cli_main(["--corpus-dir", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out")]) == 2
    assert "none of the columns ['text', 'content']" in capsys.readouterr().err
    assert cli_main(["--corpus-dir", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out"), "--text-column", "txt"]) == 2
    assert "no `txt` column" in capsys.readouterr().err


def test_pair_threshold_above_cluster_threshold_is_an_error(tmp_path, planted):
    corpus = _write_shards(planted.table.slice(0, 30), tmp_path / "in")
    with pytest.raises(AnalysisError, match="pair_threshold"):
        run_analysis(corpus_from_dir(corpus), tmp_path / "out", _cfg(pair_threshold=0.85))


def test_dry_run_estimates_every_step(analysed):
    corpus, _, _ = analysed
    plan = plan_analysis(corpus_from_dir(corpus), _cfg())
    assert plan["docs"] == N_DOCS and plan["text_bytes"] > 0
    assert [s["step"] for s in plan["steps"]] == list(STEPS)
    assert all(s["seconds"] >= 0 and s["peak_rss_bytes"] > 0 for s in plan["steps"])


def test_verify_cluster_check_with_a_pair_budget_samples_and_still_catches_a_bad_member(tmp_path):
    """With `max_pairs` the cluster check recomputes fewer pairs: clusters that fit are checked whole, a
    larger one on a seeded sample of 32 pairs, which still catches a member that is not a near duplicate."""
    import random
    from itertools import combinations

    from verify._reference import jaccard, shingle_set
    from verify.cluster_jaccard import check_cluster_files

    rng = random.Random(5)
    words = [f"w{rng.randrange(5000)}" for _ in range(300)]
    docs = {f"d{i:02d}": " ".join(words[:i * 7] + ["changed"] + words[i * 7 + 1:]) for i in range(12)}
    docs["pair_a"], docs["pair_b"] = " ".join(words[::-1]), " ".join(words[::-1][:-1])
    docs["stranger"] = " ".join(f"x{rng.randrange(5000)}" for _ in range(300))
    corpus = tmp_path / "c"
    corpus.mkdir()
    pq.write_table(pa.table({"id": list(docs), "text": list(docs.values())}), corpus / "docs.parquet")

    def cluster(component: int, ids: list[str]) -> dict:
        js = [jaccard(shingle_set(docs[a]), shingle_set(docs[b])) for a, b in combinations(ids, 2)]
        return {"component": component, "doc_ids": ids, "size": len(ids), "min_jaccard": round(min(js), 6),
                "mean_jaccard": round(sum(js) / len(js), 6)}

    big = [f"d{i:02d}" for i in range(12)]  # 66 pairs
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(c) + "\n" for c in [cluster(0, big), cluster(1, ["pair_a", "pair_b"])]))
    threshold = cluster(0, big)["min_jaccard"] - 0.001
    files = corpus_files(corpus)
    full = check_clusters(files, good, threshold)
    assert full["passed"], full
    assert full["pairs_checked"] == 67 and full["clusters_checked_whole"] == 2
    sampled = check_clusters(files, good, threshold, max_pairs=10, seed=1)
    assert sampled["passed"] and sampled["pairs_checked"] == 32 + 1 and sampled["clusters_checked_whole"] == 1
    assert sampled == check_clusters(files, good, threshold, max_pairs=10, seed=1)  # seeded: the same pairs
    assert check_cluster_files(files, [(good, threshold), (good, threshold)]) == [full, full]  # one read, same verdicts

    bad_cluster = {**cluster(0, big), "doc_ids": sorted([*big, "stranger"]), "size": 13}  # reported min unchanged
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(bad_cluster) + "\n")
    res = check_clusters(files, bad, threshold, max_pairs=10, seed=1)
    assert not res["passed"] and res["clusters_checked_whole"] == 0 and any("Jaccard 0.0" in f for f in res["failures"])


def test_reference_shingle_hashes_give_the_jaccard_of_the_shingle_sets():
    import random

    from verify._reference import jaccard, jaccard_hashes, shingle_hashes, shingle_set

    rng = random.Random(3)
    vocab = ["river", "Garden", "of", "the", "a", "ÉTÉ", "x_y", "42", "naïve", "über"]
    for _ in range(200):
        a = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 40)))
        b = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 40))) if rng.random() < 0.5 else a + " the river"
        assert len(shingle_hashes(a)) == len(shingle_set(a))
        assert jaccard_hashes(shingle_hashes(a), shingle_hashes(b)) == pytest.approx(jaccard(shingle_set(a), shingle_set(b)))


def test_reference_normalization_is_the_regex_rule_on_every_character():
    """normalized_words takes a Latin-1, a BMP-table and a regex path: each must give the words of the
    plain rule (lowercase, every run of characters outside [^\\W_] is one separator) for every character."""
    import re

    from verify._reference import normalized_words

    def plain(text: str) -> list[str]:
        return re.sub(r"[\W_]+", " ", text.lower()).split()

    latin1 = "".join(f"{chr(c)}a{chr(c)} " for c in range(256))
    bmp = "".join(f"{chr(c)}x{chr(c)}" for c in range(0x100, 0x10000) if not 0xD800 <= c < 0xE000)
    samples = [latin1, bmp, "İstanbul ΣΟΦΟΣ naïve_x", "𝐀𝐁c 😀 ab\u0301cd", "lone \ud800 surrogate Ⅻ ①②", "", "___"]
    for text in samples:
        assert normalized_words(text) == plain(text), text[:40]
    assert normalized_words("A_b,C-d ½ ª²") == ["a", "b", "c", "d", "½", "ª²"]


def test_cluster_check_with_a_text_budget_recomputes_a_seeded_sample_of_clusters(tmp_path):
    """With `max_bytes` the cluster check hashes a seeded sample of clusters: the same seed draws the same
    ones, another seed others, a wrong reported min is caught exactly when its cluster is drawn, and 0
    recomputes every cluster. Ids, sizes and the reported min of every cluster are checked on every draw."""
    import random

    from verify._reference import jaccard, shingle_set, text_sizes
    from verify.cluster_jaccard import _sample_clusters, check_cluster_files

    rng = random.Random(11)
    docs, clusters = {}, []
    for c in range(10):
        words = [f"w{rng.randrange(10**6)}" for _ in range(150)]
        a, b = f"c{c}a", f"c{c}b"
        docs[a], docs[b] = " ".join(words), " ".join(words[:140] + ["changed"] * 10)
        j = round(jaccard(shingle_set(docs[a]), shingle_set(docs[b])), 6)
        clusters.append({"component": c, "size": 2, "doc_ids": [a, b], "min_jaccard": j, "mean_jaccard": j})
    corpus = tmp_path / "c"
    corpus.mkdir()
    pq.write_table(pa.table({"id": list(docs), "text": list(docs.values())}), corpus / "docs.parquet")
    files = corpus_files(corpus)
    per_cluster = 2 * len(docs["c0a"])  # every text here is ASCII and about as long

    def run(lines: list[dict], seed, max_bytes: int) -> dict:
        path = tmp_path / "clusters.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in lines))
        return check_cluster_files(files, [(path, 0.5)], seed=seed, max_bytes=max_bytes)[0]

    budget = 3 * per_cluster
    good = run(clusters, "s", budget)
    assert good["passed"] and good["clusters"] == 10 and 2 <= good["clusters_recomputed"] <= 3
    assert good["text_bytes_hashed"] <= budget
    assert run(clusters, "s", budget) == good  # seeded
    every = run(clusters, "s", 0)
    assert every["passed"] and every["clusters_recomputed"] == 10 and every["pairs_checked"] == 10

    bad = [dict(c) for c in clusters]
    bad[4]["min_jaccard"] = bad[4]["mean_jaccard"] = 0.99  # wrong, still above the threshold
    sizes = text_sizes(files)
    caught = {}
    for seed in range(12):
        drawn = _sample_clusters([bad], sizes, budget, seed)[0][4]
        res = run(bad, seed, budget)
        assert res["passed"] is not drawn, (seed, res)
        caught[seed] = drawn
    assert any(caught.values()) and not all(caught.values())  # each build draws anew
    assert not run(bad, 0, 0)["passed"]  # the full check always catches it

    for seed in range(4):  # checked on every draw, recomputed or not
        low = [dict(c) for c in clusters]
        low[7]["min_jaccard"] = 0.4
        assert any("reported min_jaccard 0.4 < 0.5" in f for f in run(low, seed, budget)["failures"])
        ghost = [dict(c) for c in clusters]
        ghost[2]["doc_ids"] = ["c2a", "nobody"]
        assert any("unknown document id" in f for f in run(ghost, seed, budget)["failures"])
