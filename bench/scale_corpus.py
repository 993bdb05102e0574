"""bench/pipeline.py --scale N: the bench corpus at N times its size, with the 1x corpus's duplicate rates.

Replicating every document N times (the old --scale) made (N-1)/N of the corpus near duplicates, so the
dedup and analysis stages met a corpus unlike the real one. Here the scaled corpus holds the 1x corpus
unchanged plus (N-1) x its documents per source kind, each new document recombined from that kind's
paragraphs (split on blank lines) with a length drawn from the kind's 1x document lengths; then the 1x
corpus's measured exact and near-duplicate shares of the new documents are planted as exact copies and
light perturbations (a few lines altered) of other new documents of the kind. Everything comes from
`random.Random` with fixed string seeds (seeded through SHA-512, so no hash randomization), in file order.

Duplicate shares are measured without the pipeline, the same way on both corpora: exact = removable
documents with the same SHA-256 of the text; near = removable documents among the distinct texts
(union of every pair found by datasketch's MinHashLSH at Jaccard 0.7 whose MinHash estimate is >= 0.7),
over sets of 5-word shingles of the lowercased words (runs of letters and digits, the project's rule).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

SEED = "corpus-dagster bench/pipeline.py --scale, recombined paragraphs v1"
FORMAT = 1  # bump when the builder changes: a cached scaled corpus of another format is rebuilt
THRESHOLD = 0.7
NUM_PERM = 128
SHINGLE = 5
BATCH = 1 << 15  # shingles per MinHash update: bounds the (shingles x permutations) matrix of a long document
PARAGRAPH_MAX = 2000  # characters; about the 99th percentile of the bench corpus's paragraphs
NEAR_MIN_SHINGLES = 60  # a near copy alters ~1 line per 60 shingles: its Jaccard to the source stays ~0.85
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_NON_ALNUM = re.compile(r"[\W_]+")
_MIX = np.uint64(0x9E3779B97F4A7C15)


# --------------------------------------------------------------------------------------- measuring


class _WordHashes(dict):
    """word -> a stable 64-bit hash (BLAKE2b), each computed once: Python's hash() is randomized per process."""

    def __missing__(self, word: str) -> int:
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        self[word] = h
        return h


def shingle_hashes(text: str, words: _WordHashes) -> np.ndarray:
    """The text's set of 5-word shingles as sorted unique 32-bit hashes (empty under 5 words)."""
    toks = _NON_ALNUM.sub(" ", text.lower()).split()
    if len(toks) < SHINGLE:
        return np.zeros(0, dtype=np.uint32)
    h = np.fromiter(map(words.__getitem__, toks), dtype=np.uint64, count=len(toks))
    n = len(h) - SHINGLE + 1
    s = h[:n].copy()
    for j in range(1, SHINGLE):
        s = s * _MIX + h[j:j + n]  # uint64 arrays wrap silently: a polynomial of the word hashes
    return np.unique((s >> np.uint64(32)).astype(np.uint32))


def minhash(hv: np.ndarray) -> Any:
    """datasketch's MinHash (affine32, seed 1) of a set of 32-bit shingle hashes, in bounded batches."""
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=int)
    for i in range(0, len(hv), BATCH):
        m.update_batch(hv[i:i + BATCH].tolist())
    return m


def duplicate_counts(texts: Iterable[str], words: _WordHashes | None = None) -> dict[str, int]:
    """{"docs", "exact", "near"}: documents, exact duplicates (beyond the first of each text) and near
    duplicates among the distinct texts (documents a dedup keeping one per near cluster would remove)."""
    from datasketch import MinHashLSH

    words = words if words is not None else _WordHashes()
    seen: set[bytes] = set()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    sketches: list[Any] = []
    parent: list[int] = []

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    docs = exact = near = 0
    for text in texts:
        docs += 1
        digest = hashlib.sha256(text.encode()).digest()
        if digest in seen:
            exact += 1
            continue
        seen.add(digest)
        hv = shingle_hashes(text, words)
        if not len(hv):
            continue  # under 5 words: no shingles, never a near duplicate
        m = minhash(hv)
        i = len(sketches)
        sketches.append(m)
        parent.append(i)
        for j in lsh.query(m):
            if m.jaccard(sketches[j]) >= THRESHOLD:
                a, b = root(i), root(j)
                if a != b:
                    parent[a] = b
                    near += 1  # one more document in a cluster that keeps one
        lsh.insert(i, m)
    return {"docs": docs, "exact": exact, "near": near}


def iter_texts(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)["text"]


