"""Recall and precision of the two near-duplicate engines against the exact ground truth.

Dedup's drops at `dedup.jaccard_threshold` and the corpus analysis' pairs at `analysis.pair_threshold` both
come from candidates found by MinHash LSH (one near-duplicate graph since the engines were merged; two
engines before: dedup 16 x 8 with star edges, the analysis 25 x 5 with every pair of a bucket), so neither
knows what it missed. bench/ground_truth.py finds every pair exactly; this module scores the engines' tables against
it, on the planted corpora of bench/dedup.py and on the bench corpus of bench/pipeline.py (every clean
filter off, so every document reaches dedup). Run through `bench/dedup.py --accuracy`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from ground_truth import GroundTruth, as_fraction, ground_truth  # noqa: E402

TRUTH_THRESHOLD = "0.7"  # one ground truth at the analysis' pair threshold also holds every pair >= 0.8


@dataclass
class EngineRun:
    """Where one corpus' engine outputs are: the clean documents both engines read, the dedup tables and
    stats, the MinHash signature files, and the analysis' doc_duplicates folder and step stats."""

    label: str
    files: list[Path]
    dropped: Path
    dedup_stats: dict[str, Any]
    signatures: list[Path]
    duplicates_dir: Path
    analysis_steps: dict[str, Any]
    dedup_threshold: str
    pair_threshold: str
    bands: int = 16
    rows: int = 8
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------- running the engines
ANALYSIS_CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from corpus_dagster.analysis import corpus_from_sources, run_analysis
from corpus_dagster.core.config import load_config
from corpus_dagster.core.settings import Settings
spec = json.loads(sys.argv[1])
settings = Settings.from_resolved(load_config(spec["config"]) if spec["config"] else load_config())
docs = corpus_from_sources({s: [Path(f) for f in fs] for s, fs in spec["sources"].items()},
                           root=Path(spec["root"]) if spec["root"] else None)
extra = {}
if spec["graph"]:  # one near-duplicate graph: the analysis reads dedup's verified pairs
    from corpus_dagster.lib.near_graph import GraphSpec
    extra = {"near": settings.near_dup, "graph": (Path(spec["graph_file"]), GraphSpec.from_dict(spec["graph"]))}
result = run_analysis(docs, Path(spec["out"]), settings.analysis, signature_files=[Path(p) for p in spec["signatures"]],
                      steps=["duplicates"], workers=spec["workers"], **extra)
