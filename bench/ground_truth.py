"""Exact near-duplicate ground truth: every pair of distinct texts with Jaccard >= t, found without MinHash.

    .venv/bin/python bench/ground_truth.py --threshold 0.7 FILE.parquet [FILE.parquet ...]
    .venv/bin/python bench/ground_truth.py --self-test     # against brute force on a few hundred small docs

Both near-duplicate engines of the project (the dedup stage and the corpus analysis) find candidates by
MinHash LSH, so neither can tell what it missed. This script answers that with a prefix-filter similarity
join (AllPairs / PPJoin without the positional filter), which is exact: it shares no code with
`corpus_dagster`; its shingles come from `verify/_reference.py`, the project's independent reference
(lowercase, non-alphanumeric runs separate words, sets of 5 consecutive words, no shingles under 5 words).

Algorithm: exact duplicates are collapsed by the SHA-256 of the text (Jaccard 1 by definition; reported as
groups); each distinct text's shingle set becomes integer tokens ranked by ascending corpus frequency
(rare first); a set x of size n is indexed by its first n - ceil(t n) + 1 tokens (the prefix filter: two
sets at Jaccard >= t share a token of those prefixes), pairs sharing a prefix token that pass the size
filter (|small| >= t |large|) are candidates, and every candidate is verified by its exact intersection
count. Every threshold decision is in integers (t is read as a decimal fraction), so 0.7 means 7/10.

Shingles are compared by 64-bit hashes (`_reference.shingle_hashes`): two different shingles of the whole
corpus collide with probability about (distinct shingles)^2 / 2^65, 2e-5 for 25 million.

Results are cached under bench/out/ground_truth/<key>/ with key = sha256 of the input files' names and
bytes and of t: `docs.parquet` (id, text: its distinct text's number, texts numbered in order of their
smallest id), `texts.parquet` (text, rep_id: its smallest id, n_shingles), `pairs.parquet` (a < b text
numbers, id_a/id_b their smallest ids, intersection, union, jaccard) and `stats.json`. The pairs do not
depend on the run; the count of candidates verified does a little, since tokens of equal frequency are
ordered by hash value and Python's string hash is seeded per process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from verify._reference import iter_documents, jaccard, shingle_hashes, shingle_set  # noqa: E402

OUT = HERE / "out" / "ground_truth"
CODE_VERSION = 1
TOKEN_BITS = 36  # token numbers < 2^36 and text numbers < 2^28 share one uint64 sort key
TEXT_BITS = 28
PAIR_CHUNK = 8_000_000  # candidate pairs generated, or shingle lookups verified, per vectorized chunk


def as_fraction(threshold: str | float | Fraction) -> Fraction:
    """The threshold as an exact fraction: "0.7" and 0.7 are both 7/10 (never 0.69999999999999996)."""
    t = Fraction(str(threshold)) if not isinstance(threshold, Fraction) else threshold
    if not 0 < t <= 1:
        raise ValueError(f"threshold {threshold} is not in (0, 1]")
    return t


def _concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """starts[0]..starts[0]+lengths[0]-1, starts[1]..: the indices of several ranges, concatenated."""
    lengths = lengths.astype(np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64) - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def _unique(a: np.ndarray) -> np.ndarray:
    """Sorted unique values (np.unique, without its extra passes)."""
    if not a.size:
        return a
    a = np.sort(a)
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


@dataclass
class Join:
    """Pairs of set numbers a < b with Jaccard >= t, their exact counts, and what the join did."""

    a: np.ndarray
    b: np.ndarray
    intersection: np.ndarray
    union: np.ndarray
    candidates: int  # distinct candidate pairs verified
    prefix_entries: int


def tokenize(sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sizes, starts, tokens): every set's shingle hashes replaced by token numbers ranked by ascending
    corpus frequency (ties by hash value), each set's tokens sorted ascending, sets concatenated."""
    sizes = np.fromiter((s.size for s in sets), np.int64, len(sets))
    if len(sets) >= 1 << TEXT_BITS:
        raise ValueError(f"{len(sets)} sets: at most 2^{TEXT_BITS}")
    starts = np.cumsum(sizes) - sizes
    if not sizes.sum():
        return sizes, starts, np.empty(0, np.int64)
    flat = np.concatenate(sets)
    uniq, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
    del flat
    if uniq.size >= 1 << TOKEN_BITS:
        raise ValueError(f"{uniq.size} distinct shingles: at most 2^{TOKEN_BITS}")
    rank = np.empty(uniq.size, np.int64)
    rank[np.lexsort((uniq, counts))] = np.arange(uniq.size)
    owner = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
    key = (owner << TOKEN_BITS) | rank[inverse.reshape(-1)]
    del inverse, owner
    key.sort()
    return sizes, starts, key & ((1 << TOKEN_BITS) - 1)


