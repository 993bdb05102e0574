"""The two views of duplication (affected, removable) and the doc_duplicates rows, vectorized.

Rows are documents numbered in id byte order. `rep` maps each row to its exact group's smallest row;
near pairs are between representatives only (an exact twin has the same shingle set, so its near
duplicates are its representative's), and are expanded to every member here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa

from corpus_dagster.analysis.clusters import ClusterSet
from corpus_dagster.core.arrays import concat_ranges
from corpus_dagster.core.errors import AnalysisError

# intersection/union: the shingle counts behind jaccard, so `intersection * 100 >= 70 * union` is exact.
NEAR_TYPE = pa.struct(
    [("doc_id", pa.string()), ("jaccard", pa.float32()), ("intersection", pa.int32()), ("union", pa.int32())]
)
DUPLICATES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("exact_duplicates", pa.list_(pa.string())),
        ("near_duplicates", pa.list_(NEAR_TYPE)),
        ("n_exact", pa.int32()),
        ("n_near", pa.int32()),
    ]
)


_EXACT_PRODUCT = 1 << 29  # a float32 (24-bit significand) times an integer below this is exact in float64


def float32_at_least(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The smallest float32 >= num/den (0 where den is 0), for integer num, den >= 0.

    Rounding to nearest can store 189/270 = 0.7 as 0.69999999, below the float32 0.7, so a reader's
    `jaccard >= 0.7` would drop a pair whose exact Jaccard is 0.7; rounded up, the stored value never
    falls below the exact ratio, so `>=` keeps every pair at a two-decimal threshold."""
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    x = np.divide(num.astype(np.float64), den.astype(np.float64), out=np.zeros(len(num)), where=den > 0)
    f = x.astype(np.float32)
    small = den < _EXACT_PRODUCT
    q, p = den.astype(np.float64), num.astype(np.float64)
    # f * q and its neighbours times q are exact here, so these compare f with num/den exactly.
    up = small & (den > 0) & (f.astype(np.float64) * q < p)
    f[up] = np.nextafter(f[up], np.float32(np.inf))
    lower = np.nextafter(f, np.float32(-np.inf))
    down = small & (den > 0) & (f > 0) & (lower.astype(np.float64) * q >= p)
    f[down] = lower[down]
    for i in np.flatnonzero(~small).tolist():  # unions of 2**29 shingles and more: exact rationals
        exact = Fraction(int(num[i]), int(den[i]))
        g = np.float32(x[i])
        while Fraction(float(g)) < exact:
            g = np.nextafter(g, np.float32(np.inf))
        while g > 0 and Fraction(float(np.nextafter(g, np.float32(-np.inf)))) >= exact:
            g = np.nextafter(g, np.float32(-np.inf))
        f[i] = g
    return f


def _int32(values: np.ndarray, what: str) -> pa.Array:
    if len(values) and int(values.max()) > np.iinfo(np.int32).max:
        raise AnalysisError(f"a near-duplicate {what} of {int(values.max())} shingles exceeds the int32 column")
    return pa.array(values.astype(np.int32))


@dataclass
class Groups:
    """Exact groups: per row its representative, and the members of each group (CSR at representatives)."""

    rep: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    members: np.ndarray

    def size_of(self, rows: np.ndarray) -> np.ndarray:
        """Exact group size of each row's group."""
        return self.sizes[self.rep[rows]]


def directed_near(pairs: np.ndarray, jaccard: np.ndarray, groups: Groups) -> tuple[np.ndarray, ...]:
    """Every (representative, member document, Jaccard, pair index) entry in both directions, sorted by
    representative, then descending Jaccard, then document row."""
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    jac = np.concatenate([jaccard, jaccard])
    which = np.concatenate([np.arange(len(pairs)), np.arange(len(pairs))])
    count = groups.sizes[dst]
    doc = groups.members[concat_ranges(groups.starts[dst], count)]
    src, jac, which = np.repeat(src, count), np.repeat(jac, count), np.repeat(which, count)
    order = np.lexsort((doc, -jac, src))
    return src[order], doc[order], jac[order], which[order]


