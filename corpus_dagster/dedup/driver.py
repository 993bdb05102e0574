"""The dedup stage's driver: the global dedup step, all its I/O.

It writes `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean and
signature keys (the signatures are the minhash stage's, read through `corpus_dagster.minhash.driver`),
the protected sets' content hashes and the `dedup` settings. The record also names the sources it
covered: the scrub and publish stages build exactly that source set.

The global dedup is split into units any executor can run on any process or machine that mounts the
artifacts root (`core.units`): `plan_dedup` (scan, decontaminate, exact dedup, band hashes of the
near-duplicate graph's documents; one unit per LSH band), `run_dedup_unit` (`lsh-band-NNN`: every pair that
shares a bucket of one band; `verify-NNNNN`: the shingle counts of one chunk of pairs), `plan_verify` (merge
the bands' pairs, build the shingle store, one unit per `near_dup.verify_chunk_pairs` pairs) and
`finish_dedup` (dedup's clusters over the graph, tables, record). They share the key's work
folder `stages/dedup/.work-<key>/` (`core.work.WorkFolder`; its files are named, written and read in
`dedup.work_files`; each unit's done-marker `units/<unit>.json`, with its timing, is written last).

`run_global_dedup` runs the same steps in one process (units through a pool of `workers`): one code path,
so the output bytes never depend on who ran the units, in what order or how many at once.
"""

from __future__ import annotations

