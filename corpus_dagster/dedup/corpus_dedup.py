"""The global dedup step: decontaminate, exact-dedup, near-dedup; write the three queryable tables.

Order of operations (each step only sees what the previous ones kept):
1. decontaminate: drop every document sharing an `ngram`-word n-gram with a protected set;
2. exact: among the rest, group by SHA-256 of the clean text, keep each group's member of the smallest
   stable key (`core.doc_keys`: the id_field value, url or text hash, never a row position);
3. near: the near-duplicate graph of every distinct text with a signature (decontaminated ones too: the
   analysis reads the same graph) - LSH candidate pairs, every pair of a bucket, banded for the graph's
   threshold (`lib.near_graph`), each scored once by exact Jaccard - and dedup's policy over it: the
   pairs between survivors of 1-2 at jaccard_threshold (any candidate pair without `verify`), their
   connected components; each cluster keeps its member of the smallest stable key and, with `action: drop`,
   drops the others.
Documents are numbered by id in byte order (the gid) and every output is sorted by it, so the result
never depends on source order, file order, completion order or the worker count.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.settings import DedupSettings, NearDupSettings
from corpus_dagster.dedup.blocks import graph_pairs
from corpus_dagster.dedup.exact import exact_duplicates
from corpus_dagster.dedup.near import (
    ChainJaccard,
    agreeing_candidates,
    build_store,
    lsh_band_keys,
    near_clusters,
    store_jaccard,
)
from corpus_dagster.dedup.protected import build_protected_index
from corpus_dagster.dedup.scan import Corpus, Job, scan_corpus
from corpus_dagster.dedup.tables import (
    CLUSTERS_SCHEMA,
    DECONTAMINATED,
    DROPPED_SCHEMA,
    EXACT,
    KEPT,
    NEAR,
    PAIRS_SCHEMA,
    clusters_table,
    dropped_table,
    pairs_table,
    report,
    write_parquet,
)
from corpus_dagster.lib.jaccard import ShingleStore, jaccard_of
from corpus_dagster.lib.lsh import candidate_pairs, unpack_pairs
from corpus_dagster.lib.near_graph import GraphSpec, graph_spec
from corpus_dagster.minhash.outputs import SIGNATURE_SETTINGS, signature_settings

__all__ = ["CLUSTERS_SCHEMA", "DROPPED_SCHEMA", "PAIRS_SCHEMA", "DedupSource", "run_dedup"]

REPORTED_SETTINGS = ("jaccard_threshold", "ngram", "action", "verify")
GRAPH_SIGNATURES = "graph_signatures.bin"  # in the work folder: the signatures of the graph's documents


@dataclass
class DedupSource:
    """One source's inputs to the global step: its clean document files (k order) and its signature file."""

    source_id: str
    doc_files: list[Path]
    signature_file: Path
    keys: Sequence[str] | None = None  # stable keys (core.doc_keys) of its documents in k order; None: ids