def doc_duplicate_tables(
    ids: pa.Array, groups: Groups, pairs: np.ndarray, jaccard: np.ndarray, rows_per_table: int,
    intersection: np.ndarray, union: np.ndarray,
) -> Iterator[pa.Table]:
    """doc_duplicates rows in id order, rows_per_table at a time.

    pairs/jaccard: verified representative pairs at or above the listing threshold, with the shingle
    counts (intersection, union) their Jaccard is the ratio of. A row exists for every document with an
    exact twin or a near duplicate; the exact list holds its byte-identical twins (id order), the near
    list every other document at or above the threshold (descending Jaccard, then id), so the lists are
    disjoint and each pair appears in both documents' rows. The stored float32 Jaccard is rounded up
    (float32_at_least); the order and membership come from the exact values.
    """
    n = len(groups.rep)
    src, doc, jac, which = directed_near(pairs, jaccard, groups)
    inter = np.asarray(intersection, dtype=np.int64)[which]
    uni = np.asarray(union, dtype=np.int64)[which]
    lo = np.searchsorted(src, groups.rep, side="left")
    n_near = np.searchsorted(src, groups.rep, side="right") - lo
    n_exact = groups.sizes[groups.rep] - 1
    rows = np.flatnonzero((n_near > 0) | (n_exact > 0))
    for start in range(0, len(rows), rows_per_table):
        chunk = rows[start : start + rows_per_table]
        yield _table(ids, groups, chunk, lo[chunk], n_near[chunk], n_exact[chunk], doc, inter, uni)
    del n


def _table(ids, groups, rows, near_lo, n_near, n_exact, doc, inter, uni) -> pa.Table:
    reps = groups.rep[rows]
    twin_idx = concat_ranges(groups.starts[reps], groups.sizes[reps])
    twins = groups.members[twin_idx]
    owner = np.repeat(rows, groups.sizes[reps])
    twins = twins[twins != owner]
    near_idx = concat_ranges(near_lo, n_near)
    exact_offsets = np.concatenate([[0], np.cumsum(n_exact)]).astype(np.int32)
    near_offsets = np.concatenate([[0], np.cumsum(n_near)]).astype(np.int32)
    i, u = inter[near_idx], uni[near_idx]
    near_values = pa.StructArray.from_arrays(
        [ids.take(pa.array(doc[near_idx])), pa.array(float32_at_least(i, u)), _int32(i, "intersection"),
         _int32(u, "union")],
        fields=list(NEAR_TYPE),
    )
    return pa.table(
        {
            "doc_id": ids.take(pa.array(rows)),
            "exact_duplicates": pa.ListArray.from_arrays(pa.array(exact_offsets), ids.take(pa.array(twins))),
            "near_duplicates": pa.ListArray.from_arrays(pa.array(near_offsets), near_values),
            "n_exact": pa.array(n_exact.astype(np.int32)),
            "n_near": pa.array(n_near.astype(np.int32)),
        },
        schema=DUPLICATES_SCHEMA,
    )


@dataclass
class ViewFlags:
    """Per document, for one view (exact or a Jaccard threshold): which documents are affected (have a
    duplicate), removable (deletable keeping one per cluster), kept representatives and stranded
    (affected but left alone in its greedy cluster). affected = removable + kept + stranded, per document."""

    name: str
    affected: np.ndarray
    removable: np.ndarray
    kept: np.ndarray
    stranded: np.ndarray


def exact_view(groups: Groups) -> ViewFlags:
    """Exact view: groups of byte-identical documents, each keeps its smallest id."""
    n = len(groups.rep)
    rows = np.arange(n)
    dup = groups.sizes[groups.rep] >= 2
    kept = dup & (groups.rep == rows)
    return ViewFlags("exact", dup, dup & ~kept, kept, np.zeros(n, dtype=bool))