def _candidates(sizes: np.ndarray, starts: np.ndarray, tokens: np.ndarray, t: Fraction,
                chunk: int) -> tuple[np.ndarray, int]:
    """Distinct pairs (a << TEXT_BITS | b, a < b) sharing a prefix token and passing the size filter."""
    num, den = t.numerator, t.denominator
    need = -((-num * sizes) // den)  # ceil(t * size), exactly
    prefix = np.where(sizes > 0, sizes - need + 1, 0)
    owner = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    pos = np.arange(tokens.size, dtype=np.int64) - np.repeat(starts, sizes)
    in_prefix = pos < np.repeat(prefix, sizes)
    entries = np.sort((tokens[in_prefix] << TEXT_BITS) | owner[in_prefix])
    n_entries = int(entries.size)
    del owner, pos, in_prefix
    tok, doc = entries >> TEXT_BITS, entries & ((1 << TEXT_BITS) - 1)
    del entries
    # Groups of equal tokens: every member pairs with every later member (docs ascend inside a group).
    first = np.flatnonzero(np.r_[True, tok[1:] != tok[:-1]])
    group = np.diff(np.r_[first, tok.size])
    member_group = np.repeat(np.arange(first.size), group)
    later = (first[member_group] + group[member_group] - 1) - np.arange(tok.size)  # members after this one
    del tok, member_group
    found: list[np.ndarray] = []
    held = 0
    cum = np.cumsum(later)
    lo = 0
    while lo < later.size:
        hi = int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + chunk, side="right"))
        hi = max(hi, lo + 1)
        idx = np.arange(lo, hi)
        counts = later[lo:hi]
        a = np.repeat(doc[idx], counts)
        b = doc[_concat_ranges(idx + 1, counts)]
        sa, sb = sizes[a], sizes[b]
        keep = np.minimum(sa, sb) * den >= num * np.maximum(sa, sb)  # size filter
        if keep.any():
            found.append(_unique((a[keep] << TEXT_BITS) | b[keep]))
            held += found[-1].size
            if held > 4 * chunk:
                found = [_unique(np.concatenate(found))]
                held = found[0].size
        lo = hi
    pairs = _unique(np.concatenate(found)) if found else np.empty(0, np.int64)
    return pairs, n_entries


def _intersections(a: np.ndarray, b: np.ndarray, sizes: np.ndarray, starts: np.ndarray,
                   tokens: np.ndarray, chunk: int) -> np.ndarray:
    """|A & B| of every pair: each token of the smaller set looked up in the larger one's sorted keys."""
    keys = (np.repeat(np.arange(sizes.size, dtype=np.int64), sizes) << TOKEN_BITS) | tokens  # sorted
    small = np.where(sizes[a] <= sizes[b], a, b)
    large = np.where(sizes[a] <= sizes[b], b, a)
    lookups = sizes[small]
    out = np.zeros(a.size, np.int64)
    cum = np.cumsum(lookups)
    lo = 0
    while lo < a.size:
        hi = int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + chunk, side="right"))
        hi = max(hi, lo + 1)
        n = lookups[lo:hi]
        probe = (np.repeat(large[lo:hi], n) << TOKEN_BITS) | tokens[_concat_ranges(starts[small[lo:hi]], n)]
        at = np.searchsorted(keys, probe)
        at[at == keys.size] = 0
        hit = keys[at] == probe
        pair_of = np.repeat(np.arange(hi - lo), n)
        out[lo:hi] = np.bincount(pair_of, weights=hit, minlength=hi - lo).astype(np.int64)
        lo = hi
    return out


def similarity_join(sets: list[np.ndarray], threshold: str | float | Fraction, chunk: int = PAIR_CHUNK) -> Join:
    """Every pair of sets (given as sorted unique uint64 hash arrays) with Jaccard >= threshold, exactly.
    Empty sets never pair (their Jaccard is 0 by the reference's rule). `chunk` bounds the pairs or
    lookups held at once (memory), not the result."""
    t = as_fraction(threshold)
    sizes, starts, tokens = tokenize(sets)
    pairs, n_entries = _candidates(sizes, starts, tokens, t, chunk)
    a, b = pairs >> TEXT_BITS, pairs & ((1 << TEXT_BITS) - 1)
    inter = _intersections(a, b, sizes, starts, tokens, chunk)
    union = sizes[a] + sizes[b] - inter
    keep = inter * t.denominator >= t.numerator * union
    return Join(a[keep], b[keep], inter[keep], union[keep], int(pairs.size), n_entries)