class StepTimer:
    """Seconds and peak RSS (MiB, this process) of each step; the peak is reset between steps.

    A step timed more than once (or in several processes, `add`) sums its seconds and keeps its largest peak.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rss: dict[str, float] = {}
        reset_peak_rss()
        self._t = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.add(name, now - self._t, peak_rss_mb())
        reset_peak_rss()
        self._t = now

    def restart(self) -> None:
        """Time the next step from now (after steps timed elsewhere were `add`ed)."""
        reset_peak_rss()
        self._t = time.monotonic()

    def add(self, name: str, seconds: float, rss_mb: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 3)
        self.rss[name] = max(self.rss.get(name, 0.0), rss_mb)


def check_inputs(sources: list[DedupSource], near: NearDupSettings, spec: GraphSpec) -> None:
    names = [s.source_id for s in sources]
    if len(set(names)) != len(names):
        raise DedupInputError(f"run_dedup: a source is listed twice: {sorted(names)}")
    if spec.width > spec.num_perm:
        raise DedupInputError(
            f"near_dup.bands x rows ({spec.bands} x {spec.rows}) exceeds near_dup.num_perm ({spec.num_perm})"
        )
    want = {k: getattr(near, k) for k in SIGNATURE_SETTINGS}
    for s in sources:
        if not Path(s.signature_file).exists():
            raise DedupInputError(f"source {s.source_id!r}: signature file {s.signature_file} does not exist")
        got = {k: signature_settings(Path(s.signature_file)).get(k) for k in SIGNATURE_SETTINGS}
        if got != want:
            raise DedupInputError(
                f"source {s.source_id!r}: signature file {s.signature_file} was computed with {got}, "
                f"config wants {want}; recompute it"
            )


def run_dedup(
    sources: list[DedupSource], cfg: DedupSettings, out_dir: Path, workers: int = 1,
    near: NearDupSettings | None = None,
) -> dict[str, Any]:
    """Decontaminate, exact-dedup and near-dedup all sources; write dropped/clusters/pairs.parquet.

    cfg is the `dedup` section, near the `near_dup` section (None: its defaults). Every output file is
    written atomically and is byte-identical across runs and `workers` values. Returns the stats a person
    wants to see (counts, largest clusters, example pairs, per-step seconds and peak RSS).
    """
    near = near if near is not None else NearDupSettings()
    spec = graph_spec(near, cfg.jaccard_threshold)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_inputs(sources, near, spec)
    work = Path(tempfile.mkdtemp(prefix=f".dedup-work-{uuid.uuid4().hex[:8]}-", dir=out_dir))
    try:
        return _run(sources, cfg, near, spec, out_dir, work, workers)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Prepared:
    """Every document after decontamination and exact dedup, and the band hashes of the near-dedup
    candidates: ids and numbers only, never text."""

    ids: pa.Array  # in gid order
    status: np.ndarray  # int8 per gid: KEPT, DECONTAMINATED, EXACT (NEAR is set by `finish`)
    matched: np.ndarray  # int64 per gid: gid of the kept exact copy, else -1
    spec: GraphSpec  # the graph's threshold and banding
    detail: dict[int, str]  # gid -> "set: n-gram" of every decontaminated document
    by_set: dict[str, int]  # decontaminated documents per protected set, in config order
    band_keys: np.ndarray  # (participants, bands) uint64 band hashes of the graph's documents
    band_gids: np.ndarray  # int64 gid of each band_keys row
    source_of_gid: np.ndarray  # int32 per gid: its source's number in the sorted source list
    rank_of_gid: np.ndarray  # int64 per gid: its stable key's rank in byte order (keepers have the smallest)
    rep_of_gid: np.ndarray  # int64 per gid: the kept copy of its text (the smallest rank among its copies)
    node_of_gid: np.ndarray  # int64 per gid: the graph node of its text (the smallest id with that text)
    signatures: Path  # the graph documents' signatures, raw, one row per band_gids entry
    no_signature: int
    jobs: list[Job]  # the scan's row groups, to re-read the text of the verified documents
    gid_of_scan: np.ndarray

    @property
    def participants(self) -> int:
        """Documents in LSH: the smallest id of every distinct text of each source, with a signature."""
        return len(self.band_gids)


def key_ranks(sources: list[DedupSource], corpus: Corpus) -> np.ndarray:
    """Per gid, the rank of its document's stable key in byte order (sources without keys use their ids),
    ties broken by gid: the order in which dedup prefers keepers."""
    parts = []
    for si, s in enumerate(sources):
        lo, hi = int(corpus.source_start[si]), int(corpus.source_start[si + 1])
        if s.keys is None:
            parts.append(corpus.ids_scan.slice(lo, hi - lo))
        elif len(s.keys) != hi - lo:
            raise DedupInputError(f"source {s.source_id!r}: {len(s.keys)} stable keys for {hi - lo} documents")
        else:
            parts.append(pa.array(list(s.keys), pa.string()))
    keys_scan = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    keys = keys_scan.take(pa.array(np.argsort(corpus.gid_of_scan, kind="stable")))  # in gid order
    by_key = pc.sort_indices(keys.cast(pa.binary())).to_numpy()  # a stable sort: equal keys stay in gid order
    rank = np.empty(corpus.n, dtype=np.int64)
    rank[by_key] = np.arange(corpus.n, dtype=np.int64)
    return rank


def prepare(
    sources: list[DedupSource], cfg: DedupSettings, spec: GraphSpec, work: Path, workers: int, timer: StepTimer
) -> Prepared:
    """Steps 1-2 and the band hashes of step 3: scan, decontaminate, exact-dedup, band the graph's documents
    (the smallest id of every distinct text of each source, so that the pairs between two sources depend on
    those two sources only (`dedup.blocks`); each stands for the node of its text, the smallest id with that
    text across the corpus: the survivors of 1-2 and the decontaminated texts).

    `work` holds the protected index while the scan reads it.
    """
    # 1. Scan every document (ids, digests) and decontaminate.
    index = build_protected_index(cfg)
    index_path = None
    if index.names:
        index_path = str(work / "protected.npz")
        index.save(Path(index_path))
    corpus = scan_corpus(
        [(s.source_id, s.doc_files) for s in sources], index_path, cfg.batch_bytes, workers
    )
    status = np.zeros(corpus.n, dtype=np.int8)
    matched = np.full(corpus.n, -1, dtype=np.int64)
    detail: dict[int, str] = {}
    by_set = dict.fromkeys(index.names, 0)
    for gid, name, ngram in corpus.contaminated:
        status[gid] = DECONTAMINATED
        detail[gid] = f"{name}: {ngram}"
        by_set[name] += 1
    del index
    timer.lap("decontaminate")

    # 2. Exact duplicates among the rest. Contamination is decided by the text, so a group of identical texts
    # is decontaminated whole or not at all: one grouping of every document gives the survivors' groups (the
    # same smallest id) and the graph's documents (the smallest id of every text).
    every = np.arange(corpus.n, dtype=np.int64)
    # The graph's node of a text is its smallest id (the pairs table and the analysis name texts so); the copy
    # that stays is the one of the smallest stable key (`rep_of_gid`), never a row position.
    rank_of_gid = key_ranks(sources, corpus)
    dup, kept_as = exact_duplicates(corpus.sha256, every, rank=rank_of_gid)
    survivor = status[dup] == KEPT
    status[dup[survivor]], matched[dup[survivor]] = EXACT, kept_as[survivor]
    rep_of_gid = every.copy()
    rep_of_gid[dup] = kept_as
    first, first_of = exact_duplicates(corpus.sha256, every)
    node_of_gid = every.copy()
    node_of_gid[first] = first_of
    source_of_gid = np.empty(corpus.n, dtype=np.int32)
    source_of_gid[corpus.gid_of_scan] = np.repeat(np.arange(len(sources), dtype=np.int32), np.diff(corpus.source_start))
    distinct = np.ones(corpus.n, dtype=bool)  # per source
    distinct[exact_duplicates(corpus.sha256, every, within=source_of_gid)[0]] = False
    corpus.sha256 = np.zeros((0, 32), np.uint8)
    timer.lap("exact")

    # 3a. Band hashes of the graph's documents (the pairs come from each band on its own), their signatures.
    sig_files = [(s.source_id, Path(s.signature_file)) for s in sources]
    with atomic_path(work / GRAPH_SIGNATURES) as tmp, open(tmp, "wb") as out:
        band_keys, band_gids, no_signature = lsh_band_keys(sig_files, corpus, distinct, spec, out)
    timer.lap("lsh")
    return Prepared(
        corpus.ids, status, matched, spec, detail, by_set, band_keys, band_gids, source_of_gid, rank_of_gid, rep_of_gid, node_of_gid,
        work / GRAPH_SIGNATURES, no_signature, corpus.jobs, corpus.gid_of_scan,
    )


def finish(
    prep: Prepared,
    pairs: np.ndarray,
    counts: tuple[np.ndarray, np.ndarray],
    chain_jaccard: ChainJaccard | None,
    cfg: DedupSettings,
    out_dir: Path,
    timer: StepTimer,
    lsh_pairs: int,
) -> dict[str, Any]:
    """Steps 5-6: dedup's clusters over the verified graph (each keeps its smallest stable key), the three tables
    (pairs.parquet: every pair of the graph at or above its threshold), the stats.

    pairs: sorted candidate pairs whose signatures agree enough to be scored (`lsh_pairs` shared a bucket);
    counts: (intersection, union) of their shingle sets; chain_jaccard: exact Jaccard of a cluster member and
    its keeper that were not a pair (None without pairs).
    """
    status, matched, spec = prep.status, prep.matched, prep.spec
    inter, union = counts
    pair_j = jaccard_of(inter, union)
    jaccard = np.full(len(status), np.nan, dtype=np.float64)
    nodes = unique_sorted(pairs)  # sorted gids of every document in a candidate pair
    pair_nodes = np.searchsorted(nodes, pairs)
    rep = prep.rep_of_gid  # a node (a text's smallest id) stands for the kept copy of its text
    survivors = (status[rep[pairs[:, 0]]] == KEPT) & (status[rep[pairs[:, 1]]] == KEPT)
    accepted = survivors & (pair_j >= cfg.jaccard_threshold) if cfg.verify else survivors

    # 5. Clusters; each keeps its member of the smallest stable key.
    clusters = near_clusters(nodes, pairs, pair_nodes, pair_j, accepted, chain_jaccard, prep.rank_of_gid[rep])
    member_gids = rep[nodes[clusters.members]]
    if cfg.action == "drop":
        status[member_gids] = NEAR
        matched[member_gids] = rep[nodes[clusters.keeper[clusters.members]]]
        jaccard[member_gids] = clusters.member_jaccard
    clusters = clusters.of_documents(rep)
    timer.lap("components")

    # 6. Tables.
    ids = prep.ids
    keep = np.flatnonzero(pair_j >= spec.threshold)
    write_parquet(
        dropped_table(ids, status, matched, jaccard, prep.detail, clusters), out_dir / "dropped.parquet"
    )
    write_parquet(clusters_table(ids, clusters), out_dir / "clusters.parquet")
    write_parquet(pairs_table(ids, pairs, inter, union, keep), out_dir / "pairs.parquet")
    stats = report(ids, clusters, pairs, pair_j, keep, cfg.report_examples)
    timer.lap("write")
    stats.update(
        docs=len(ids),
        decontaminated=int((status == DECONTAMINATED).sum()),
        decontaminated_by_set=prep.by_set,
        exact_dropped=int((status == EXACT).sum()),
        near_dropped=int((status == NEAR).sum()),
        near_duplicates=len(clusters.members),
        near_below_threshold_to_kept=int((clusters.member_jaccard < cfg.jaccard_threshold).sum()),
        no_signature=prep.no_signature,
        lsh_participants=prep.participants,
        candidate_pairs=lsh_pairs,
        signature_filtered=lsh_pairs - len(pairs),
        scored_pairs=len(pairs),
        dedup_pairs=int(survivors.sum()),
        verified_pairs=int(accepted.sum()) if cfg.verify else None,
        rejected_pairs=int((survivors & ~accepted).sum()) if cfg.verify else None,
        pairs_rows=len(keep),
        graph=spec.as_dict(),
        settings={k: getattr(cfg, k) for k in REPORTED_SETTINGS} | {
            "num_perm": spec.num_perm, "bands": spec.bands, "rows": spec.rows, "shingle_size": spec.shingle_size},
        seconds=timer.seconds,
        peak_rss_mb=timer.rss,
    )
    return stats


def _run(
    sources: list[DedupSource], cfg: DedupSettings, near: NearDupSettings, spec: GraphSpec, out_dir: Path,
    work: Path, workers: int,
) -> dict[str, Any]:
    timer = StepTimer()
    prep = prepare(sources, cfg, spec, work, workers, timer)

    # 3b. LSH candidate pairs among the graph's documents, as pairs of nodes; those whose signatures agree
    # enough to score.
    keys, differ = graph_pairs(candidate_pairs(prep.band_keys, prep.band_gids), prep.node_of_gid)
    candidates = unpack_pairs(unique_sorted(keys[differ]))
    pairs = candidates[agreeing_candidates(candidates, prep.signatures, prep.band_gids, len(prep.ids), spec, near)]
    timer.lap("lsh")

    # 4. Exact Jaccard of every candidate pair, once.
    nodes = unique_sorted(pairs)
    pair_nodes = np.searchsorted(nodes, pairs)
    store, chain = None, None
    counts = (np.zeros(len(pairs), np.int64), np.zeros(len(pairs), np.int64))
    if len(pairs):
        store = build_store(nodes, prep.jobs, prep.gid_of_scan, near, work / "shingles.u64", workers)
        counts = store.counts(pair_nodes[:, 0], pair_nodes[:, 1], near.verify_batch_shingles)
        chain = store_jaccard(store, nodes, near.verify_batch_shingles, _no_other_documents)
    timer.lap("verify")
    stats = finish(prep, pairs, counts, chain, cfg, out_dir, timer, len(candidates))
    stats["shingled_docs"] = len(nodes)
    return stats


def _no_other_documents(gids: np.ndarray) -> ShingleStore:
    raise AssertionError(f"a cluster member outside the scored pairs' documents: {gids[:5].tolist()}")