import glob
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.progress import Log, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import DedupSettings, Settings, as_settings
from corpus_dagster.core.stage import Outputs, Stage, commit_outputs
from corpus_dagster.core.units import Plan, done_elsewhere, run_units
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.dedup.blocks import (
    BLOCKS,
    Block,
    Graph,
    block_numbers,
    dirty_documents,
    graph_pairs,
    in_computed_blocks,
    merge_graph,
    plan_blocks,
    read_blocks,
    write_block,
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
from corpus_dagster.dedup.near import agreeing_candidates, build_store, store_jaccard
from corpus_dagster.dedup.protected import protected_set_specs
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
from corpus_dagster.lib.near_graph import GraphSpec, graph_spec
from corpus_dagster.minhash.driver import run_signatures, signature_file, signature_key, signatures_current

DEDUP = "dedup"
DEDUP_CODE_VERSION = "3"
TABLES = ("dropped.parquet", "clusters.parquet", "pairs.parquet")

DEDUP_STAGE = Stage(DEDUP, DEDUP_CODE_VERSION)

def protected_hashes(dedup_cfg: DedupSettings) -> list[list[str]]:
    """[name, path, sha256] of every protected-set file: their content, not their mtime, enters the key."""
    out = []
    for spec in protected_set_specs(dedup_cfg):
        pattern = spec["path"]
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        out.extend([spec["name"], p, sha256_file(p) if Path(p).is_file() else "missing"] for p in paths)
    return out


def dedup_key(layout: Layout, resolved: Settings | Mapping[str, Any],
              source_ids: list[str]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the global dedup over `source_ids`."""
    settings = as_settings(resolved)
    inputs = {
        "sources": [
            [sid, clean_record(layout, sid).key, signature_key(layout, sid, settings)[0]] for sid in sorted(source_ids)
        ],
        "protected": protected_hashes(settings.dedup),
    }
    return DEDUP_STAGE.key(inputs, key_settings(settings)), inputs


def key_settings(settings: Settings) -> dict[str, Any]:
    """The settings that decide the dedup outputs: dedup's policy and the near-duplicate graph's shape."""
    return {"dedup": output_settings(settings.resolved, "dedup"), "near_dup": output_settings(settings.resolved, "near_dup")}


def work_folder(layout: Layout, key: str) -> WorkFolder:
    """`stages/dedup/.work-<key>/`: what the plan writes for the units and the units write for the finish."""
    return WorkFolder(layout.stage(DEDUP), key, "dedup", "plan_dedup", "run_dedup_unit", error=DedupWorkError)


@records.locked(lambda a: "dedup")
def plan_dedup(layout: Layout, resolved: Settings | Mapping[str, Any], source_ids: list[str],
               log: Log | None = None) -> Plan:
    """Plan the global dedup: its key, and either its cached stats or one LSH unit per band.

    On a cache miss, computes missing signatures, scans, decontaminates and exact-dedups every document
    and writes the band hashes of the survivors to the work folder (`work_folder`), unless a complete plan
    of the same key is already there (a resumed run keeps it and the unit outputs next to it).
    """
    settings = as_settings(resolved)
    source_ids = sorted(source_ids)
    key, _ = dedup_key(layout, settings, source_ids)
    folder = layout.stage(DEDUP)
    done = records.cached(folder, key)
    if done is not None:
        return Plan(key, (), cached={**done.stats, "cached": True, "key": key})
    records.begin(folder)
    work = work_folder(layout, key)
    meta = work.start()
    if meta is None:
        meta = _prepare(layout, settings, source_ids, work)
    if log is not None:
        log(f"dedup: {len(source_ids)} source(s), {meta['docs']:,} documents, "
            f"{_clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet")
        reused = sum(1 for b in meta["blocks"] if b[3])
        log(
            f"dedup plan: {meta['docs']:,} documents, {meta['participants']:,} in LSH "
            f"({meta['dirty_participants']:,} in blocks to compute), {meta['bands']} band unit(s); "
            f"near-duplicate blocks: {reused} of {len(meta['blocks'])} reused"
        )
    return Plan(key, tuple(lsh_unit(b) for b in range(meta["bands"])), info={"sources": source_ids})


def _prepare(layout: Layout, settings: Settings, source_ids: list[str], work: WorkFolder) -> dict[str, Any]:
    """Scan, decontaminate, exact-dedup, band hashes: write them to the work folder, the plan last."""
    for sid in source_ids:  # a missing or stale signature file is computed here rather than refused later
        if not signatures_current(layout, sid, settings):
            run_signatures(layout, settings, sid)
    sources = [DedupSource(sid, clean_doc_files(layout, sid, settings), signature_file(layout, sid)) for sid in source_ids]
    cfg = settings.dedup
    spec = graph_spec(settings.near_dup, cfg.jaccard_threshold)
    check_inputs(sources, settings.near_dup, spec)
    blocks = plan_blocks([(sid, signature_key(layout, sid, settings)[0]) for sid in source_ids], spec,
                         reusable_blocks(layout))
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


@done_elsewhere(lambda layout: layout.stage(DEDUP))
def run_dedup_unit(layout: Layout, resolved: Settings | Mapping[str, Any], key: str, unit: str) -> None:
    """Run one unit of the global dedup: `lsh-band-NNN` (one band's candidate pairs) or `verify-NNNNN` (exact
    Jaccard of one chunk of candidate pairs). Reads the key's work folder and writes only the unit's files,
    atomically, its done-marker last; a unit already done does nothing. Takes no lock: outputs are keyed."""
    work = work_folder(layout, key)
    meta = work.read_plan()
    reset_peak_rss()
    start = time.monotonic()
    if unit.startswith(LSH_UNIT):
        band = unit_number(unit, LSH_UNIT, meta["bands"])
        if work.done(unit) is not None:
            return
        hashes = np.load(work.path / BAND_HASHES, mmap_mode="r")
        gids = np.load(work.path / BAND_GIDS, mmap_mode="r")
        dirty = np.load(work.path / BAND_DIRTY)
        output, result = PAIRS, band_pairs(np.array(hashes[band]), np.array(gids), None if dirty.all() else dirty)[0]
    elif unit.startswith(VERIFY_UNIT):  # (2, m): intersections and unions
        plan = work.read_plan(VERIFY, step="plan_verify")
        chunk = unit_number(unit, VERIFY_UNIT, plan["units"])
        if work.done(unit) is not None:
            return
        size = plan["chunk_pairs"]
        pair_nodes = np.array(np.load(work.path / PAIR_NODES, mmap_mode="r")[chunk * size : (chunk + 1) * size])
        store = open_store(work)
        output = COUNTS
        result = np.stack(store.counts(pair_nodes[:, 0], pair_nodes[:, 1],
                                       as_settings(resolved).near_dup.verify_batch_shingles))
    else:
        raise DedupWorkError(
            f"unknown dedup unit {unit!r} for {work.path}: expected {LSH_UNIT}NNN or {VERIFY_UNIT}NNNNN"
        )
    seconds, rss = round(time.monotonic() - start, 3), peak_rss_mb()
    save_array(work.unit_path(unit, output), result)
    work.mark_done(unit, [output], seconds=seconds, peak_rss_mb=rss)


def plan_verify(layout: Layout, resolved: Settings | Mapping[str, Any], key: str, log: Log | None = None) -> Plan:
    """After every LSH unit: merge the bands' pairs into the sorted candidate pairs, build the shingle store
    of their documents and name one verification unit per `near_dup.verify_chunk_pairs` pairs (none without
    pairs). A second call reuses the first one's plan."""
    work = work_folder(layout, key)
    with records.stage_lock(layout.root, "dedup", resolved, what=f"plan_verify (dedup {key})"):
        done = records.cached(layout.stage(DEDUP), key)
        if done is not None:  # another run of this key finished meanwhile (and removed the work folder)
            return Plan(key, (), cached={**done.stats, "cached": True, "key": key})
        meta = work.read_plan()
        plan = work.find_plan(VERIFY)
        if plan is None:
            plan = _plan_verify(layout, as_settings(resolved), work, meta)
    if log is not None:
        log(f"dedup verify plan: {plan['lsh_pairs']:,} LSH pairs generated, {plan['block_pairs']:,} of them in blocks "
            f"to compute, {plan['graph_candidates']:,} node pairs, {plan['pairs']:,} with signatures that agree "
            f"enough to score, {plan['units']} verification unit(s)")
    return Plan(key, tuple(verify_unit(i) for i in range(plan["units"])))


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


def reusable_blocks(layout: Layout) -> set[str]:
    """Keys of the near-duplicate blocks the last dedup record names and that still match it (size and
    sha256): only those are read back instead of computed."""
    folder = layout.stage(DEDUP)
    record = records.read_record(folder)
    if record is None:
        return set()
    names = record.files.get("blocks", [])
    damaged = {path.name for path, _ in records.damaged_outputs(folder, record, names)}
    return {Path(name).stem for name in names if Path(name).name not in damaged}


def _graph(layout: Layout, settings: Settings, work: WorkFolder, meta: dict[str, Any], prep: Prepared,
           counts: tuple[np.ndarray, np.ndarray]) -> tuple[Graph, list[Block]]:
    """Write the blocks this build computed, read the reused ones back, and merge both into the graph."""
    path, folder = work.path, layout.stage(DEDUP)
    blocks = _blocks(meta)
    graph_new, agree = np.load(path / GRAPH_CANDIDATES), np.load(path / AGREE)
    inter, union = np.zeros(len(graph_new), np.int64), np.zeros(len(graph_new), np.int64)
    inter[agree], union[agree] = counts
    local = np.load(path / LOCAL_PAIRS)
    slot = np.searchsorted(graph_new, graph_pairs(local, prep.node_of_gid)[0])
    number = block_numbers(local, prep.source_of_gid, len(meta["sources"]))
    for block in blocks:
        if not block.reused:
            sel = number == block.a * len(meta["sources"]) + block.b
            rows = slot[sel]
            write_block(folder / block.name, prep.ids, local[sel], agree[rows], inter[rows], union[rows])
    old = read_blocks([folder / b.name for b in blocks if b.reused], prep.ids)
    old_keys, differ = graph_pairs(old.pairs, prep.node_of_gid)
    parts = [(graph_new, agree, inter, union),
             (old_keys[differ], old.scored[differ], old.intersection[differ], old.union[differ])]
    return merge_graph(parts), blocks


@records.locked(lambda a: "dedup")
def finish_dedup(layout: Layout, resolved: Settings | Mapping[str, Any], key: str,
                 log: Log | None = None) -> dict[str, Any]:
    """After every unit: clusters, the three tables in stages/dedup/<key>/, the stage record; removes the
    work folder. Returns what `run_global_dedup` returns (the cached stats when the stage is already done)."""
    settings = as_settings(resolved)
    folder = layout.stage(DEDUP)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    work = work_folder(layout, key)
    meta = work.read_plan()
    plan = work.read_plan(VERIFY, step="plan_verify")
    source_ids = meta["sources"]
    now_key, inputs = dedup_key(layout, settings, source_ids)
    if now_key != key:
        raise DedupWorkError(
            f"{work.path}: the dedup inputs or settings changed since plan_dedup (key {key}, now {now_key}); "
            "run plan_dedup again"
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
    graph, blocks = _graph(layout, settings, work, meta, prep, counts)
    timer.lap("blocks")
    near = settings.near_dup
    jobs, gid_of_scan = _jobs(layout, meta), np.load(work.path / "gid_of_scan.npy")

    def build_chain_store(gids: np.ndarray) -> ShingleStore:
        return build_store(gids, jobs, gid_of_scan, near, work.path / "chain_shingles.u64", settings.workers)

    chain = store_jaccard(store, unique_sorted(scored), near.verify_batch_shingles, build_chain_store)
    out_dir = folder / key
    out_dir.mkdir(parents=True, exist_ok=True)
    records.begin(out_dir)
    stats = finish(prep, graph.pairs, (graph.intersection, graph.union), chain, cfg, out_dir, timer,
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
    commit_outputs(folder, DEDUP_STAGE, key, inputs, key_settings(settings),
                   Outputs(names + block_names, files={"tables": names, "blocks": block_names}, stats=jsonable(stats)))
    _remove_other_blocks(folder, block_names)
    del prep, store
    work.remove()
    if log is not None:
        log(f"dedup: {stats['docs']:,} documents, {_clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet - "
            f"done: {stats['exact_dropped']:,} exact, {stats['near_dropped']:,} near duplicates and "
            f"{stats['decontaminated']:,} contaminated documents dropped")
    return {**stats, "cached": False, "key": key}


@records.locked(lambda a: "dedup")
def run_global_dedup(
    layout: Layout, resolved: Settings | Mapping[str, Any], source_ids: list[str], log: Log | None = None
) -> dict[str, Any]:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    The plan, its units (through a pool of `workers` processes), the verification plan, its units and the
    finish, in this process: the same steps an executor spreads over processes or machines.
    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    settings = as_settings(resolved)
    source_ids = sorted(source_ids)
    key, _ = dedup_key(layout, settings, source_ids)
    done = records.cached(layout.stage(DEDUP), key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    n_docs = sum(clean_record(layout, sid).stats.get("kept", 0) for sid in source_ids)
    workers = settings.workers
    with heartbeat(log, "dedup", interval_of(settings.resolved), f"{n_docs:,} documents"):
        plan = plan_dedup(layout, settings, source_ids, log)
        if plan.cached is not None:
            return plan.cached
        run_units(run_dedup_unit, (layout, settings, plan.key), plan.units, workers)
        verify = plan_verify(layout, settings, plan.key, log)
        run_units(run_dedup_unit, (layout, settings, plan.key), verify.units, workers)
        return finish_dedup(layout, settings, plan.key, log)


def _remove_other_blocks(folder: Path, keep: list[str]) -> None:
    """Delete the block files the committed record does not name (older keys): the next build reuses only
    what the last record names."""
    named = {Path(n).name for n in keep}
    for path in sorted((folder / BLOCKS).glob("*.parquet")):
        if path.name not in named:
            path.unlink(missing_ok=True)


def _clean_bytes(layout: Layout, source_ids: list[str]) -> int:
    """Bytes of the clean Parquet files the dedup reads (for the progress lines)."""
    return sum(p.stat().st_size for sid in source_ids for p in clean_doc_files(layout, sid))


# --- Reading dedup outputs (the only way the scrub and publish stages see them) ---------------------------

def dedup_record(layout: Layout) -> StageRecord:
    """The record of the last global dedup (UpstreamMissing when it never ran)."""
    return records.require_record(layout.stage(DEDUP), "dedup")


def dedup_sources(layout: Layout) -> list[str]:
    """The sources the last global dedup covered, sorted: the source set of everything downstream."""
    return list(dedup_record(layout).stats["sources"])


def dedup_stats(layout: Layout) -> dict[str, Any]:
    """The stats of the last global dedup."""
    return dedup_record(layout).stats


def _table(layout: Layout, name: str, resolved: Settings | Mapping[str, Any] | None = None) -> Path:
    return next(p for p in dedup_tables(layout, resolved).values() if p.name == name)


def dropped_ids(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> pl.DataFrame:
    """The id of every document the dedup step removed (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "dropped.parquet", resolved), columns=["id"])


def clusters(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "clusters.parquet", resolved), columns=["id", "cluster_min_id"])


def near_graph(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> tuple[Path, GraphSpec, list[str]]:
    """The last dedup's near-duplicate graph: its verified-pair table (pairs.parquet), the graph's shape and
    the sources it covers (`resolved`: see dedup_tables)."""
    record = dedup_record(layout)
    shape = record.stats.get("graph")
    if shape is None:
        raise UpstreamMissing(f"{layout.stage(DEDUP)}: the last dedup recorded no near-duplicate graph; run dedup")
    return dedup_tables(layout, resolved)["pairs"], GraphSpec.from_dict(shape), list(record.stats["sources"])


def dedup_tables(layout: Layout, resolved: Settings | Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Paths of the dedup tables by name (dropped, clusters, pairs), checked against the dedup record.

    With `resolved`, a damaged table is rebuilt here: the global dedup reruns over the sources it covered
    (deterministic, so under the same key it writes the same bytes)."""
    folder = layout.stage(DEDUP)
    record = dedup_record(layout)

    def rebuild() -> None:
        sources = list(record.stats["sources"])
        if resolved is not None and dedup_key(layout, resolved, sources)[0] == record.key:  # else: refused below
            run_global_dedup(layout, resolved, sources)

    return {p.stem: p for p in records.record_files(folder, record, "tables", None if resolved is None else rebuild)}
