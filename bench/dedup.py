"""Benchmark of the dedup stage on planted near duplicates made from real text on this machine.

    .venv/bin/python bench/dedup.py --quick            # 10k documents (about a minute)
    .venv/bin/python bench/dedup.py --sizes 10k,100k   # choose sizes (10k, 100k, 1m, or any integer)
    .venv/bin/python bench/dedup.py --sizes 1m --workers 2
    .venv/bin/python bench/dedup.py --quick --accuracy     # only: dedup and analysis vs the exact ground truth
    .venv/bin/python bench/dedup.py --accuracy --corpus bench   # ... on the bench/pipeline.py corpus only
    .venv/bin/python bench/dedup.py --quick --with-accuracy     # the throughput table, then the accuracy one

Corpus: word streams from pydoc topics, license/copyright files and man pages, cut into base documents
of 2..8 random passages; a share of documents are copies of a base mutated by word edits (replace,
insert, delete) aimed at Jaccard targets between 0.5 and 1.0, a few are exact copies, and a few carry a
passage of a protected (held-out) evaluation set. Truth Jaccard of every planted pair is computed with
the plain-Python reference shingling (not the code under test).

Each measured step runs in its own subprocess and reports its own peak RSS (the kernel's VmHWM, which
unlike ru_maxrss is not inherited from the forking parent): signatures (compute_signatures, per
source), the global run_dedup (which resets the peak between its sub-steps and reports each one's:
decontaminate, exact, lsh, verify, components, write), and datatrove's MinhashDedupSignature
on the first files of the same corpus (bench/.venv-datatrove, never a runtime dependency).
Generated data goes to bench/out/dedup/ (git-ignored) and is reused on the next run.

Accuracy (--accuracy, or --with-accuracy after the throughput table): both near-duplicate engines, the
dedup stage and the corpus analysis, against the exact all-pairs ground truth of bench/ground_truth.py,
on the planted corpora and on the bench/pipeline.py corpus with every clean filter off (the scoring is
bench/dedup_accuracy.py; its table's footnotes define every row).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

OUT = HERE / "out" / "dedup"
FILE_DOCS = 10_000
SOURCES = ("web", "books", "code", "forum")
GEN_VERSION = 6
SEED = 20240601
COPY_SHARE = 0.2  # documents that are mutated copies of a base
EXACT_SHARE = 0.02  # documents that are byte-identical copies of a base
CONTAMINATED_SHARE = 0.005  # documents carrying a protected passage
TARGETS = np.array([0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.93, 0.96, 0.99])


# --------------------------------------------------------------------------------------------- real text
_TROFF_ESCAPE = re.compile(r"\\f[BIRPC]|\\f\(..|\\f\[[^\]]*\]|\\\(..|\\\[[^\]]*\]|\\[&|^%e]|\\s[-+]?\d+")


def _man_text(path: str) -> str:
    """Rough troff-to-text: drop macro lines, strip font/size escapes, unescape hyphens."""
    try:
        raw = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
    except (OSError, EOFError):
        return ""
    lines = []
    for line in raw.splitlines():
        if line.startswith((".", "'")):
            continue
        line = _TROFF_ESCAPE.sub("", line).replace("\\-", "-").replace("\\", "")
        if line.strip():
            lines.append(line)
    return "\n".join(lines)


def _read_any(path: str) -> str:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except (OSError, EOFError, UnicodeError):
        return ""


def real_texts(max_bytes: int):
    """Real texts found on this machine, in a fixed order, until about max_bytes characters."""
    from pydoc_data.topics import topics

    for key in sorted(topics):
        yield topics[key]
    site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages"
    size = 0
    pages = sorted(glob.glob("/usr/share/man/man[1-8]/*.gz"))
    # Thousands of near-identical generated gcloud pages: keep one in 50 so they do not dominate.
    pages = [p for i, p in enumerate(pages) if not Path(p).name.startswith("gcloud") or i % 50 == 0]
    groups = [
        (sorted(glob.glob(str(site / "*.dist-info" / "LICENSE*"))), _read_any),
        (sorted(glob.glob("/usr/share/common-licenses/*")), _read_any),
        (sorted(glob.glob("/usr/share/doc/*/copyright")), _read_any),
        (pages, _man_text),
        (sorted(glob.glob("/usr/share/doc/*/changelog*.gz")), _read_any),
        (
            sorted(glob.glob("/usr/share/doc/*/NEWS*")) + sorted(glob.glob("/usr/share/doc/*/README*")),
            _read_any,
        ),
    ]
    for paths, reader in groups:
        for path in paths:
            if size >= max_bytes:
                return
            text = reader(path)
            size += len(text)
            yield text


def token_stream(max_bytes: int = 150_000_000) -> tuple[list[str], np.ndarray]:
    """(vocabulary, token ids) of the real-text stream, distinct lines only; cached under bench/out/dedup/."""
    cache = OUT / "stream.npz"
    if cache.exists():
        with np.load(cache, allow_pickle=False) as z:
            return json.loads(bytes(z["vocab"]).decode()), z["ids"]
    vocab_index: dict[str, int] = {}
    seen: set[int] = set()
    parts = []
    for text in real_texts(max_bytes):
        tokens = []
        for line in text.splitlines():
            line = line.strip()
            key = hash(line)
            if len(line) > 20 and key not in seen:
                seen.add(key)
                tokens.extend(line.split())
        parts.append(
            np.fromiter((vocab_index.setdefault(t, len(vocab_index)) for t in tokens), dtype=np.int32)
        )
    ids = np.concatenate(parts)
    vocab = list(vocab_index)
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vocab=np.frombuffer(json.dumps(vocab).encode(), dtype=np.uint8), ids=ids)
    return vocab, ids


# --------------------------------------------------------------------------------------------- corpus
def _concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _mutate(rng: np.random.Generator, ids: np.ndarray, target: float, pool: np.ndarray) -> np.ndarray:
    """Word edits (70% replace, 15% insert, 15% delete) sized for about `target` Jaccard of 5-shingles."""
    n = len(ids)
    edits = max(1, round((n - 4) * (1 - target) / (5 * (1 + target))))
    out = ids.copy()
    for _ in range(edits):
        kind = rng.random()
        pos = int(rng.integers(0, len(out)))
        new = pool[int(rng.integers(0, len(pool)))]
        if kind < 0.7:
            out[pos] = new
        elif kind < 0.85:
            out = np.insert(out, pos, new)
        elif len(out) > 6:
            out = np.delete(out, pos)
    return out


def _texts(vocab_arr, ids: np.ndarray, offsets: np.ndarray):
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), vocab_arr.take(pa.array(ids)))
    return pc.binary_join(lists, " ").cast(pa.string())


def generate(n_docs: int, folder: Path) -> dict:
    """Write the planted corpus (clean files per source, protected set, truth); reuse it when present."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corpus_dagster.clean.driver import CLEAN_DOC_SCHEMA

    meta_path = folder / "corpus.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("version") == GEN_VERSION and meta.get("n_docs") == n_docs:
            return meta
    start = time.monotonic()
    vocab, stream = token_stream()
    vocab_arr = pa.array(vocab, pa.string())
    rng = np.random.default_rng(SEED + n_docs)
    held = int(len(stream) * 0.98)  # the last 2% of the stream is held out for the protected set
    train, heldout = stream[:held], stream[held:]

    # Protected set: 2000 passages of 40..120 held-out tokens, word order shuffled so that they share no
    # 13-gram with the training stream by accident (real text repeats boilerplate across man pages).
    p_len = rng.integers(40, 121, 2000)
    p_start = rng.integers(0, len(heldout) - 121, 2000)
    passages = [rng.permutation(heldout[a : a + n]) for a, n in zip(p_start, p_len, strict=True)]
    folder.mkdir(parents=True, exist_ok=True)
    protected_texts = _texts(vocab_arr, np.concatenate(passages), np.r_[0, np.cumsum(p_len)]).to_pylist()
    with open(folder / "protected.jsonl", "w", encoding="utf-8") as fh:
        for t in protected_texts:
            fh.write(json.dumps({"text": t}) + "\n")

    n_copy = int(n_docs * COPY_SHARE)
    n_exact = int(n_docs * EXACT_SHARE)
    n_cont = int(n_docs * CONTAMINATED_SHARE)
    n_base = n_docs - n_copy - n_exact - n_cont
    # Bases (and the contaminated documents, which are unrelated bases too): 2..8 passages of 10..60 tokens.
    n_seg = rng.integers(2, 9, n_base + n_cont)
    seg_off = np.r_[0, np.cumsum(n_seg)]
    seg_len = rng.integers(10, 61, int(seg_off[-1]))
    seg_start = rng.integers(0, len(train) - 61, int(seg_off[-1]))
    kind = np.r_[
        np.zeros(n_base, np.int8),
        np.full(n_cont, 3, np.int8),
        np.ones(n_copy, np.int8),
        np.full(n_exact, 2, np.int8),
    ]
    base_of = np.r_[np.arange(n_base + n_cont), rng.integers(0, n_base, n_copy + n_exact)]
    target = np.r_[np.ones(n_base + n_cont), rng.choice(TARGETS, n_copy), np.ones(n_exact)]
    order = rng.permutation(n_docs)  # output position -> document
    per_source = -(-n_docs // len(SOURCES))

    def base_ids(b: int) -> np.ndarray:
        s = slice(seg_off[b], seg_off[b + 1])
        return train[_concat_ranges(seg_start[s], seg_len[s])]

    doc_ids: list[str] = [""] * n_docs
    files: dict[str, list[str]] = {s: [] for s in SOURCES}
    for si, sid in enumerate(SOURCES):
        for f0 in range(si * per_source, min((si + 1) * per_source, n_docs), FILE_DOCS):
            f1 = min(f0 + FILE_DOCS, (si + 1) * per_source, n_docs)
            pieces, lens = [], []
            for pos in range(f0, f1):
                d = order[pos]
                doc_ids[d] = f"{sid}:{pos - si * per_source}"
                ids = base_ids(base_of[d])
                if kind[d] == 1:
                    ids = _mutate(rng, ids, float(target[d]), train)
                elif kind[d] == 3:  # a 30-token protected window inserted at a random point
                    window = passages[int(rng.integers(0, len(passages)))][:30]
                    at = int(rng.integers(0, len(ids) + 1))
                    ids = np.concatenate([ids[:at], window, ids[at:]])
                pieces.append(ids)
                lens.append(len(ids))
            texts = _texts(vocab_arr, np.concatenate(pieces), np.r_[0, np.cumsum(lens)])
            py = texts.to_pylist()
            n = len(py)
            k0 = f0 - si * per_source
            table = pa.table(
                {
                    "id": [f"{sid}:{k0 + i}" for i in range(n)],
                    "text": texts,
                    "source_id": [sid] * n,
                    "url": [None] * n,
                    "license_spdx": ["CC-BY-4.0"] * n,
                    "lang": ["en"] * n,
                    "n_chars": pa.array([len(t) for t in py], pa.int32()),
                    "sha256": pa.array([hashlib.sha256(t.encode()).digest() for t in py], pa.binary(32)),
                    "repairs": pa.array([[] for _ in range(n)], pa.list_(pa.string())),
                    "lang_score": pa.array([1.0] * n, pa.float32()),
                    "lang_sample_chars": pa.array([0] * n, pa.int32()),
                    "lang_label": ["en"] * n,
                },
                schema=CLEAN_DOC_SCHEMA,
            )
            path = folder / "clean" / sid / f"docs-{len(files[sid]):05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path, compression="zstd", compression_level=1, row_group_size=2048)
            files[sid].append(str(path))
    # Truth: planted (base, copy) pairs with their Jaccard by the plain-Python reference.
    copies = np.flatnonzero(kind != 0)
    family = {doc_ids[d]: int(base_of[d]) for d in range(n_docs)}
    meta = {
        "version": GEN_VERSION,
        "n_docs": n_docs,
        "files": files,
        "protected": str(folder / "protected.jsonl"),
        "contaminated": sorted(doc_ids[d] for d in copies if kind[d] == 3),
        "planted": [[doc_ids[base_of[d]], doc_ids[d], int(kind[d])] for d in copies if kind[d] in (1, 2)],
        "generate_seconds": 0.0,
    }
    (folder / "family.json").write_text(json.dumps(family))
    meta["planted_jaccard"] = truth_jaccard(files, meta["planted"])
    meta["generate_seconds"] = round(time.monotonic() - start, 1)
    meta_path.write_text(json.dumps(meta))
    return meta


def _truth_chunk(pairs: list[tuple[str, str]]) -> list[float]:
    from corpus_dagster.lib.text import words

    out = []
    for x, y in pairs:
        wx, wy = words(x), words(y)
        a = {tuple(wx[i : i + 5]) for i in range(len(wx) - 4)}
        b = {tuple(wy[i : i + 5]) for i in range(len(wy) - 4)}
        out.append(len(a & b) / len(a | b) if a | b else 0.0)
    return out


def truth_jaccard(files: dict[str, list[str]], planted: list[list]) -> list[float]:
    """Reference Jaccard of each planted pair (plain Python sets), two processes."""
    from concurrent.futures import ProcessPoolExecutor

    import pyarrow.parquet as pq

    needed = {x for a, b, _ in planted for x in (a, b)}
    text_of: dict[str, str] = {}
    for paths in files.values():
        for path in paths:
            t = pq.read_table(path, columns=["id", "text"])
            for i, tx in zip(t.column("id").to_pylist(), t.column("text").to_pylist(), strict=True):
                if i in needed:
                    text_of[i] = tx
    pairs = [(text_of[a], text_of[b]) for a, b, _ in planted]
    chunks = [pairs[i : i + 5000] for i in range(0, len(pairs), 5000)]
    with ProcessPoolExecutor(2) as pool:
        return [j for part in pool.map(_truth_chunk, chunks) for j in part]


# --------------------------------------------------------------------------------------------- steps
def _rss_mb() -> float:
    """This process' own peak RSS (VmHWM: not inherited from the bench parent, unlike ru_maxrss)."""
    from corpus_dagster.core.memory import peak_rss_mb

    return peak_rss_mb()


def step_signatures(folder: Path, workers: int, subset: list[str] | None) -> dict:
    """(subprocess) compute_signatures for every source, or for the `subset` files as one source."""
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.minhash.signatures import compute_signatures

    meta = json.loads((folder / "corpus.json").read_text())
    cfg = Settings.from_resolved(load_config()).near_dup
    jobs = {"subset": subset} if subset is not None else meta["files"]
    out = {"docs": 0, "seconds": 0.0, "no_signature": 0}
    start = time.monotonic()
    for sid, files in jobs.items():
        target = folder / ("sig-subset" if subset is not None else "sig") / f"{sid}.parquet"
        stats = compute_signatures([Path(f) for f in files], target, cfg, workers=workers)
        out["docs"] += stats["docs"]
        out["no_signature"] += stats["no_signature"]
    out["seconds"] = time.monotonic() - start
    out["peak_rss_mb"] = round(_rss_mb(), 1)
    return out


def step_dedup(folder: Path, workers: int) -> dict:
    """(subprocess) run_dedup over all sources with the protected set."""
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.dedup.corpus_dedup import DedupSource, run_dedup

    meta = json.loads((folder / "corpus.json").read_text())
    settings = Settings.from_resolved(load_config(
        overrides={"dedup": {"protected_sets": [{"name": "heldout-eval", "path": meta["protected"]}]}}
    ))
    sources = [
        DedupSource(s, [Path(f) for f in fs], folder / "sig" / f"{s}.parquet")
        for s, fs in meta["files"].items()
    ]
    start = time.monotonic()
    stats = run_dedup(sources, settings.dedup, folder / "dedup", workers=workers, near=settings.near_dup)
    stats["total_seconds"] = time.monotonic() - start
    stats["peak_rss_mb_total"] = max(stats["peak_rss_mb"].values())
    return stats


DATATROVE_SCRIPT = r"""
import json, sys, tempfile, time
import pyarrow.parquet as pq
from datatrove.data import Document
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
files = json.loads(sys.argv[1])
docs = []
for f in files:
    t = pq.read_table(f, columns=["id", "text"])
    docs += [Document(text=x, id=i) for i, x in zip(t.column("id").to_pylist(), t.column("text").to_pylist())]
with tempfile.TemporaryDirectory() as out:
    step = MinhashDedupSignature(out, MinhashConfig(n_grams=5, num_buckets=16, hashes_per_bucket=8, seed=1))
    step.word_tokenizer.word_tokenize("warm up the tokenizer")
    start = time.monotonic()
    step.run(iter(docs), rank=0, world_size=1)
    seconds = time.monotonic() - start
print(json.dumps({"docs": len(docs), "seconds": seconds}))
"""


def step_datatrove(files: list[str]) -> dict:
    """datatrove's MinhashDedupSignature (16 x 8 = 128 hashes, 5-grams, one task) on the given files."""
    from datatrove_env import ensure_datatrove_env

    python = ensure_datatrove_env()
    proc = subprocess.run(
        [str(python), "-c", DATATROVE_SCRIPT, json.dumps(files)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pq_rows(path: str) -> int:
    """Rows of a Parquet file (from its footer)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def run_sub(*args: str) -> dict:
    """Run one step of this script in a fresh interpreter (its own peak RSS); returns its JSON."""
    env = dict(os.environ, POLARS_MAX_THREADS=os.environ.get("POLARS_MAX_THREADS", "2"))
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"step {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------- scoring
def evaluate(folder: Path, meta: dict, threshold: float = 0.8) -> dict:
    """Precision and recall of the dedup tables against the planted truth."""
    import pyarrow.parquet as pq

    family = json.loads((folder / "family.json").read_text())
    dropped = pq.read_table(folder / "dedup" / "dropped.parquet").to_pylist()
    clusters = dict(
        zip(
            *(
                pq.read_table(folder / "dedup" / "clusters.parquet").column(c).to_pylist()
                for c in ("id", "cluster_min_id")
            ),
            strict=True,
        )
    )
    exact_to = {r["id"]: r["matched_id"] for r in dropped if r["reason"] == "exact"}
    decont = {r["id"] for r in dropped if r["reason"] == "decontaminated"}

    def home(doc: str) -> str:
        doc = exact_to.get(doc, doc)
        return clusters.get(doc, doc)

    buckets = {"[0.80,0.85)": [0, 0], "[0.85,0.90)": [0, 0], "[0.90,1.00]": [0, 0], "exact copies": [0, 0]}
    low_merged = low_total = 0
    for (a, b, kind), j in zip(meta["planted"], meta["planted_jaccard"], strict=True):
        if a in decont or b in decont:
            continue
        same = home(a) == home(b)
        if kind == 2:
            key = "exact copies"
        elif j >= 0.9:
            key = "[0.90,1.00]"
        elif j >= 0.85:
            key = "[0.85,0.90)"
        elif j >= 0.8:
            key = "[0.80,0.85)"
        else:
            low_total += 1
            low_merged += same
            continue
        buckets[key][0] += same
        buckets[key][1] += 1
    near = [r for r in dropped if r["reason"] == "near"]
    near_tp = sum(1 for r in near if family.get(r["id"]) == family.get(r["matched_id"]))
    ex = [r for r in dropped if r["reason"] == "exact"]
    ex_tp = sum(1 for r in ex if family.get(r["id"]) == family.get(r["matched_id"]))
    hi = [buckets["[0.85,0.90)"][i] + buckets["[0.90,1.00]"][i] for i in (0, 1)]
    planted_cont = set(meta["contaminated"])
    return {
        "recall_ge_0.85": hi[0] / hi[1] if hi[1] else None,
        "recall_by_band": {k: (v[0] / v[1] if v[1] else None, v[1]) for k, v in buckets.items()},
        "precision_near": near_tp / len(near) if near else None,
        "precision_exact": ex_tp / len(ex) if ex else None,
        "planted_under_0.8_merged": f"{low_merged}/{low_total}",
        "near_dropped_under_threshold_to_kept": sum(
            1 for r in near if r["jaccard"] is not None and r["jaccard"] < threshold
        ),
        "decontam_recall": len(decont & planted_cont) / len(planted_cont) if planted_cont else None,
        "decontam_unplanted": len(decont - planted_cont),
    }


# --------------------------------------------------------------------------------------------- main
def parse_size(text: str) -> int:
    text = text.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if text[-1] in "km" else text) * mult)


def bench_size(n_docs: int, workers: int, datatrove_docs: int) -> dict:
    folder = OUT / f"n{n_docs}"
    t0 = time.monotonic()
    meta = generate(n_docs, folder)
    print(f"[{n_docs}] corpus ready in {time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)
    sig = run_sub("_signatures", str(folder), str(workers))
    print(f"[{n_docs}] signatures {sig['seconds']:.1f}s", file=sys.stderr, flush=True)
    dedup = run_sub("_dedup", str(folder), str(workers))
    (folder / "dedup_stats.json").write_text(json.dumps(dedup, default=str))
    print(f"[{n_docs}] run_dedup {dedup['total_seconds']:.1f}s", file=sys.stderr, flush=True)
    # The same documents for both: whole files, across sources, until datatrove_docs documents.
    subset, subset_docs = [], 0
    for path in (f for files in meta["files"].values() for f in files):
        if subset_docs >= datatrove_docs:
            break
        subset.append(path)
        subset_docs += pq_rows(path)
    ours_subset = run_sub("_signatures_subset", str(folder), json.dumps(subset))
    dt = step_datatrove(subset)
    print(f"[{n_docs}] datatrove {dt}", file=sys.stderr, flush=True)
    return {
        "n_docs": n_docs,
        "signatures": sig,
        "dedup": dedup,
        "ours_subset": ours_subset,
        "datatrove": dt,
        "quality": evaluate(folder, meta, 0.8),
    }


def planted_engines(n_docs: int, workers: int) -> Path:
    """The planted corpus (generated once) with its signatures and run_dedup tables, computed by this code
    every time (a few seconds at 10k documents): tables left by another checkout or an earlier commit would
    score that code instead."""
    folder = OUT / f"n{n_docs}"
    generate(n_docs, folder)
    run_sub("_signatures", str(folder), str(workers))
    dedup = run_sub("_dedup", str(folder), str(workers))
    (folder / "dedup_stats.json").write_text(json.dumps(dedup, default=str))
    return folder


def accuracy(sizes: list[int], corpus: str, bench_mb: int, workers: int) -> list[dict]:
    """Both near-duplicate engines against the exact ground truth (bench/dedup_accuracy.py), per corpus."""
    import dedup_accuracy

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    runs = []
    if corpus in ("planted", "both"):
        for n in sizes:
            folder = planted_engines(n, workers)
            runs.append(dedup_accuracy.planted_run(folder, json.loads((folder / "corpus.json").read_text())))
    if corpus in ("bench", "both"):
        runs.append(dedup_accuracy.bench_corpus_run(bench_mb, log))
    results = [dedup_accuracy.score(run, log) for run in runs]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "accuracy.json").write_text(json.dumps(results, indent=1, default=str))
    dedup_accuracy.print_accuracy(results)
    return results


def print_table(results: list[dict], workers: int) -> None:
    sizes = [r["n_docs"] for r in results]
    head = f"{'metric':<44}" + "".join(f"{n:>14,}" for n in sizes)
    print(head)
    print("-" * len(head))

    def row(label: str, values: list) -> None:
        cells = []
        for v in values:
            if v is None:
                cells.append(f"{'-':>14}")
            elif isinstance(v, float):
                cells.append(f"{v:>14.3f}" if v < 100 else f"{v:>14,.0f}")
            else:
                cells.append(f"{v!s:>14}")
        print(f"{label:<44}" + "".join(cells))

    row(f"signatures seconds (workers={workers})", [r["signatures"]["seconds"] for r in results])
    row("signatures docs/s", [r["signatures"]["docs"] / r["signatures"]["seconds"] for r in results])
    row("signatures peak RSS MB", [r["signatures"]["peak_rss_mb"] for r in results])
    for step in ("decontaminate", "exact", "lsh", "verify", "components", "write"):
        row(f"run_dedup {step} seconds", [r["dedup"]["seconds"][step] for r in results])
    for step in ("decontaminate", "exact", "lsh", "verify", "components", "write"):
        row(f"peak RSS MB during {step}", [r["dedup"]["peak_rss_mb"][step] for r in results])
    row(
        "peak RSS MB, LSH+verify+components",
        [max(r["dedup"]["peak_rss_mb"][s] for s in ("lsh", "verify", "components")) for r in results],
    )
    row("run_dedup docs/s", [r["n_docs"] / r["dedup"]["total_seconds"] for r in results])
    core = [sum(r["dedup"]["seconds"][s] for s in ("lsh", "verify", "components")) for r in results]
    row("LSH+verify+components seconds", core)
    row("  ... microseconds per doc", [c / r["n_docs"] * 1e6 for c, r in zip(core, results, strict=True)])
    row("candidate pairs", [r["dedup"]["candidate_pairs"] for r in results])
    row("verified pairs (>= 0.8)", [r["dedup"]["verified_pairs"] for r in results])
    row(
        "exact / near dropped",
        [f"{r['dedup']['exact_dropped']}/{r['dedup']['near_dropped']}" for r in results],
    )
    row("decontaminated", [r["dedup"]["decontaminated"] for r in results])
    row("no signature (< 5 words)", [r["dedup"]["no_signature"] for r in results])
    row(
        "clusters / largest",
        [
            f"{r['dedup']['n_clusters']}/{(r['dedup']['largest_clusters'] or [{'size': 0}])[0]['size']}"
            for r in results
        ],
    )
    row("recall, planted J >= 0.85", [r["quality"]["recall_ge_0.85"] for r in results])
    for band in ("[0.80,0.85)", "[0.85,0.90)", "[0.90,1.00]", "exact copies"):
        row(
            f"  recall {band} (pairs)",
            [
                f"{r['quality']['recall_by_band'][band][0] or 0:.3f} ({r['quality']['recall_by_band'][band][1]})"
                for r in results
            ],
        )
    row("precision near (same planted family)", [r["quality"]["precision_near"] for r in results])
    row("precision exact", [r["quality"]["precision_exact"] for r in results])
    row("planted pairs < 0.8 merged", [r["quality"]["planted_under_0.8_merged"] for r in results])
    row(
        "near dropped with J to kept < 0.8 (chains)",
        [r["quality"]["near_dropped_under_threshold_to_kept"] for r in results],
    )
    row("decontamination recall (planted)", [r["quality"]["decontam_recall"] for r in results])
    row("decontaminated, not planted", [r["quality"]["decontam_unplanted"] for r in results])
    row("datatrove subset docs", [r["datatrove"].get("docs") for r in results])
    row(
        "datatrove MinhashDedupSignature docs/s",
        [
            r["datatrove"]["docs"] / r["datatrove"]["seconds"] if "docs" in r["datatrove"] else None
            for r in results
        ],
    )
    row(
        "ours on the same subset docs/s (1 worker)",
        [r["ours_subset"]["docs"] / r["ours_subset"]["seconds"] for r in results],
    )
    row(
        "ratio ours / datatrove (same docs)",
        [
            (r["ours_subset"]["docs"] / r["ours_subset"]["seconds"])
            / (r["datatrove"]["docs"] / r["datatrove"]["seconds"])
            if "docs" in r["datatrove"]
            else None
            for r in results
        ],
    )
    if len(results) >= 2:
        a, b = results[-2], results[-1]
        ca = sum(a["dedup"]["seconds"][s] for s in ("lsh", "verify", "components"))
        cb = sum(b["dedup"]["seconds"][s] for s in ("lsh", "verify", "components"))
        n_ratio = b["n_docs"] / a["n_docs"]
        nlogn = n_ratio * math.log(b["n_docs"]) / math.log(a["n_docs"])
        print(
            f"\nLSH+verify+components time grew {cb / ca:.2f}x for {n_ratio:.0f}x documents (n log n bound: {nlogn:.2f}x)"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        cmd, folder = sys.argv[1], Path(sys.argv[2])
        if cmd == "_signatures":
            print(json.dumps(step_signatures(folder, int(sys.argv[3]), None)))
        elif cmd == "_signatures_subset":
            print(json.dumps(step_signatures(folder, 1, json.loads(sys.argv[3]))))
        elif cmd == "_dedup":
            print(json.dumps(step_dedup(folder, int(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10k documents only")
    parser.add_argument(
        "--sizes", default="10k,100k", help="comma-separated sizes: 10k, 100k, 1m or integers"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes for signatures and run_dedup"
    )
    parser.add_argument(
        "--datatrove-docs", type=int, default=20_000, help="documents datatrove hashes (its files)"
    )
    parser.add_argument(
        "--accuracy", action="store_true",
        help="only the accuracy of dedup and the analysis against the exact ground truth",
    )
    parser.add_argument(
        "--with-accuracy", action="store_true", help="the throughput table, then the accuracy table"
    )
    parser.add_argument(
        "--corpus", choices=["planted", "bench", "both"], default="both",
        help="accuracy on the planted corpora (--sizes/--quick), the bench/pipeline.py corpus, or both",
    )
    parser.add_argument("--bench-mb", type=int, default=160, help="size of the bench/pipeline.py corpus")
    args = parser.parse_args()
    sizes = [10_000] if args.quick else [parse_size(s) for s in args.sizes.split(",")]
    datatrove_docs = min(args.datatrove_docs, 5_000) if args.quick else args.datatrove_docs
    if not args.accuracy:
        results = [bench_size(n, args.workers, datatrove_docs) for n in sizes]
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(results, indent=1, default=str))
        print_table(results, args.workers)
    if args.accuracy or args.with_accuracy:
        print()
        accuracy(sizes, args.corpus, args.bench_mb, args.workers)


if __name__ == "__main__":
    main()