def measure(folder: Path, kinds: list[str]) -> dict[str, dict[str, int]]:
    """duplicate_counts of every kind's file of a corpus folder (duplicates within a kind)."""
    words = _WordHashes()
    return {kind: duplicate_counts(iter_texts(folder / f"{kind}.jsonl"), words) for kind in kinds}


# ---------------------------------------------------------------------------------------- building


def _paragraphs(texts: Iterable[str]) -> list[str]:
    """Every paragraph (text between blank lines) of the kind's documents, in file order, repeats kept; one
    over PARAGRAPH_MAX bytes is cut into runs of whole lines, else a document without blank lines (a
    400 KB symbol list, an HTML page) would come back nearly whole in every new document that draws it."""
    out: list[str] = []
    for t in texts:
        for raw in _PARAGRAPH.split(t):
            p = raw.strip("\n")
            if not p.strip():
                continue
            if len(p) <= PARAGRAPH_MAX:
                out.append(p)
                continue
            run: list[str] = []
            size = 0
            for line in p.split("\n"):
                if run and size + len(line) > PARAGRAPH_MAX:
                    out.append("\n".join(run))
                    run, size = [], 0
                run.append(line)
                size += len(line) + 1
            if "".join(run).strip():
                out.append("\n".join(run))
    return out


def _draw(rng: random.Random, target: int, sizes: list[int]) -> list[int]:
    """Paragraph indices of one new document of about `target` bytes: paragraphs drawn uniformly; the one
    that would cross the target is kept with probability (room left / its size), so the expected size is
    the target and a giant paragraph (a whole README without blank lines) is drawn about as often as its
    bytes are needed."""
    picked: list[int] = []
    total = 0
    while True:
        j = rng.randrange(len(sizes))
        size = sizes[j] + (2 if picked else 0)
        if total + size <= target:
            picked.append(j)
            total += size
            continue
        if rng.random() * size < target - total:
            picked.append(j)
        if picked:
            return picked


