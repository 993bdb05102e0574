"""Near-duplicate steps of the global run: the band hashes of the graph's documents from the signature
files, their shingle store for exact-Jaccard verification, and dedup's policy over the verified graph:
connected components of the pairs it accepts and each member's Jaccard to its cluster's kept document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.settings import NearDupSettings
from corpus_dagster.dedup.components import cluster_keepers
from corpus_dagster.dedup.scan import Corpus, Job
from corpus_dagster.lib.jaccard import ShingleStore, shingle_sets_task
from corpus_dagster.lib.lsh import band_hashes
from corpus_dagster.lib.minhash import signature_dtype
from corpus_dagster.lib.near_graph import GraphSpec, agreeing, agreement_floor


def lsh_band_keys(
    signature_files: list[tuple[str, Path]], corpus: Corpus, eligible: np.ndarray, spec: GraphSpec,
    signatures_out: BinaryIO | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Band hashes of the eligible documents with a signature (the first bands x rows values of each):
    ((n, bands) uint64, their gids, documents without a signature, eligible or not). Ids only, never text: memory
    is n * bands * 8 bytes. `signatures_out` receives the signatures of those documents, in the same order
    (raw values, num_perm per row), for the candidates' agreement filter.

    A signature file whose ids differ from its source's clean documents is refused as stale.
    """
    width, band_parts, gid_parts, no_signature = spec.num_perm, [], [], 0
    for si, (source_id, path) in enumerate(signature_files):
        lo, hi = int(corpus.source_start[si]), int(corpus.source_start[si + 1])
        seen = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["id", "signature"], use_threads=False):
            start = lo + seen
            if start + batch.num_rows > hi or not batch.column(0).equals(
                corpus.ids_scan.slice(start, batch.num_rows)
            ):
                raise DedupInputError(
                    f"source {source_id!r}: signature file {path} does not match its clean documents (stale); "
                    "recompute it"
                )
            sig = batch.column(1)
            valid = sig.is_valid().to_numpy(zero_copy_only=False)
            no_signature += int((~valid).sum())
            gids = corpus.gid_of_scan[start : start + batch.num_rows]
            take = valid & eligible[gids]
            # Null signatures come back with null child values: fill them (those rows are never used).
            child = pc.fill_null(sig.values.slice(sig.offset * width, len(sig) * width), 0)
            values = child.to_numpy().reshape(len(sig), width)
            band_parts.append(band_hashes(np.ascontiguousarray(values[take, : spec.width]), spec.bands))
            gid_parts.append(gids[take])
            if signatures_out is not None:
                signatures_out.write(np.ascontiguousarray(values[take]).tobytes())
            seen += batch.num_rows
        if lo + seen != hi:
            raise DedupInputError(
                f"source {source_id!r}: signature file {path} has {seen} rows, its clean documents {hi - lo}; "
                "recompute it"
            )
    keys = np.concatenate(band_parts) if band_parts else np.zeros((0, spec.bands), np.uint64)
    gids = np.concatenate(gid_parts) if gid_parts else np.zeros(0, np.int64)
    return keys, gids, no_signature




def agreeing_candidates(pairs: np.ndarray, signature_file: Path, band_gids: np.ndarray, n_docs: int,
                        spec: GraphSpec, near: NearDupSettings) -> np.ndarray:
    """Per candidate pair: whether its signatures agree enough to be scored (`near_graph.agreeing`).

    signature_file: the graph documents' signatures in `band_gids` order, as `lsh_band_keys` wrote them."""
    if not len(pairs):  # nothing to read (and an empty file cannot be mapped)
        return np.zeros(0, dtype=bool)
    signatures = np.memmap(signature_file, dtype=signature_dtype(near.scheme), mode="r").reshape(-1, spec.num_perm)
    row_of_gid = np.full(n_docs, -1, dtype=np.int64)
    row_of_gid[np.asarray(band_gids)] = np.arange(len(band_gids))
    try:
        return agreeing(pairs, signatures, row_of_gid, agreement_floor(spec.num_perm, spec.threshold))
    finally:
        del signatures