# ------------------------------------------------------------------------------------------- the corpus
@dataclass
class GroundTruth:
    """The documents (id -> distinct text number), each text's shingle count, and the pairs of texts."""

    ids: list[str]
    text_of: np.ndarray  # per document (ids order): its distinct text's number
    n_shingles: np.ndarray  # per text
    a: np.ndarray  # per pair: text numbers a < b
    b: np.ndarray
    intersection: np.ndarray
    union: np.ndarray
    stats: dict

    def rep_ids(self) -> list[str]:
        """The smallest id of every distinct text (texts are numbered in that order)."""
        reps: list[str | None] = [None] * int(self.n_shingles.size)
        for doc_id, t in zip(self.ids, self.text_of.tolist(), strict=True):
            if reps[t] is None or doc_id < reps[t]:
                reps[t] = doc_id
        return reps  # type: ignore[return-value]


def cache_key(files: list[Path], threshold: Fraction) -> str:
    """sha256 of the code version, t and every input file's name and bytes, in the order given."""
    h = hashlib.sha256(f"ground_truth v{CODE_VERSION} t={threshold}\n".encode())
    for path in files:
        h.update(f"{Path(path).name}\n".encode())
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:24]


def compute(files: list[Path], threshold: Fraction, log=None) -> GroundTruth:
    """Read the documents (ids by the reference's rule), collapse exact copies, shingle, join."""
    t0 = time.monotonic()
    by_digest: dict[bytes, int] = {}
    doc_ids: list[str] = []
    doc_text: list[int] = []
    texts: list[str] = []
    for doc_id, text in iter_documents(files):
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        number = by_digest.setdefault(digest, len(by_digest))
        if number == len(texts):
            texts.append(text)
        doc_ids.append(doc_id)
        doc_text.append(number)
    del by_digest
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError("document ids are not unique across the input files")
    # Number texts in order of their smallest id, so the output does not depend on the file order.
    first_id: list[str | None] = [None] * len(texts)
    for doc_id, number in zip(doc_ids, doc_text, strict=True):
        if first_id[number] is None or doc_id < first_id[number]:
            first_id[number] = doc_id
    order = sorted(range(len(texts)), key=first_id.__getitem__)
    renumber = np.empty(len(texts), np.int64)
    renumber[order] = np.arange(len(texts))
    texts = [texts[i] for i in order]
    t_read = time.monotonic()
    sets = [shingle_hashes(text) for text in texts]
    del texts
    t_shingle = time.monotonic()
    if log:
        log(f"ground truth: {len(doc_ids):,} documents, {len(sets):,} distinct texts read in {t_read - t0:.0f} s, "
            f"shingled in {t_shingle - t_read:.0f} s")
    join = similarity_join(sets, threshold)
    sizes = np.fromiter((s.size for s in sets), np.int64, len(sets))
    stats = {
        "documents": len(doc_ids),
        "distinct_texts": len(sets),
        "texts_with_shingles": int((sizes > 0).sum()),
        "shingles": int(sizes.sum()),
        "prefix_entries": join.prefix_entries,
        "candidate_pairs_verified": join.candidates,
        "pairs": int(join.a.size),
        "threshold": str(threshold),
        "seconds": {"read": round(t_read - t0, 1), "shingle": round(t_shingle - t_read, 1),
                    "join": round(time.monotonic() - t_shingle, 1)},
    }
    return GroundTruth(doc_ids, renumber[np.asarray(doc_text, np.int64)], sizes, join.a, join.b,
                       join.intersection, join.union, stats)