def alter(text: str, rng: random.Random, tag: int) -> str:
    """A light perturbation, like the old replicas: about one line per 60 shingles (at least one) gets a
    word appended, so exact dedup misses the copy and its 5-word-shingle Jaccard to the source stays ~0.85."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    words = len(_NON_ALNUM.sub(" ", text).split())
    for i in rng.sample(filled, min(len(filled), max(1, words // NEAR_MIN_SHINGLES))):
        lines[i] = f"{lines[i]} [v{tag}]"
    return "\n".join(lines)


def build_kind(src: Path, dst: Path, kind: str, scale: int, base: dict[str, int]) -> dict[str, Any]:
    """Write the kind's scaled file: its 1x documents unchanged, then (scale-1) x as many new documents
    (fresh recombinations, exact copies and near copies of fresh ones, shuffled). Returns its READY entry."""
    shutil.copyfile(src, dst)
    texts = list(iter_texts(src))
    n_base = len(texts)
    entry: dict[str, Any] = {"docs": n_base, "text_bytes": sum(len(t.encode()) for t in texts), "base_docs": n_base,
                             "planted_exact": 0, "planted_near": 0}
    n_new = (scale - 1) * n_base
    if not n_new:
        return entry
    rng = random.Random(f"{SEED}|{kind}|x{scale}")
    lengths = [len(t.encode()) for t in texts]
    pool = _paragraphs(texts)
    del texts
    sizes = [len(p.encode()) for p in pool]
    n_words = [len(_NON_ALNUM.sub(" ", p).split()) for p in pool]
    n_exact = round(n_new * base["exact"] / n_base)
    n_near = round(n_new * base["near"] / n_base)
    n_exact = min(n_exact, n_new - 1)  # at least one fresh document to copy from
    n_near = min(n_near, n_new - 1 - n_exact)
    fresh = [_draw(rng, rng.choice(lengths), sizes) for _ in range(n_new - n_exact - n_near)]
    long_enough = [i for i, f in enumerate(fresh) if sum(n_words[j] for j in f) >= NEAR_MIN_SHINGLES + SHINGLE]
    near_from = long_enough or list(range(len(fresh)))
    plan = ([("fresh", i) for i in range(len(fresh))] + [("exact", rng.randrange(len(fresh))) for _ in range(n_exact)]
            + [("near", rng.choice(near_from)) for _ in range(n_near)])
    rng.shuffle(plan)
    nbytes = 0
    with open(dst, "a", encoding="utf-8") as fh:
        for k, (role, i) in enumerate(plan):
            text = "\n\n".join(pool[j] for j in fresh[i])
            if role == "near":
                text = alter(text, rng, k)
            nbytes += len(text.encode())
            row = {"text": text, "url": f"bench://scaled-x{scale}/{kind}/{k}"}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    entry.update(docs=n_base + n_new, text_bytes=entry["text_bytes"] + nbytes, planted_exact=n_exact,
                 planted_near=n_near)
    return entry


def self_check(info: dict[str, Any], scale: int, out: Any = sys.stderr) -> None:
    """Print, per kind and in total, the exact and near-duplicate shares of the 1x corpus beside those
    measured on the scaled one, so a reader sees the builder kept them (and bytes grew ~scale x)."""
    def pct(n: int, d: int) -> str:
        return f"{100 * n / d:5.1f}%" if d else "    -"

    def grew(n: int, d: int) -> str:
        return f"{n / d:6.1f}x" if d else "      -"

    kinds = {k: v for k, v in info.items() if not k.startswith("_")}
    print(f"scaled corpus x{scale}: duplicate shares per kind (datasketch MinHashLSH at {THRESHOLD}, "
          f"{SHINGLE}-word shingles; exact = same SHA-256)", file=out)
    print(f"  {'kind':<18} {'docs 1x':>8} {'docs':>8} {'bytes x':>7} | {'exact 1x':>8} {'exact':>6} | "
          f"{'near 1x':>7} {'near':>6} | planted exact, near", file=out)
    tot = dict.fromkeys(("d1", "d", "e1", "e", "n1", "n", "b1", "b", "pe", "pn"), 0)
    for kind, v in sorted(kinds.items()):
        b, m = v["base_measured"], v["measured"]
        print(f"  {kind:<18} {b['docs']:>8,} {m['docs']:>8,} {grew(v['text_bytes'], v['base_text_bytes'])} | "
              f"{pct(b['exact'], b['docs']):>8} {pct(m['exact'], m['docs']):>6} | {pct(b['near'], b['docs']):>7} "
              f"{pct(m['near'], m['docs']):>6} | {v['planted_exact']:,}, {v['planted_near']:,}", file=out)
        for key, val in (("d1", b["docs"]), ("d", m["docs"]), ("e1", b["exact"]), ("e", m["exact"]),
                         ("n1", b["near"]), ("n", m["near"]), ("b1", v["base_text_bytes"]), ("b", v["text_bytes"]),
                         ("pe", v["planted_exact"]), ("pn", v["planted_near"])):
            tot[key] += val
    print(f"  {'all kinds':<18} {tot['d1']:>8,} {tot['d']:>8,} {grew(tot['b'], tot['b1'])} | "
          f"{pct(tot['e1'], tot['d1']):>8} {pct(tot['e'], tot['d']):>6} | {pct(tot['n1'], tot['d1']):>7} "
          f"{pct(tot['n'], tot['d']):>6} | {tot['pe']:,}, {tot['pn']:,}", file=out, flush=True)


def ready_format(folder: Path) -> int | None:
    """The builder format of a cached scaled corpus (None: none there, or unfinished)."""
    try:
        return json.loads((folder / "_READY.json").read_text()).get("_builder", {}).get("format")
    except (OSError, ValueError):
        return None


def build_scaled(base: Path, folder: Path, scale: int) -> dict[str, Any]:
    """Build (into a temporary folder, then renamed) the scaled corpus of `base` at `folder`; measure and
    self-check it; returns its READY info (per kind: docs, text bytes, planted counts, measured shares)."""
    info = json.loads((base / "_READY.json").read_text())
    kinds = sorted(k for k in info if not k.startswith("_"))
    base_counts = measure(base, kinds)
    tmp = folder.with_name(f"{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    out: dict[str, Any] = {}
    for kind in kinds:
        out[kind] = build_kind(base / f"{kind}.jsonl", tmp / f"{kind}.jsonl", kind, scale, base_counts[kind])
        out[kind]["base_text_bytes"] = info[kind]["text_bytes"]
        out[kind]["base_measured"] = base_counts[kind]
        print(f"  scaled x{scale} {kind}: {out[kind]['docs']:,} documents, {out[kind]['text_bytes'] / 1e6:.1f} MB",
              file=sys.stderr, flush=True)
    for kind, counts in measure(tmp, kinds).items():
        out[kind]["measured"] = counts
    out["_builder"] = {"format": FORMAT, "seed": SEED, "base": str(base), "scale": scale}
    self_check(out, scale)
    (tmp / "_READY.json").write_text(json.dumps(out, indent=1))
    if ready_format(folder) == FORMAT:  # another run built it meanwhile: the same bytes, keep theirs
        shutil.rmtree(tmp)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    return out