def build_store(
    nodes: np.ndarray, corpus_jobs: list[Job], gid_of_scan: np.ndarray, near: NearDupSettings, path: Path,
    workers: int,
) -> ShingleStore:
    """Re-shingle the documents `nodes` (sorted gids) into an on-disk store indexed by node number.

    corpus_jobs, gid_of_scan: the scan's row groups and gid of each scan position (`Corpus`).
    """
    store = ShingleStore(path, len(nodes))
    jobs, job_nodes = [], []
    for job in corpus_jobs:
        gids = gid_of_scan[job.scan_start : job.scan_start + job.rows]
        slot = np.minimum(np.searchsorted(nodes, gids), len(nodes) - 1)
        rows = np.flatnonzero(nodes[slot] == gids)
        if len(rows):
            jobs.append((job.path, job.row_group, rows, near.shingle_size, near.batch_bytes))
            job_nodes.append(slot[rows])
    for node_ids, (values, lengths) in zip(job_nodes, ordered_map(shingle_sets_task, jobs, workers), strict=True):
        store.append(node_ids, values, lengths)
    store.close()
    return store


@dataclass
class Clusters:
    """Near-duplicate clusters over the nodes (sorted gids of every document in a candidate pair)."""

    nodes: np.ndarray
    keeper: np.ndarray  # per node: node number of its cluster's smallest member
    size: np.ndarray  # per node that is a keeper: its cluster size (0 otherwise)
    members: np.ndarray  # node numbers of the non-keeper members of clusters of >= 2
    member_jaccard: np.ndarray  # exact Jaccard of each of them to its keeper (nan when not verified)

    @property
    def in_cluster(self) -> np.ndarray:
        """Per node: member of a cluster of at least 2."""
        return self.size[self.keeper] >= 2

    def of_documents(self, rep_of_gid: np.ndarray) -> Clusters:
        """The same clusters over the documents that stand for the nodes' texts (`rep_of_gid`: the exact
        keeper of each gid's text), nodes sorted again by gid, as the tables want them."""
        docs = rep_of_gid[self.nodes]
        order = np.argsort(docs, kind="stable")
        new_of_old = np.empty(len(order), dtype=np.int64)
        new_of_old[order] = np.arange(len(order))
        members = new_of_old[self.members]
        by_member = np.argsort(members, kind="stable")
        return Clusters(docs[order], new_of_old[self.keeper[order]], self.size[order], members[by_member],
                        self.member_jaccard[by_member])


ChainJaccard = Callable[[np.ndarray, np.ndarray], np.ndarray]  # exact Jaccard of pairs of gids, elementwise


def store_jaccard(store: ShingleStore | None, store_nodes: np.ndarray, chunk: int,
                  build: Callable[[np.ndarray], ShingleStore]) -> ChainJaccard:
    """Exact Jaccard of pairs of gids from the shingle store of `store_nodes` (sorted gids); when a gid is not
    in it (its pairs were reused, not scored in this build), from a store `build` makes of the gids asked."""

    def jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        want = unique_sorted(np.concatenate([a, b]))
        if store is not None and np.isin(want, store_nodes).all():
            return store.jaccard(np.searchsorted(store_nodes, a), np.searchsorted(store_nodes, b), chunk)
        extra = build(want)
        return extra.jaccard(np.searchsorted(want, a), np.searchsorted(want, b), chunk)

    return jaccard


def near_clusters(
    nodes: np.ndarray,
    pairs: np.ndarray,
    pair_nodes: np.ndarray,
    pair_jaccard: np.ndarray,
    accepted: np.ndarray,
    chain_jaccard: ChainJaccard | None,
    rank_of_gid: np.ndarray | None = None,
) -> Clusters:
    """Connected components of the accepted pairs, each kept by its member of the smallest rank
    (`rank_of_gid`; None: the smallest gid); each member's Jaccard to its keeper when verified
    (`chain_jaccard` scores a member and keeper that were not a pair themselves; None: not verified)."""
    keeper = cluster_keepers(len(nodes), pair_nodes[accepted], None if rank_of_gid is None else rank_of_gid[nodes])
    size = np.bincount(keeper, minlength=len(nodes))
    members = np.flatnonzero((size[keeper] >= 2) & (keeper != np.arange(len(nodes))))
    member_j = np.full(len(members), np.nan)
    if chain_jaccard is not None and len(members):
        # From the member's own pair with the keeper when there was one, else computed now (chains).
        pair_key = (pairs[:, 0] << 32) | pairs[:, 1]
        kept_gid, member_gid = nodes[keeper[members]], nodes[members]  # a pair is (smaller gid, larger gid)
        want = (np.minimum(kept_gid, member_gid) << 32) | np.maximum(kept_gid, member_gid)
        slot = np.minimum(np.searchsorted(pair_key, want), len(pair_key) - 1)
        direct = pair_key[slot] == want
        member_j[direct] = pair_jaccard[slot[direct]]
        if (~direct).any():
            member_j[~direct] = chain_jaccard(nodes[keeper[members[~direct]]], nodes[members[~direct]])
    return Clusters(nodes, keeper, size, members, member_j)