print(json.dumps({"steps": result["steps"], "pair_threshold": str(settings.analysis.pair_threshold)}, default=str))
"""


def run_analysis_child(sources: dict[str, list[str]], signatures: list[str], out: Path, config: str | None,
                       root: str | None, workers: int, dedup: dict[str, Any], pairs: Path) -> dict[str, Any]:
    """The analysis' steps up to `duplicates` (scan, exact, candidates, jaccard, duplicates) in a fresh
    interpreter, on the clean documents as the graph's analysis runs them: reading dedup's near-duplicate
    graph (`pairs`) when the code has one (its dedup stats say so), else reusing the dedup signature files;
    the lengths, clusters, figures and report steps measure nothing this bench scores."""
    import os
    import subprocess

    spec = {"sources": sources, "signatures": signatures, "out": str(out), "config": config, "root": root,
            "workers": workers, "graph": dedup.get("graph"), "graph_file": str(pairs)}
    env = dict(os.environ, POLARS_MAX_THREADS="1", RAYON_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", ANALYSIS_CHILD, json.dumps(spec), str(ROOT)], capture_output=True,
                          text=True, env=env, check=False, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"analysis failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def planted_run(folder: Path, meta: dict) -> EngineRun:
    """The planted corpus of bench/dedup.py (its run_dedup tables in folder/dedup, signatures in folder/sig)
    plus the analysis over the same clean files."""
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.settings import Settings

    sigs = [str(folder / "sig" / f"{s}.parquet") for s in sorted(meta["files"])]
    dedup = json.loads((folder / "dedup_stats.json").read_text())
    analysis = run_analysis_child(meta["files"], sigs, folder / "analysis", None, None, 1, dedup,
                                  folder / "dedup" / "pairs.parquet")
    cfg = Settings.from_resolved(load_config()).dedup
    return EngineRun(f"planted {meta['n_docs']:,}", [Path(f) for s in sorted(meta["files"]) for f in meta["files"][s]],
                     folder / "dedup" / "dropped.parquet", dedup, [Path(p) for p in sigs],
                     folder / "analysis" / f"doc_duplicates_t{round(float(analysis['pair_threshold']) * 100)}",
                     analysis["steps"], str(cfg.jaccard_threshold), analysis["pair_threshold"], *_banding(dedup))


def bench_corpus_run(mb: int, log) -> EngineRun:
    """bench/pipeline.py's corpus through ingest, clean (every filter off), minhash and dedup, each stage in
    a fresh interpreter through its driver (pipeline.py's `_stage` child), workers 1; then the analysis.
    Stages are cached by their keys, so a second run reuses them."""
    import pipeline

    from corpus_dagster.clean.outputs import clean_doc_files
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.dedup.outputs import dedup_stats, dedup_tables
    from corpus_dagster.minhash.outputs import signature_file

    base = pipeline.corpus_folder(mb, False)
    if not (base / "_READY.json").exists():
        import subprocess

        subprocess.run([sys.executable, pipeline.__file__, "_corpus", str(mb), "0"], check=True)
    info = json.loads((base / "_READY.json").read_text())
    run_dir = pipeline.OUT_DIR / "pipeline-runs" / f"accuracy-off-w1-{mb}mb"
    config = pipeline.write_config(run_dir, base, sorted(info), 1, False)
    for stage in ("ingest", "clean", "minhash", "dedup"):
        res = pipeline.run_child("_stage", str(config), stage)
        log(f"[bench {mb} MB] {stage}: cpu {res['cpu']:.1f} s, wall {res['wall']:.1f} s")
    resolved = load_config(str(config))
    settings = Settings.from_resolved(resolved)
    layout = Layout.from_config(resolved)
    sids = sorted(info)
    files = {s: [str(p) for p in clean_doc_files(layout, s)] for s in sids}
    sigs = [str(signature_file(layout, s)) for s in sids]
    out = run_dir / "analysis-duplicates"
    dedup = dedup_stats(layout)
    analysis = run_analysis_child(files, sigs, out, str(config), str(layout.stage("clean")), 1, dedup,
                                  dedup_tables(layout)["pairs"])
    log(f"[bench {mb} MB] analysis up to duplicates done")
    cfg = settings.dedup
    return EngineRun(f"bench {mb} MB", [Path(f) for s in sids for f in files[s]],
                     dedup_tables(layout)["dropped"], dedup, [Path(p) for p in sigs],
                     out / f"doc_duplicates_t{round(float(analysis['pair_threshold']) * 100)}", analysis["steps"],
                     str(cfg.jaccard_threshold), analysis["pair_threshold"], *_banding(dedup))


def _banding(dedup: dict[str, Any]) -> tuple[int, int]:
    """(bands, rows) dedup's LSH used, from its stats: the graph's, or (older code) num_perm / bands."""
    s = dedup["settings"]
    return (int(s["bands"]), int(s["rows"])) if "rows" in s else (int(s["bands"]), int(s["num_perm"]) // int(s["bands"]))


# ----------------------------------------------------------------------------------------------- scoring
def _pair_index(truth: GroundTruth) -> dict[tuple[int, int], tuple[int, int]]:
    """(text a, text b) with a < b -> (intersection, union) of every ground-truth pair."""
    return {(a, b): (i, u) for a, b, i, u in zip(truth.a.tolist(), truth.b.tolist(), truth.intersection.tolist(),
                                                   truth.union.tolist(), strict=True)}


def _at_least(inter: np.ndarray, union: np.ndarray, t: Fraction) -> np.ndarray:
    return inter * t.denominator >= t.numerator * union


def score_dedup(truth: GroundTruth, run: EngineRun) -> dict[str, Any]:
    """The dedup stage's near step against the ground truth at its threshold, over the documents it saw."""
    import pyarrow.parquet as pq
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    t = as_fraction(run.dedup_threshold)
    dropped = pq.read_table(run.dropped).to_pylist()
    before_near = {r["id"] for r in dropped if r["reason"] in ("decontaminated", "exact")}
    near = {r["id"]: r for r in dropped if r["reason"] == "near"}
    index = {doc_id: i for i, doc_id in enumerate(truth.ids)}
    seen = np.array([doc_id not in before_near for doc_id in truth.ids])
    # The documents the near step saw, by distinct text: exact dedup left one document per text.
    seen_docs = np.flatnonzero(seen)
    doc_of_text = np.full(truth.n_shingles.size, -1, np.int64)
    copies = np.bincount(truth.text_of[seen_docs], minlength=truth.n_shingles.size)
    doc_of_text[truth.text_of[seen_docs]] = seen_docs
    strong = _at_least(truth.intersection, truth.union, t)
    a, b = doc_of_text[truth.a[strong]], doc_of_text[truth.b[strong]]
    edge = (a >= 0) & (b >= 0)
    a, b = a[edge], b[edge]
    n = len(truth.ids)
    _, comp = connected_components(coo_matrix((np.ones(a.size), (a, b)), shape=(n, n)), directed=False)
    size = np.bincount(comp, minlength=n)
    removed = np.zeros(n, bool)
    removed[[index[i] for i in near]] = True
    removed_in = np.bincount(comp, weights=removed, minlength=n).astype(np.int64)
    has_partner = np.zeros(n, bool)
    has_partner[a] = has_partner[b] = True
    roots = np.flatnonzero(np.bincount(comp[seen_docs], minlength=n) > 0)
    multi = roots[size[roots] >= 2]
    pairs = _pair_index(truth)

    def truth_jaccard(x: str, y: str) -> tuple[int, int] | None:
        ta, tb = sorted((int(truth.text_of[index[x]]), int(truth.text_of[index[y]])))
        return pairs.get((ta, tb))

    matched = [(r, truth_jaccard(r["id"], r["matched_id"])) for r in near.values()]
    exact_values = [m for r, m in matched if m is not None and r["jaccard"] is not None]
    return {
        "documents seen by the near step": int(seen.sum()),
        "same text twice among them": int((copies > 1).sum()),
        "truth: components >= 2 at t": int(multi.size),
        "truth: removable documents": int((size[multi] - 1).sum()),
        "dedup: near removals": len(near),
        "missed": int(np.maximum(size[multi] - 1 - removed_in[multi], 0).sum()),
        "removals without a truth partner >= t": int((removed & ~has_partner).sum()),
        "clusters lost": int((removed_in[multi] == 0).sum()),
        "components split (kept > 1)": int((size[multi] - 1 - removed_in[multi] > 0).sum()),
        "removal's J to its kept doc < t (chains)": sum(
            1 for _, m in matched if m is None or not _at_least(np.int64(m[0]), np.int64(m[1]), t)),
        "removal's jaccard == truth (pairs truth has)": f"{sum(1 for r, m in matched if m is not None and r['jaccard'] == m[0] / m[1])}"
                                                    f"/{len(exact_values)}",
        "_missed_edges": _missed_edges(truth, removed, doc_of_text, t),
    }


def _missed_edges(truth: GroundTruth, removed: np.ndarray, doc_of_text: np.ndarray,
                  t: Fraction) -> tuple[list[tuple[str, str]], str]:
    """Truth edges >= t whose two documents both survived dedup (a duplicate stayed), and their Jaccard bands."""
    strong = _at_least(truth.intersection, truth.union, t)
    a, b = doc_of_text[truth.a[strong]], doc_of_text[truth.b[strong]]
    ok = (a >= 0) & (b >= 0)
    a, b = a[ok], b[ok]
    both_kept = ~removed[a] & ~removed[b]
    edges = [(truth.ids[x], truth.ids[y]) for x, y in zip(a[both_kept].tolist(), b[both_kept].tolist(), strict=True)]
    inter, union = truth.intersection[strong][ok][both_kept], truth.union[strong][ok][both_kept]
    return edges, _by_band(inter, union)


def explain_misses(run: EngineRun, edges: list[tuple[str, str]]) -> dict[str, int]:
    """Why a truth pair >= t survived dedup: share no band of the signatures (LSH banding) or share a band
    but were not linked (star edges: each bucket member is linked to the bucket's smallest id only)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = {x for e in edges for x in e}
    sig: dict[str, np.ndarray] = {}
    for path in run.signatures:
        table = pq.read_table(path, columns=["id", "signature"])
        table = table.filter(pc.is_in(table.column("id"), value_set=pa.array(sorted(wanted), pa.string())))
        for doc_id, s in zip(table.column("id").to_pylist(), table.column("signature").to_pylist(), strict=True):
            if s is not None:
                sig[doc_id] = np.asarray(s)
    out: dict[str, Any] = {"no shared band (banding)": 0, "shared a band, not linked (star edges)": 0,
                           "no signature": 0}
    for x, y in edges:
        if x not in sig or y not in sig:
            out["no signature"] += 1
            continue
        width = run.bands * run.rows  # the banding reads the first bands x rows values
        same = (sig[x][:width] == sig[y][:width]).reshape(run.bands, run.rows).all(axis=1)
        out["shared a band, not linked (star edges)" if same.any() else "no shared band (banding)"] += 1
    return out


def _by_band(inter: np.ndarray, union: np.ndarray) -> str:
    """How many pairs fall in [0.7, 0.8), [0.8, 0.9) and [0.9, 1], as "a/b/c" (exact integer tests)."""
    edges = [Fraction(7, 10), Fraction(8, 10), Fraction(9, 10)]
    at = [_at_least(inter, union, e) for e in edges]
    return f"{int((at[0] & ~at[1]).sum())}/{int((at[1] & ~at[2]).sum())}/{int(at[2].sum())}"


def score_analysis(truth: GroundTruth, run: EngineRun) -> dict[str, Any]:
    """The analysis' doc_duplicates pairs against the ground truth at the pair threshold."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    t = as_fraction(run.pair_threshold)
    table = ds.dataset(run.duplicates_dir, format="parquet").to_table(columns=["doc_id", "near_duplicates"])
    lists = table.column("near_duplicates").combine_chunks()
    parent = pc.list_parent_indices(lists).to_numpy()
    flat = pc.list_flatten(lists)
    doc = np.asarray(table.column("doc_id").to_pylist(), dtype=object)[parent]
    other = flat.field("doc_id").to_numpy(zero_copy_only=False)
    jac = flat.field("jaccard").to_numpy()
    inter = flat.field("intersection").to_numpy().astype(np.int64)
    union = flat.field("union").to_numpy().astype(np.int64)
    index = {doc_id: i for i, doc_id in enumerate(truth.ids)}
    di = np.fromiter((index[d] for d in doc), np.int64, doc.size)
    oi = np.fromiter((index[d] for d in other), np.int64, other.size)
    one_way = di < oi
    ta, tb = truth.text_of[di[one_way]], truth.text_of[oi[one_way]]
    lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
    found_docs = int(one_way.sum())
    keep = _at_least(truth.intersection, truth.union, t)
    width = np.int64(truth.n_shingles.size)
    truth_keys = truth.a[keep] * width + truth.b[keep]
    found_keys = lo * width + hi
    uniq_found = np.unique(found_keys)
    hit = np.isin(uniq_found, truth_keys)
    docs_per_text = np.bincount(truth.text_of, minlength=truth.n_shingles.size)
    expected_doc_pairs = int((docs_per_text[truth.a[keep]] * docs_per_text[truth.b[keep]]).sum())
    # Values: the reported counts against the truth's, per reported (one-way) row.
    pos = np.searchsorted(truth_keys, found_keys)  # truth pairs are sorted by (a, b)
    pos[pos == truth_keys.size] = 0
    known = truth_keys[pos] == found_keys if truth_keys.size else np.zeros(found_keys.size, bool)
    t_inter = truth.intersection[keep][pos][known]
    t_union = truth.union[keep][pos][known]
    r_inter, r_union, r_jac = inter[one_way][known], union[one_way][known], jac[one_way][known]
    ratio = t_inter / t_union
    up = ratio.astype(np.float32)
    up = np.where(up.astype(np.float64) < ratio, np.nextafter(up, np.float32(np.inf)), up)
    return {
        "truth: text pairs >= t": int(truth_keys.size),
        "analysis: text pairs reported": int(uniq_found.size),
        "recall (text pairs)": hit.sum() / truth_keys.size if truth_keys.size else None,
        "precision (text pairs)": hit.sum() / uniq_found.size if uniq_found.size else None,
        "missed text pairs": int(truth_keys.size - hit.sum()),
        "  of which J in [.7,.8) / [.8,.9) / [.9,1]": _by_band(
            truth.intersection[keep][~np.isin(truth_keys, uniq_found)], truth.union[keep][~np.isin(truth_keys, uniq_found)]),
        "document pairs: reported / truth": f"{found_docs}/{expected_doc_pairs}",
        "rows with same text both sides": int((lo == hi).sum()),
        "intersection, union == truth": f"{int(((r_inter == t_inter) & (r_union == t_union)).sum())}/{int(known.sum())}",
        "jaccard == truth ratio rounded up (float32)": f"{int((r_jac == up).sum())}/{int(known.sum())}",
    }


def score(run: EngineRun, log) -> dict[str, Any]:
    """Ground truth of the run's clean files, then both engines scored against it."""
    truth = ground_truth(run.files, TRUTH_THRESHOLD, log=log)
    dedup = score_dedup(truth, run)
    edges, bands = dedup.pop("_missed_edges")
    misses = {"surviving truth pairs >= t": len(edges), "  of which J in [.7,.8) / [.8,.9) / [.9,1]": bands,
              **explain_misses(run, edges)}
    steps = run.analysis_steps
    counts = {
        "documents (clean, all sources)": truth.stats["documents"],
        "truth: distinct texts / with shingles": f"{truth.stats['distinct_texts']}/{truth.stats['texts_with_shingles']}",
        "truth: candidate pairs verified (prefix filter)": truth.stats["candidate_pairs_verified"],
        "truth: seconds (read, shingle, join)": "/".join(str(v) for v in truth.stats["seconds"].values()),
        "dedup: documents in LSH": run.dedup_stats.get("lsh_participants"),
        "dedup: documents shingled (stats; older code: n/a)": run.dedup_stats.get("shingled_docs", "n/a"),
        "dedup: no signature (< 5 words)": run.dedup_stats.get("no_signature"),
        "dedup: LSH candidate pairs": run.dedup_stats.get("candidate_pairs"),
        "dedup: pairs scored": run.dedup_stats.get("scored_pairs", run.dedup_stats.get("candidate_pairs")),
        "dedup: verified pairs >= t": run.dedup_stats.get("verified_pairs"),
        "analysis: documents scanned / no shingles": f"{steps.get('scan', {}).get('docs')}/"
                                                      f"{steps.get('scan', {}).get('no_shingle_docs')}",
        "analysis: documents in LSH": steps.get("candidates", {}).get("lsh_docs"),
        "analysis: pairs scored (0: read from the graph)": (
            0 if steps.get("jaccard", {}).get("source") == "near-duplicate graph"
            else steps.get("jaccard", {}).get("candidate_pairs")),
        "analysis: verified pairs >= t": steps.get("jaccard", {}).get("verified_pairs"),
    }
    return {"label": run.label, "dedup_threshold": run.dedup_threshold, "pair_threshold": run.pair_threshold,
            "counts": counts, "dedup": dedup, "misses": misses, "analysis": score_analysis(truth, run)}


# ---------------------------------------------------------------------------------------------- printing
FOOTNOTES = """
(a) documents seen by the near step: the clean documents minus those the dedup dropped as
    `decontaminated` or `exact` (dropped.parquet reasons); the truth's pairs are restricted to them.
(b) truth components: connected components of the ground-truth pairs with Jaccard >= the dedup threshold
    among those documents; removable = sum over components of (size - 1).
(c) missed = sum over truth components C of max(0, (|C| - 1) - near removals in C): a component dedup
    splits into k clusters keeps k documents instead of one and counts k - 1.
(d) clusters lost: truth components of >= 2 documents with no near removal at all.
(e) why missed: every truth pair >= t whose two documents both survived, by its MinHash signatures: no
    shared band (the pair never met in a bucket: LSH banding) or a shared band yet no edge (the dedup links
    each bucket member to the bucket's smallest id only, so a pair of non-smallest members meets no
    verification unless another band or a chain through the smallest joins them).
(f) analysis pairs are compared per pair of distinct texts (byte-identical documents collapsed by SHA-256,
    as both the truth and the analysis do); document pairs count every copy of both texts.
"""


def print_accuracy(results: list[dict[str, Any]]) -> None:
    """One table, a column per corpus, in the style of the other bench tables; then the footnotes."""
    width = 50
    head = f"{'accuracy vs exact ground truth':<{width}}" + "".join(f"{r['label']:>22}" for r in results)
    print(head)
    print("-" * len(head))

    def cell(v: Any) -> str:
        if v is None:
            return f"{'-':>22}"
        if isinstance(v, float):
            return f"{v:>22.4f}"
        if isinstance(v, (int, np.integer)):
            return f"{v:>22,}"
        return f"{v!s:>22}"

    def section(title: str, key: str, notes: dict[str, str] | None = None) -> None:
        print(f"{title:<{width}}")
        for name in results[0][key]:
            label = f"  {name}{(' ' + notes[name]) if notes and name in notes else ''}"
            print(f"{label:<{width}}" + "".join(cell(r[key].get(name)) for r in results))

    section("counts", "counts")
    print(f"{'dedup near step at t = ' + results[0]['dedup_threshold']:<{width}}")
    for name in results[0]["dedup"]:
        note = {"documents seen by the near step": "(a)", "truth: components >= 2 at t": "(b)",
                "missed": "(c)", "clusters lost": "(d)"}.get(name, "")
        print(f"{'  ' + name + (' ' + note if note else ''):<{width}}" + "".join(cell(r["dedup"][name]) for r in results))
    print(f"{'  why the surviving truth pairs >= t were missed (e)':<{width}}")
    for name in results[0]["misses"]:
        print(f"{'    ' + name:<{width}}" + "".join(cell(r["misses"][name]) for r in results))
    print(f"{'analysis doc_duplicates at t = ' + results[0]['pair_threshold'] + ' (f)':<{width}}")
    for name in results[0]["analysis"]:
        print(f"{'  ' + name:<{width}}" + "".join(cell(r["analysis"][name]) for r in results))
    print(FOOTNOTES)
