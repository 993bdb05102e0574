"""The global dedup as a unit stage (`core.units.UnitStage`) any executor can spread over processes or
machines that mount the artifacts root: `DedupStage.plan` (scan, decontaminate, exact dedup, band hashes;
one LSH unit per band), `run_unit` (LSH bands and verification chunks), `plan_next` (the verification plan)
and `finish`. They share the key's work folder `stages/dedup/.work-<key>/` (`core.work.WorkFolder`; its
files are named, written and read in `dedup.work_files`; each unit's done-marker is written last)."""


from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from corpus_dagster.clean.outputs import clean_doc_files, clean_record, document_keys
from corpus_dagster.core import records
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.progress import Log
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, commit_outputs
from corpus_dagster.core.units import Plan, UnitStage
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.dedup.blocks import (
    Block,
    BlockPairs,
    Graph,
    SourceRows,
    dirty_documents,
    graph_pairs,
    in_computed_blocks,
    merge_graph,
    plan_blocks,
    remove_unnamed_blocks,
    reusable_blocks,
    reused_parts,
    write_blocks,
)
from corpus_dagster.dedup.corpus_dedup import (
    GRAPH_SIGNATURES,
    DedupSource,
    Prepared,
    StepTimer,
    check_inputs,
    finish,
    prepare,
)
from corpus_dagster.dedup.key import (
    DEDUP,
    DEDUP_STAGE,
    TABLES,
    block_source,
    clean_bytes,
    dedup_key,
    key_settings,
    key_sources,
)
from corpus_dagster.dedup.near import agreeing_candidates, build_store, store_jaccard
from corpus_dagster.dedup.result import DedupResult
from corpus_dagster.dedup.scan import Job
from corpus_dagster.dedup.work_files import (
    AGREE,
    BAND_DIRTY,
    BAND_GIDS,
    BAND_HASHES,
    CANDIDATES,
    COUNTS,
    GRAPH_CANDIDATES,
    LOCAL_PAIRS,
    LSH_UNIT,
    NODE_OF_GID,
    PAIR_NODES,
    PAIRS,
    PREPARED_FILES,
    SHINGLES,
    SOURCE_OF_GID,
    VERIFY,
    VERIFY_UNIT,
    DedupWorkError,
    absolute,
    jsonable,
    lsh_unit,
    open_store,
    read_prepared,
    relative,
    save_array,
    steps_timer,
    unit_number,
    verify_files,
    verify_unit,
    write_prepared,
)
from corpus_dagster.lib.jaccard import ShingleStore
from corpus_dagster.lib.lsh import band_pairs, merge_pairs, unpack_pairs
from corpus_dagster.lib.near_graph import graph_spec
from corpus_dagster.minhash.outputs import signature_file


def work_folder(layout: Layout, key: str) -> WorkFolder:
    """`stages/dedup/.work-<key>/`: what the plan writes for the units and the units write for the finish."""
    return WorkFolder(layout.stage(DEDUP), key, "dedup", "dedup_plan (or run_global_dedup)", "the dedup units",
                      error=DedupWorkError)