def ground_truth(files: list[Path], threshold: str | float, log=None) -> GroundTruth:
    """The ground truth of these files at t, from bench/out/ground_truth/<key>/ when it was computed before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = as_fraction(threshold)
    files = [Path(f) for f in files]
    folder = OUT / cache_key(files, t)
    if (folder / "stats.json").exists():
        docs = pq.read_table(folder / "docs.parquet")
        texts = pq.read_table(folder / "texts.parquet")
        pairs = pq.read_table(folder / "pairs.parquet")
        return GroundTruth(docs.column("id").to_pylist(), docs.column("text").to_numpy(),
                           texts.column("n_shingles").to_numpy(), pairs.column("a").to_numpy(),
                           pairs.column("b").to_numpy(), pairs.column("intersection").to_numpy(),
                           pairs.column("union").to_numpy(), json.loads((folder / "stats.json").read_text()))
    truth = compute(files, t, log)
    folder.mkdir(parents=True, exist_ok=True)
    reps = truth.rep_ids()
    pq.write_table(pa.table({"id": truth.ids, "text": truth.text_of}), folder / "docs.parquet")
    pq.write_table(pa.table({"text": np.arange(truth.n_shingles.size), "rep_id": reps,
                             "n_shingles": truth.n_shingles}), folder / "texts.parquet")
    pq.write_table(pa.table({
        "a": truth.a, "b": truth.b,
        "id_a": pa.array([reps[i] for i in truth.a.tolist()], pa.string()),
        "id_b": pa.array([reps[i] for i in truth.b.tolist()], pa.string()),
        "intersection": truth.intersection, "union": truth.union,
        "jaccard": truth.intersection / np.maximum(truth.union, 1),
    }), folder / "pairs.parquet")
    (folder / "stats.json").write_text(json.dumps({**truth.stats, "files": [str(f) for f in files]}, indent=1))
    return truth


# ------------------------------------------------------------------------------------------- self-test
def _random_docs(rng: np.random.Generator, n: int) -> list[str]:
    """Small documents over a small vocabulary, so shingles are shared widely: bases, copies under word
    edits, byte-identical copies, copies differing only in case and punctuation, and a few under 5 words."""
    vocab = [f"w{i}" for i in range(12)] + ["Alpha", "beta", "GAMMA", "déjà", "x_y", "naïve"]
    docs: list[str] = []
    while len(docs) < n:
        kind = rng.random()
        if not docs or kind < 0.3:
            words = [vocab[i] for i in rng.integers(0, len(vocab), int(rng.integers(1, 40)))]
            docs.append(" ".join(words))
        elif kind < 0.75:
            words = docs[int(rng.integers(0, len(docs)))].split()
            for _ in range(int(rng.integers(1, 4))):
                pos = int(rng.integers(0, len(words) + 1))
                if rng.random() < 0.5 and words:
                    words[min(pos, len(words) - 1)] = vocab[int(rng.integers(0, len(vocab)))]
                else:
                    words.insert(pos, vocab[int(rng.integers(0, len(vocab)))])
            docs.append(" ".join(words))
        elif kind < 0.85:
            docs.append(docs[int(rng.integers(0, len(docs)))])
        else:
            docs.append(docs[int(rng.integers(0, len(docs)))].upper().replace(" ", ", ") + "!")
    return docs


def self_test(n_docs: int = 400, seed: int = 7) -> None:
    """The join against brute force (every pair, `_reference.shingle_set` and Python sets) at several
    thresholds, including ties exactly at t; raises AssertionError on the first difference."""
    rng = np.random.default_rng(seed)
    for round_ in range(3):
        docs = list(dict.fromkeys(_random_docs(rng, n_docs)))  # distinct texts, as compute() makes them
        sets = [shingle_set(d) for d in docs]
        hashed = [shingle_hashes(d) for d in docs]
        for threshold in ("0.5", "0.6", "0.7", "0.75", "0.8", "0.9", "1"):
            t = as_fraction(threshold)
            expected = {}
            for i in range(len(docs)):
                for j in range(i + 1, len(docs)):
                    inter, union = len(sets[i] & sets[j]), len(sets[i] | sets[j])
                    if union and inter * t.denominator >= t.numerator * union:
                        expected[(i, j)] = (inter, union)
                        assert abs(jaccard(sets[i], sets[j]) - inter / union) < 1e-12
            join = similarity_join(hashed, threshold)
            tiny = similarity_join(hashed, threshold, chunk=97)  # many chunks: their seams are tested too
            assert all(np.array_equal(x, y) for x, y in zip((join.a, join.b, join.intersection, join.union),
                                                             (tiny.a, tiny.b, tiny.intersection, tiny.union),
                                                             strict=True))
            got = {(int(a), int(b)): (int(i), int(u))
                   for a, b, i, u in zip(join.a, join.b, join.intersection, join.union, strict=True)}
            assert got == expected, (round_, threshold, set(got) ^ set(expected))
            ties = sum(1 for i, u in expected.values() if i * t.denominator == t.numerator * u)
            print(f"self-test round {round_} t={threshold}: {len(docs)} texts, {len(expected)} pairs "
                  f"({ties} exactly at t), {join.candidates} candidates verified: equal to brute force")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="Parquet files with a text column (and an id column)")
    ap.add_argument("--threshold", default="0.7", help="Jaccard floor, a decimal (default 0.7)")
    ap.add_argument("--self-test", action="store_true", help="cross-check against brute force and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    if not args.files:
        ap.error("give Parquet files, or --self-test")
    truth = ground_truth(args.files, args.threshold, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(truth.stats, indent=1))


if __name__ == "__main__":
    main()