def threshold_view(
    groups: Groups, has_shingles: np.ndarray, pairs: np.ndarray, jaccard: np.ndarray, clusters: ClusterSet
) -> ViewFlags:
    """View at one Jaccard threshold: exact twins count as duplicates (Jaccard 1.0); documents without
    shingles can only be exact duplicates, and their exact groups are clusters of their own."""
    n = len(groups.rep)
    rows = np.arange(n)
    linked = np.zeros(n, dtype=bool)
    sel = np.asarray(jaccard) >= clusters.threshold
    linked[pairs[sel, 0]] = True
    linked[pairs[sel, 1]] = True
    dup = groups.sizes[groups.rep] >= 2
    affected = dup | (has_shingles & linked[groups.rep])
    in_cluster = np.zeros(n, dtype=bool)
    kept = np.zeros(n, dtype=bool)
    if clusters.reps:
        reps = np.concatenate(clusters.reps)
        in_cluster[groups.members[concat_ranges(groups.starts[reps], groups.sizes[reps])]] = True
        kept[[int(c[0]) for c in clusters.reps]] = True  # seed = smallest row of its cluster
    short = dup & ~has_shingles
    in_cluster |= short
    kept |= short & (groups.rep == rows)
    removable = in_cluster & ~kept
    return ViewFlags(f"{clusters.threshold:g}", affected, removable, kept, affected & ~in_cluster)


VIEW_COLUMNS = [
    ("scope", pa.string()),
    ("source_id", pa.string()),
    ("view", pa.string()),
    ("docs", pa.int64()),
    ("affected", pa.int64()),
    ("removable", pa.int64()),
    ("kept_representatives", pa.int64()),
    ("stranded", pa.int64()),
    ("affected_pct", pa.float64()),
    ("removable_pct", pa.float64()),
    ("no_shingle_docs", pa.int64()),
    ("no_shingle_affected", pa.int64()),
    ("no_shingle_removable", pa.int64()),
]
VIEWS_SCHEMA = pa.schema(VIEW_COLUMNS)


def views_table(
    views: list[ViewFlags], source_code: np.ndarray, source_names: list[str], has_shingles: np.ndarray
) -> pa.Table:
    """One row per (scope, view): overall first, then each source in name order; counts and percentages."""
    out: dict[str, list] = {name: [] for name, _ in VIEW_COLUMNS}
    scopes = [("overall", "", np.ones(len(source_code), dtype=bool))]
    for code in np.argsort(np.array(source_names, dtype=object)).tolist():
        scopes.append(("source", source_names[code], source_code == code))
    for scope, source_id, mask in scopes:
        docs = int(mask.sum())
        short = mask & ~has_shingles
        for v in views:
            affected, removable = int((v.affected & mask).sum()), int((v.removable & mask).sum())
            row = {
                "scope": scope,
                "source_id": source_id,
                "view": v.name,
                "docs": docs,
                "affected": affected,
                "removable": removable,
                "kept_representatives": int((v.kept & mask).sum()),
                "stranded": int((v.stranded & mask).sum()),
                "affected_pct": round(100.0 * affected / docs, 4) if docs else 0.0,
                "removable_pct": round(100.0 * removable / docs, 4) if docs else 0.0,
                "no_shingle_docs": int(short.sum()),
                "no_shingle_affected": int((v.affected & short).sum()),
                "no_shingle_removable": int((v.removable & short).sum()),
            }
            for key, value in row.items():
                out[key].append(value)
    return pa.table(out, schema=VIEWS_SCHEMA)


def log_bins(max_value: int, bins: int) -> np.ndarray:
    """Integer bin edges [0, 1, ..., > max_value], log-spaced from 1, strictly increasing."""
    top = max(int(max_value), 1) + 1
    edges = np.unique(np.floor(np.logspace(0, np.log10(top), bins)).astype(np.int64))
    edges = np.concatenate([[0], edges])
    if edges[-1] < top:
        edges = np.append(edges, top)
    return np.unique(edges)


def rate_by_length(n_words: np.ndarray, views: list[ViewFlags], bins: int) -> pa.Table:
    """Share of affected documents per log-spaced word-count bin, for every view."""
    edges = log_bins(int(n_words.max()) if len(n_words) else 1, bins)
    which = np.clip(np.searchsorted(edges, n_words, side="right") - 1, 0, len(edges) - 2)
    docs = np.bincount(which, minlength=len(edges) - 1)
    cols = {"words_lo": edges[:-1], "words_hi": edges[1:], "docs": docs}
    for v in views:
        hit = np.bincount(which, weights=v.affected.astype(np.float64), minlength=len(edges) - 1)
        cols[f"affected_pct_{v.name}"] = np.where(docs > 0, 100.0 * hit / np.maximum(docs, 1), 0.0)
    return pa.table(cols)