@dataclass(frozen=True)
class DedupStage(UnitStage[DedupResult]):
    """The global dedup over `sources` (sorted; the steps after the plan read them from the work folder, so
    they run on a stage object without them): plan, LSH units (one per band), verification plan,
    verification units (one per chunk of pairs), finish."""

    sources: tuple[str, ...] = ()
    name: ClassVar[str] = "dedup"
    lock: ClassVar[str] = "dedup"
    phases: ClassVar[tuple[str, ...]] = ("lsh", "verify")

    def folder(self, layout: Layout) -> Path:
        return layout.stage(DEDUP)

    def key(self, layout: Layout, settings: Settings) -> str:
        return dedup_key(layout, settings, list(self.sources))[0]

    def doing(self, layout: Layout, settings: Settings) -> str:
        return f"{sum(clean_record(layout, sid).stats.get('kept', 0) for sid in self.sources):,} documents"

    def plan(self, layout: Layout, settings: Settings, key: str, log: Log | None) -> Plan:
        """One LSH unit per band. Computes missing signatures, scans, decontaminates and exact-dedups every
        document and writes the band hashes of the survivors to the work folder (`work_folder`), unless a
        complete plan of the same key is already there (a resumed run keeps it and the unit outputs next to it).
        """
        source_ids = sorted(self.sources)
        folder = self.folder(layout)
        records.begin(folder)
        work = work_folder(layout, key)
        meta = work.start()
        if meta is not None and any(b.reused and not (folder / b.name).is_file() for b in _blocks(meta)):
            work.remove()  # a block this plan reuses was deleted since (another build's record replaced it)
            meta = work.start()
        if meta is None:
            meta = _prepare(layout, settings, source_ids, work)
        if log is not None:
            log(f"dedup: {len(source_ids)} source(s), {meta['docs']:,} documents, "
                f"{clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet")
            reused = sum(1 for b in meta["blocks"] if b[3])
            log(
                f"dedup plan: {meta['docs']:,} documents, {meta['participants']:,} in LSH "
                f"({meta['dirty_participants']:,} in blocks to compute), {meta['bands']} band unit(s); "
                f"near-duplicate blocks: {reused} of {len(meta['blocks'])} reused"
            )
        return Plan(key, tuple(lsh_unit(b) for b in range(meta["bands"])), info={"sources": source_ids})

    def plan_next(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> Plan:
        """After every LSH unit: merge the bands' pairs into the sorted candidate pairs, build the shingle store
        of their documents and name one verification unit per `near_dup.verify_chunk_pairs` pairs (none
        without pairs). A second call reuses the first one's plan."""
        work = work_folder(layout, plan.key)
        meta = work.read_plan()
        verify = work.find_plan(VERIFY)
        if verify is None:
            verify = _plan_verify(layout, settings, work, meta)
        if log is not None:
            log(f"dedup verify plan: {verify['lsh_pairs']:,} LSH pairs generated, {verify['block_pairs']:,} of them in "
                f"blocks to compute, {verify['graph_candidates']:,} node pairs, {verify['pairs']:,} with signatures "
                f"that agree enough to score, {verify['units']} verification unit(s)")
        return Plan(plan.key, tuple(verify_unit(i) for i in range(verify["units"])))

    def run_unit(self, layout: Layout, settings: Settings, key: str, unit: str) -> None:
        """`lsh-band-NNN` (one band's candidate pairs) or `verify-NNNNN` (exact Jaccard of one chunk of
        candidate pairs). Reads the key's work folder and writes only the unit's files, atomically, its
        done-marker last; a unit already done does nothing."""
        _run_unit(layout, settings, key, unit)

    def finish(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> DedupResult:
        """Clusters, the three tables in stages/dedup/<key>/, the stage record; removes the work folder."""
        return _finish(layout, settings, plan.key, log)

    def reuse(self, layout: Layout, settings: Settings, key: str, record: StageRecord) -> DedupResult:
        return DedupResult.from_stats(record.stats, key, cached=True)


DEDUP_UNITS = DedupStage()  # the stage object of the steps after the plan (and of a plan bound to sources)


def _prepare(layout: Layout, settings: Settings, source_ids: list[str], work: WorkFolder) -> dict[str, Any]:
    """Scan, decontaminate, exact-dedup, band hashes: write them to the work folder, the plan last."""
    for sid in source_ids:  # a missing or stale signature file is computed here rather than refused later
        signature_file(layout, sid, settings)
    ledger = {s.source_id: s for s in key_sources(layout, source_ids)}
    sources = [DedupSource(sid, clean_doc_files(layout, sid, settings), signature_file(layout, sid),
                           document_keys(layout, ledger[sid]).column("key").to_pylist()) for sid in source_ids]
    cfg = settings.dedup
    spec = graph_spec(settings.near_dup, cfg.jaccard_threshold)
    check_inputs(sources, settings.near_dup, spec)
    blocks = plan_blocks([block_source(layout, settings, sid) for sid in source_ids], spec,
                         reusable_blocks(layout.stage(DEDUP)))
    path = work.path
    timer = StepTimer()
    prep = prepare(sources, cfg, spec, path, settings.workers, timer)
    (path / "protected.npz").unlink(missing_ok=True)
    dirty = dirty_documents(blocks, prep.source_of_gid)[prep.band_gids]
    write_prepared(path, prep, dirty)
    return work.write_plan({
        "sources": source_ids,
        "docs": len(prep.ids),
        "bands": spec.bands,
        "graph": spec.as_dict(),
        "blocks": [b.as_list() for b in blocks],
        "participants": prep.participants,
        "dirty_participants": int(dirty.sum()),
        "no_signature": prep.no_signature,
        "detail": [[gid, text] for gid, text in sorted(prep.detail.items())],
        "by_set": [[name, n] for name, n in prep.by_set.items()],
        "jobs": [[job.source, relative(layout.root, job.path), job.row_group, job.scan_start, job.rows] for job in prep.jobs],
        "seconds": timer.seconds,
        "peak_rss_mb": timer.rss,
    }, files=PREPARED_FILES)


def _run_unit(layout: Layout, settings: Settings, key: str, unit: str) -> None:
    work = work_folder(layout, key)
    meta = work.read_plan()
    reset_peak_rss()
    start = time.monotonic()
    if unit.startswith(LSH_UNIT):
        band = unit_number(unit, LSH_UNIT, meta["bands"])
        if work.done(unit) is not None:
            return
        dirty = np.load(work.path / BAND_DIRTY)
        output, result = PAIRS, np.zeros(0, np.uint64)  # no source to compute: no pair to generate
        if dirty.any():
            hashes = np.load(work.path / BAND_HASHES, mmap_mode="r")
            gids = np.load(work.path / BAND_GIDS, mmap_mode="r")
            result = band_pairs(np.array(hashes[band]), np.array(gids), None if dirty.all() else dirty)[0]
    elif unit.startswith(VERIFY_UNIT):  # (2, m): intersections and unions
        plan = work.read_plan(VERIFY, step="dedup_verify_plan")
        chunk = unit_number(unit, VERIFY_UNIT, plan["units"])
        if work.done(unit) is not None:
            return
        size = plan["chunk_pairs"]
        pair_nodes = np.array(np.load(work.path / PAIR_NODES, mmap_mode="r")[chunk * size : (chunk + 1) * size])
        store = open_store(work)
        output = COUNTS
        result = np.stack(store.counts(pair_nodes[:, 0], pair_nodes[:, 1],
                                       settings.near_dup.verify_batch_shingles))
    else:
        raise DedupWorkError(
            f"unknown dedup unit {unit!r} for {work.path}: expected {LSH_UNIT}NNN or {VERIFY_UNIT}NNNNN"
        )
    seconds, rss = round(time.monotonic() - start, 3), peak_rss_mb()
    save_array(work.unit_path(unit, output), result)
    work.mark_done(unit, [output], seconds=seconds, peak_rss_mb=rss)


def _plan_verify(layout: Layout, settings: Settings, work: WorkFolder, meta: dict[str, Any]) -> dict[str, Any]:
    near = settings.near_dup
    path = work.path
    timer = StepTimer()
    bands = [lsh_unit(b) for b in range(meta["bands"])]
    work.require_done(bands)
    local = unpack_pairs(merge_pairs([np.load(work.unit_path(u, PAIRS)) for u in bands]))
    generated = len(local)
    local = local[in_computed_blocks(local, _blocks(meta), np.load(path / SOURCE_OF_GID), len(meta["sources"]))]
    keys, differ = graph_pairs(local, np.load(path / NODE_OF_GID))
    local = local[differ]
    save_array(path / LOCAL_PAIRS, local)
    graph = unique_sorted(keys[differ])
    save_array(path / GRAPH_CANDIDATES, graph)
    candidates = unpack_pairs(graph)
    spec = graph_spec(near, settings.dedup.jaccard_threshold)
    agree = agreeing_candidates(candidates, path / GRAPH_SIGNATURES, np.load(path / BAND_GIDS, mmap_mode="r"),
                                meta["docs"], spec, near)
    save_array(path / AGREE, agree)
    pairs = candidates[agree]
    save_array(path / CANDIDATES, pairs)
    timer.lap("lsh")
    nodes = unique_sorted(pairs)
    save_array(path / PAIR_NODES, np.searchsorted(nodes, pairs))
    units = 0
    if len(pairs):
        with atomic_path(path / SHINGLES) as tmp:
            store = build_store(nodes, _jobs(layout, meta), np.load(path / "gid_of_scan.npy"), near, tmp,
                                settings.workers)
        save_array(path / "store_offset.npy", store.offset)
        save_array(path / "store_length.npy", store.length)
        units = -(-len(pairs) // near.verify_chunk_pairs)
    timer.lap("verify")
    plan = {
        "pairs": len(pairs), "lsh_pairs": generated, "block_pairs": len(local), "graph_candidates": len(graph),
        "shingled_docs": len(nodes), "chunk_pairs": int(near.verify_chunk_pairs), "units": units,
        "seconds": timer.seconds, "peak_rss_mb": timer.rss,
    }
    return work.write_plan(plan, files=verify_files(units), name=VERIFY)


def _blocks(meta: dict[str, Any]) -> list[Block]:
    return [Block(int(a), int(b), str(key), bool(reused)) for a, b, key, reused in meta["blocks"]]


def _jobs(layout: Layout, meta: dict[str, Any]) -> list[Job]:
    return [Job(src, absolute(layout.root, p), rg, scan_start, rows) for src, p, rg, scan_start, rows in meta["jobs"]]


def _graph(layout: Layout, work: WorkFolder, meta: dict[str, Any], blocks: list[Block], prep: Prepared,
           counts: tuple[np.ndarray, np.ndarray]) -> Graph:
    """The global graph: this build's scored node pairs, written into the blocks it computed, merged with the
    reused blocks."""
    path, folder = work.path, layout.stage(DEDUP)
    graph_new, agree = np.load(path / GRAPH_CANDIDATES), np.load(path / AGREE)
    inter, union = np.zeros(len(graph_new), np.int64), np.zeros(len(graph_new), np.int64)
    inter[agree], union[agree] = counts
    local = np.load(path / LOCAL_PAIRS)
    slot = np.searchsorted(graph_new, graph_pairs(local, prep.node_of_gid)[0])
    where = _source_rows(work, meta)
    write_blocks(folder, blocks, BlockPairs(local, agree[slot], inter[slot], union[slot]), prep.ids,
                 prep.source_of_gid, where)
    return merge_graph([(graph_new, agree, inter, union), *reused_parts(folder, blocks, where, prep.node_of_gid)])


def _source_rows(work: WorkFolder, meta: dict[str, Any]) -> SourceRows:
    """Each document's row in its source, from the scan order and the plan's jobs (sources in order)."""
    per_source = np.zeros(len(meta["sources"]), dtype=np.int64)
    for source, _path, _rg, _scan_start, rows in meta["jobs"]:
        per_source[source] += rows
    return SourceRows(np.load(work.path / "gid_of_scan.npy"), np.concatenate([[0], np.cumsum(per_source)]))


def _finish(layout: Layout, settings: Settings, key: str, log: Log | None) -> DedupResult:
    folder = layout.stage(DEDUP)
    work = work_folder(layout, key)
    meta = work.read_plan()
    plan = work.read_plan(VERIFY, step="dedup_verify_plan")
    source_ids = meta["sources"]
    now_key, inputs = dedup_key(layout, settings, source_ids)
    if now_key != key:
        raise DedupWorkError(
            f"{work.path}: the dedup inputs or settings changed since dedup_plan (key {key}, now {now_key}); "
            "run dedup_plan again"
        )
    cfg = settings.dedup
    chunks = [verify_unit(i) for i in range(plan["units"])]
    verified = work.require_done(chunks)
    band_markers = [work.done(lsh_unit(b), verify=False) or {} for b in range(meta["bands"])]  # timings only
    timer = steps_timer(meta, plan, band_markers, verified)
    scored = np.load(work.path / CANDIDATES)
    store, counts = None, (np.zeros(len(scored), np.int64), np.zeros(len(scored), np.int64))
    if plan["units"]:
        inter, union = np.concatenate([np.load(work.unit_path(u, COUNTS)) for u in chunks], axis=1)
        counts = (inter, union)
        store = open_store(work)
    prep = read_prepared(work.path, meta, graph_spec(settings.near_dup, cfg.jaccard_threshold))
    timer.restart()
    blocks = _blocks(meta)
    graph = _graph(layout, work, meta, blocks, prep, counts)
    timer.lap("blocks")
    near = settings.near_dup
    jobs, gid_of_scan = _jobs(layout, meta), np.load(work.path / "gid_of_scan.npy")

    def build_chain_store(gids: np.ndarray) -> ShingleStore:
        return build_store(gids, jobs, gid_of_scan, near, work.path / "chain_shingles.u64", settings.workers)

    chain = store_jaccard(store, unique_sorted(scored), near.verify_batch_shingles, build_chain_store)
    out_dir = folder / key
    out_dir.mkdir(parents=True, exist_ok=True)
    records.begin(out_dir)
    stats: dict[str, Any] = finish(prep, graph.pairs, (graph.intersection, graph.union), chain, cfg, out_dir, timer,
                   len(graph.candidates))
    reused = sum(b.reused for b in blocks)
    stats.update(
        sources=source_ids,
        shingled_docs=plan["shingled_docs"],
        blocks={"computed": len(blocks) - reused, "reused": reused},
        generated_pairs=plan["lsh_pairs"],
        block_pairs=plan["block_pairs"],
        scored_this_build=plan["pairs"],
    )
    names = [f"{key}/{t}" for t in TABLES]
    block_names = [b.name for b in blocks]
    stats = jsonable(stats)
    commit_outputs(folder, DEDUP_STAGE, key, inputs, key_settings(settings),
                   Outputs(names + block_names, files={"tables": names, "blocks": block_names}, stats=stats))
    remove_unnamed_blocks(folder, block_names)
    del prep, store
    work.remove()
    if log is not None:
        log(f"dedup: {stats['docs']:,} documents, {clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet - "
            f"done: {stats['exact_dropped']:,} exact, {stats['near_dropped']:,} near duplicates and "
            f"{stats['decontaminated']:,} contaminated documents dropped")
    return DedupResult.from_stats(stats, key, cached=False)


