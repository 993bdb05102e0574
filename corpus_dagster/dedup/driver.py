"""The dedup stage's driver: per-source MinHash signatures and the global dedup step, all their I/O.

- `run_signatures`: `stages/minhash/<source_id>/<key>/signatures.parquet`, keyed by the clean output's key
  and the signature settings the signature logic declares (`SIGNATURE_SETTINGS`, scheme included).
- the global dedup: `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean
  and signature keys, the protected sets' content hashes and the `dedup` settings. The record also names
  the sources it covered: the scrub and publish stages build exactly that source set.

The global dedup is split into units any executor can run on any process or machine that mounts the
artifacts root (`core.units`): `plan_dedup` (scan, decontaminate, exact dedup, band hashes; one unit per
LSH band), `run_dedup_unit` (`lsh-band-NNN`: one band's candidate pairs; `verify-NNNNN`: exact Jaccard of
one chunk of pairs), `plan_verify` (merge the bands' pairs, build the shingle store, one unit per
`dedup.verify_chunk_pairs` pairs) and `finish_dedup` (clusters, tables, record). They share the work folder
`stages/dedup/.work-<key>/` (ids and numbers as .npy, never text):

    prepare.json          plan_dedup's plan, written last: sources, bands, contamination details, scan jobs
    ids.arrow             document ids in gid order
    status.npy, matched.npy, gid_of_scan.npy
    band_hashes.npy       (bands, participants) uint64, one row per LSH unit; band_gids.npy their gids
    pairs-band-NNN.npy    an LSH unit's pairs, packed (gid_a << 32 | gid_b); .json beside it: its timing
    candidates.npy        the merged candidate pairs; pair_nodes.npy the same as node numbers
    shingles.u64, store_offset.npy, store_length.npy   the shingle store of the pairs' documents
    verify.json           plan_verify's plan, written last: pairs, chunk size, unit count
    jaccard-NNNNN.npy     a verification unit's Jaccard values; .json beside it: its timing

`run_global_dedup` runs the same steps in one process (units through a pool of `workers`): one code path,
so the output bytes never depend on who ran the units, in what order or how many at once.
"""

from __future__ import annotations

import glob
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.atomic import atomic_path, atomic_write_bytes
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.progress import Log, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.core.units import Plan, done_elsewhere, remove_work_folders, run_units
from corpus_dagster.dedup.corpus_dedup import DedupSource, Prepared, StepTimer, check_inputs, finish, prepare
from corpus_dagster.dedup.near import build_store
from corpus_dagster.dedup.protected import protected_set_specs
from corpus_dagster.dedup.scan import Job
from corpus_dagster.dedup.signatures import SIGNATURE_SETTINGS, compute_signatures
from corpus_dagster.lib.jaccard import ShingleStore
from corpus_dagster.lib.lsh import band_edges, merge_band_edges

SIGNATURES = "minhash"
DEDUP = "dedup"
SIGNATURES_CODE_VERSION = "1"
DEDUP_CODE_VERSION = "1"
TABLES = ("dropped.parquet", "clusters.parquet", "pairs.parquet")

# The work folder of one dedup key (see `work_dir`) and its files.
WORK_PREFIX = ".work-"
PREPARED = "prepare.json"  # written last by plan_dedup: its presence means the plan is complete
IDS = "ids.arrow"
BAND_HASHES = "band_hashes.npy"  # (bands, participants) uint64, band-major
BAND_GIDS = "band_gids.npy"
CANDIDATES = "candidates.npy"
PAIR_NODES = "pair_nodes.npy"
SHINGLES = "shingles.u64"
VERIFY_PLAN = "verify.json"  # written last by plan_verify
PREPARED_FILES = (PREPARED, IDS, "status.npy", "matched.npy", "gid_of_scan.npy", BAND_HASHES, BAND_GIDS)
LSH_UNIT = "lsh-band-"
VERIFY_UNIT = "verify-"


def signature_key(layout: Layout, source_id: str, resolved: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of a source's signatures: the clean output's key and the signature settings."""
    inputs = {"clean": clean_record(layout, source_id).key}
    settings = output_settings(resolved, "dedup", SIGNATURE_SETTINGS)
    return stage_key(SIGNATURES, SIGNATURES_CODE_VERSION, inputs, settings), inputs


@records.locked(lambda a: f"minhash.{a['source_id']}")
def run_signatures(layout: Layout, source_id: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """Hash one source's clean documents, unless the same clean output was hashed with the same settings."""
    key, inputs = signature_key(layout, source_id, resolved)
    folder = layout.stage(SIGNATURES, source_id)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    records.begin(folder)
    name = f"{key}/signatures.parquet"
    (folder / key).mkdir(exist_ok=True)
    stats = compute_signatures(clean_doc_files(layout, source_id, resolved), folder / name, resolved["dedup"],
                               resolved["workers"])
    records.commit(folder, StageRecord(
        stage=SIGNATURES, key=key, code_version=SIGNATURES_CODE_VERSION, inputs=inputs,
        settings=output_settings(resolved, "dedup", SIGNATURE_SETTINGS),
        outputs=records.describe_outputs(folder, [name]), files={"signatures": [name]}, stats=stats,
    ))
    return {**stats, "cached": False, "key": key}


def signature_file(layout: Layout, source_id: str) -> Path:
    """The current signature file of a source."""
    folder = layout.stage(SIGNATURES, source_id)
    record = records.require_record(folder, "minhash_signatures", source_id)
    return records.record_files(folder, record, "signatures")[0]


def protected_hashes(dedup_cfg: dict[str, Any]) -> list[list[str]]:
    """[name, path, sha256] of every protected-set file: their content, not their mtime, enters the key."""
    out = []
    for spec in protected_set_specs(dedup_cfg):
        pattern = spec["path"]
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        out.extend([spec["name"], p, sha256_file(p) if Path(p).is_file() else "missing"] for p in paths)
    return out


def dedup_key(layout: Layout, resolved: dict[str, Any], source_ids: list[str]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the global dedup over `source_ids`."""
    inputs = {
        "sources": [
            [sid, clean_record(layout, sid).key, signature_key(layout, sid, resolved)[0]] for sid in sorted(source_ids)
        ],
        "protected": protected_hashes(resolved["dedup"]),
    }
    return stage_key(DEDUP, DEDUP_CODE_VERSION, inputs, output_settings(resolved, "dedup")), inputs


class DedupWorkError(CorpusError):
    """A dedup unit or step ran without the work-folder files an earlier step writes; names the path."""


def work_dir(layout: Layout, key: str) -> Path:
    """`stages/dedup/.work-<key>/`: what the plan writes for the units and the units write for the finish.

    Not a temp name, so `records.begin` keeps it (a resumed run reuses it); the finish removes it, and a
    plan under another key removes it as stale.
    """
    return layout.stage(DEDUP) / f"{WORK_PREFIX}{key}"


def lsh_unit(band: int) -> str:
    """Name of the LSH unit of one band."""
    return f"{LSH_UNIT}{band:03d}"


def verify_unit(chunk: int) -> str:
    """Name of the verification unit of one chunk of candidate pairs."""
    return f"{VERIFY_UNIT}{chunk:05d}"


@records.locked(lambda a: "dedup")
def plan_dedup(layout: Layout, resolved: dict[str, Any], source_ids: list[str], log: Log | None = None) -> Plan:
    """Plan the global dedup: its key, and either its cached stats or one LSH unit per band.

    On a cache miss, computes missing signatures, scans, decontaminates and exact-dedups every document
    and writes the band hashes of the survivors to the work folder (`work_dir`), unless a complete plan
    of the same key is already there (a resumed run keeps it and the unit outputs next to it).
    """
    source_ids = sorted(source_ids)
    key, _ = dedup_key(layout, resolved, source_ids)
    folder = layout.stage(DEDUP)
    done = records.cached(folder, key)
    if done is not None:
        return Plan(key, (), cached={**done.stats, "cached": True, "key": key})
    records.begin(folder)
    work = work_dir(layout, key)
    remove_work_folders(folder, WORK_PREFIX, keep=work)
    meta = _read_json(work / PREPARED)
    if meta is None or meta.get("key") != key or not all((work / name).exists() for name in PREPARED_FILES):
        shutil.rmtree(work, ignore_errors=True)  # no complete plan: nothing in the folder is trusted
        meta = _prepare(layout, resolved, key, source_ids, work)
    if log is not None:
        log(f"dedup: {len(source_ids)} source(s), {meta['docs']:,} documents, "
            f"{_clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet")
        log(
            f"dedup plan: {meta['docs']:,} documents, {meta['participants']:,} in LSH, "
            f"{meta['bands']} band unit(s)"
        )
    return Plan(key, tuple(lsh_unit(b) for b in range(meta["bands"])), info={"sources": source_ids})


def _prepare(layout: Layout, resolved: dict[str, Any], key: str, source_ids: list[str], work: Path) -> dict[str, Any]:
    """Scan, decontaminate, exact-dedup, band hashes: write them to `work`, the plan file last."""
    for sid in source_ids:  # a missing or stale signature file is computed here rather than refused later
        if records.cached(layout.stage(SIGNATURES, sid), signature_key(layout, sid, resolved)[0]) is None:
            run_signatures(layout, sid, resolved)
    sources = [DedupSource(sid, clean_doc_files(layout, sid, resolved), signature_file(layout, sid)) for sid in source_ids]
    cfg = resolved["dedup"]
    check_inputs(sources, cfg)
    work.mkdir(parents=True, exist_ok=True)
    timer = StepTimer()
    prep = prepare(sources, cfg, work, resolved["workers"], timer)
    (work / "protected.npz").unlink(missing_ok=True)
    _save_array(work / "status.npy", prep.status)
    _save_array(work / "matched.npy", prep.matched)
    _save_array(work / "gid_of_scan.npy", prep.gid_of_scan)
    _save_array(work / BAND_HASHES, np.ascontiguousarray(prep.band_keys.T))  # band-major: one row per unit
    _save_array(work / BAND_GIDS, prep.band_gids)
    with atomic_path(work / IDS) as tmp, pa.ipc.new_file(str(tmp), pa.schema([("id", pa.string())])) as writer:
        writer.write_table(pa.table({"id": prep.ids}))
    meta = {
        "key": key,
        "sources": source_ids,
        "docs": len(prep.ids),
        "bands": int(cfg["bands"]),
        "participants": prep.participants,
        "no_signature": prep.no_signature,
        "detail": [[gid, text] for gid, text in sorted(prep.detail.items())],
        "by_set": [[name, n] for name, n in prep.by_set.items()],
        "jobs": [[job.source, _relative(layout, job.path), job.row_group, job.scan_start, job.rows] for job in prep.jobs],
        "seconds": timer.seconds,
        "peak_rss_mb": timer.rss,
    }
    _write_json(work / PREPARED, meta)
    return meta


@done_elsewhere(lambda layout: layout.stage(DEDUP))
def run_dedup_unit(layout: Layout, resolved: dict[str, Any], key: str, unit: str) -> None:
    """Run one unit of the global dedup: `lsh-band-NNN` (one band's candidate pairs) or `verify-NNNNN` (exact
    Jaccard of one chunk of candidate pairs). Reads and writes only the key's work folder, atomically; an
    existing output means the unit is done and it does nothing. Takes no lock: outputs are keyed."""
    work = work_dir(layout, key)
    meta = _require_json(work / PREPARED, "run plan_dedup first")
    reset_peak_rss()
    start = time.monotonic()
    if unit.startswith(LSH_UNIT):
        band = _unit_number(unit, LSH_UNIT, meta["bands"])
        out = work / f"pairs-band-{band:03d}.npy"
        if out.exists():
            return
        hashes = np.load(_require(work / BAND_HASHES, "run plan_dedup first"), mmap_mode="r")
        gids = np.load(_require(work / BAND_GIDS, "run plan_dedup first"), mmap_mode="r")
        result = band_edges(np.array(hashes[band]), np.array(gids))
    elif unit.startswith(VERIFY_UNIT):
        plan = _require_json(work / VERIFY_PLAN, "run plan_verify first")
        chunk = _unit_number(unit, VERIFY_UNIT, plan["units"])
        out = work / f"jaccard-{chunk:05d}.npy"
        if out.exists():
            return
        size = plan["chunk_pairs"]
        pair_nodes = np.load(_require(work / PAIR_NODES, "run plan_verify first"), mmap_mode="r")
        pair_nodes = np.array(pair_nodes[chunk * size : (chunk + 1) * size])
        store = _open_store(work)
        result = store.jaccard(pair_nodes[:, 0], pair_nodes[:, 1], resolved["dedup"]["verify_batch_shingles"])
    else:
        raise DedupWorkError(f"unknown dedup unit {unit!r} for {work}: expected {LSH_UNIT}NNN or {VERIFY_UNIT}NNNNN")
    # The timing sidecar first: an output on disk always has its sidecar.
    _write_json(out.with_suffix(".json"), {"seconds": round(time.monotonic() - start, 3), "peak_rss_mb": peak_rss_mb()})
    _save_array(out, result)


def plan_verify(layout: Layout, resolved: dict[str, Any], key: str, log: Log | None = None) -> Plan:
    """After every LSH unit: merge the bands' pairs into the sorted candidate pairs, build the shingle store
    of their documents and name one verification unit per `dedup.verify_chunk_pairs` pairs (none without
    `verify` or pairs). A second call reuses the first one's plan."""
    work = work_dir(layout, key)
    with records.stage_lock(layout.root, "dedup", resolved, what=f"plan_verify (dedup {key})"):
        done = records.cached(layout.stage(DEDUP), key)
        if done is not None:  # another run of this key finished meanwhile (and removed the work folder)
            return Plan(key, (), cached={**done.stats, "cached": True, "key": key})
        meta = _require_json(work / PREPARED, "run plan_dedup first")
        plan = _read_json(work / VERIFY_PLAN)
        if plan is None or not all((work / name).exists() for name in _verify_files(plan)):
            plan = _plan_verify(layout, resolved, work, meta)
    if log is not None:
        log(f"dedup verify plan: {plan['pairs']:,} candidate pairs, {plan['units']} verification unit(s)")
    return Plan(key, tuple(verify_unit(i) for i in range(plan["units"])))


def _plan_verify(layout: Layout, resolved: dict[str, Any], work: Path, meta: dict[str, Any]) -> dict[str, Any]:
    cfg = resolved["dedup"]
    timer = StepTimer()
    band_files = [work / f"pairs-band-{b:03d}.npy" for b in range(meta["bands"])]
    missing = [p for p in band_files if not p.exists()]
    if missing:
        raise DedupWorkError(
            f"{len(missing)} LSH unit output(s) missing, e.g. {missing[0]}; run every {LSH_UNIT}NNN unit first"
        )
    pairs = merge_band_edges([np.load(p) for p in band_files])
    _save_array(work / CANDIDATES, pairs)
    timer.lap("lsh")
    nodes = unique_sorted(pairs)
    _save_array(work / PAIR_NODES, np.searchsorted(nodes, pairs))
    units = 0
    if cfg["verify"] and len(pairs):
        jobs = [Job(src, _absolute(layout, path), rg, scan_start, rows) for src, path, rg, scan_start, rows in meta["jobs"]]
        gid_of_scan = np.load(_require(work / "gid_of_scan.npy", "run plan_dedup first"))
        with atomic_path(work / SHINGLES) as tmp:
            store = build_store(nodes, jobs, gid_of_scan, cfg, tmp, resolved["workers"])
        _save_array(work / "store_offset.npy", store.offset)
        _save_array(work / "store_length.npy", store.length)
        units = -(-len(pairs) // cfg["verify_chunk_pairs"])
    timer.lap("verify")
    plan = {
        "pairs": len(pairs), "chunk_pairs": int(cfg["verify_chunk_pairs"]), "units": units,
        "seconds": timer.seconds, "peak_rss_mb": timer.rss,
    }
    _write_json(work / VERIFY_PLAN, plan)
    return plan


@records.locked(lambda a: "dedup")
def finish_dedup(layout: Layout, resolved: dict[str, Any], key: str, log: Log | None = None) -> dict[str, Any]:
    """After every unit: clusters, the three tables in stages/dedup/<key>/, the stage record; removes the
    work folder. Returns what `run_global_dedup` returns (the cached stats when the stage is already done)."""
    folder = layout.stage(DEDUP)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    work = work_dir(layout, key)
    meta = _require_json(work / PREPARED, "run plan_dedup first")
    plan = _require_json(work / VERIFY_PLAN, "run plan_verify first")
    source_ids = meta["sources"]
    now_key, inputs = dedup_key(layout, resolved, source_ids)
    if now_key != key:
        raise DedupWorkError(
            f"{work}: the dedup inputs or settings changed since plan_dedup (key {key}, now {now_key}); "
            "run plan_dedup again"
        )
    cfg = resolved["dedup"]
    timer = StepTimer()
    for step_seconds, step_rss in ((meta["seconds"], meta["peak_rss_mb"]), (plan["seconds"], plan["peak_rss_mb"])):
        for name, seconds in step_seconds.items():
            timer.add(name, seconds, step_rss[name])
    band_files = [work / f"pairs-band-{b:03d}.npy" for b in range(meta["bands"])]
    chunk_files = [work / f"jaccard-{i:05d}.npy" for i in range(plan["units"])]
    missing = [p for p in chunk_files if not p.exists()]
    if missing:
        raise DedupWorkError(
            f"{len(missing)} verification unit output(s) missing, e.g. {missing[0]}; run every {VERIFY_UNIT}NNNNN "
            "unit first"
        )
    for step, files in (("lsh", band_files), ("verify", chunk_files)):
        for path in files:
            side = _read_json(path.with_suffix(".json")) or {}
            if "seconds" in side:
                timer.add(step, side["seconds"], side["peak_rss_mb"])
    pairs = np.load(_require(work / CANDIDATES, "run plan_verify first"))
    store, pair_j = None, np.full(len(pairs), np.nan)
    if plan["units"]:
        pair_j = np.concatenate([np.load(p) for p in chunk_files])
        store = _open_store(work)
    with pa.ipc.open_file(str(_require(work / IDS, "run plan_dedup first"))) as reader:
        ids = reader.read_all().column("id").combine_chunks()
    prep = Prepared(
        ids=ids,
        status=np.load(_require(work / "status.npy", "run plan_dedup first")),
        matched=np.load(_require(work / "matched.npy", "run plan_dedup first")),
        detail={int(gid): text for gid, text in meta["detail"]},
        by_set={name: n for name, n in meta["by_set"]},
        band_keys=np.zeros((0, meta["bands"]), np.uint64),
        band_gids=np.load(_require(work / BAND_GIDS, "run plan_dedup first"), mmap_mode="r"),
        no_signature=meta["no_signature"],
        jobs=[],
        gid_of_scan=np.zeros(0, np.int64),
    )
    timer.restart()
    out_dir = folder / key
    out_dir.mkdir(parents=True, exist_ok=True)
    records.begin(out_dir)
    stats = finish(prep, pairs, pair_j, store, cfg, out_dir, timer)
    stats["sources"] = source_ids
    names = [f"{key}/{t}" for t in TABLES]
    records.commit(folder, StageRecord(
        stage=DEDUP, key=key, code_version=DEDUP_CODE_VERSION, inputs=inputs, settings=output_settings(resolved, "dedup"),
        outputs=records.describe_outputs(folder, names), files={"tables": names}, stats=_jsonable(stats),
    ))
    del prep, store
    shutil.rmtree(work, ignore_errors=True)
    if log is not None:
        log(f"dedup: {stats['docs']:,} documents, {_clean_bytes(layout, source_ids) / 1e6:.1f} MB of clean Parquet - "
            f"done: {stats['exact_dropped']:,} exact, {stats['near_dropped']:,} near duplicates and "
            f"{stats['decontaminated']:,} contaminated documents dropped")
    return {**stats, "cached": False, "key": key}


@records.locked(lambda a: "dedup")
def run_global_dedup(
    layout: Layout, resolved: dict[str, Any], source_ids: list[str], log: Log | None = None
) -> dict[str, Any]:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    The plan, its units (through a pool of `workers` processes), the verification plan, its units and the
    finish, in this process: the same steps an executor spreads over processes or machines.
    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    source_ids = sorted(source_ids)
    key, _ = dedup_key(layout, resolved, source_ids)
    done = records.cached(layout.stage(DEDUP), key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    n_docs = sum(clean_record(layout, sid).stats.get("kept", 0) for sid in source_ids)
    workers = resolved["workers"]
    with heartbeat(log, "dedup", interval_of(resolved), f"{n_docs:,} documents"):
        plan = plan_dedup(layout, resolved, source_ids, log)
        if plan.cached is not None:
            return plan.cached
        run_units(run_dedup_unit, (layout, resolved, plan.key), plan.units, workers)
        verify = plan_verify(layout, resolved, plan.key, log)
        run_units(run_dedup_unit, (layout, resolved, plan.key), verify.units, workers)
        return finish_dedup(layout, resolved, plan.key, log)


def _clean_bytes(layout: Layout, source_ids: list[str]) -> int:
    """Bytes of the clean Parquet files the dedup reads (for the progress lines)."""
    return sum(p.stat().st_size for sid in source_ids for p in clean_doc_files(layout, sid))


def _verify_files(plan: dict[str, Any]) -> list[str]:
    """The files a complete verification plan wrote."""
    return [CANDIDATES, PAIR_NODES] + ([SHINGLES, "store_offset.npy", "store_length.npy"] if plan["units"] else [])


def _unit_number(unit: str, prefix: str, count: int) -> int:
    tail = unit[len(prefix):]
    if not tail.isdigit() or int(tail) >= count:
        raise DedupWorkError(f"unknown dedup unit {unit!r}: this plan has {count} {prefix}NNN unit(s)")
    return int(tail)


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise DedupWorkError(f"dedup work file {path} is missing (work folder {path.parent}); {what}")
    return path


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _require_json(path: Path, what: str) -> dict[str, Any]:
    data = _read_json(_require(path, what))
    if data is None:
        raise DedupWorkError(f"dedup work file {path} is unreadable; remove {path.parent} and {what}")
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=1) + "\n").encode())


def _save_array(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        np.save(tmp, array)


def _open_store(work: Path) -> ShingleStore:
    offset = np.load(_require(work / "store_offset.npy", "run plan_verify first"))
    length = np.load(_require(work / "store_length.npy", "run plan_verify first"))
    return ShingleStore.open(_require(work / SHINGLES, "run plan_verify first"), offset, length)


def _relative(layout: Layout, path: str) -> str:
    """A clean file's path relative to the artifacts root when it lies under it (another machine may mount
    the root elsewhere), else absolute."""
    try:
        return Path(path).resolve().relative_to(layout.root).as_posix()
    except ValueError:
        return str(path)


def _absolute(layout: Layout, path: str) -> str:
    return str(layout.root / path) if not Path(path).is_absolute() else path


def _jsonable(value: Any) -> Any:
    """Stats as plain JSON values (numpy scalars become Python numbers)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


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


def _table(layout: Layout, name: str, resolved: dict[str, Any] | None = None) -> Path:
    return next(p for p in dedup_tables(layout, resolved).values() if p.name == name)


def dropped_ids(layout: Layout, resolved: dict[str, Any] | None = None) -> pl.DataFrame:
    """The id of every document the dedup step removed (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "dropped.parquet", resolved), columns=["id"])


def clusters(layout: Layout, resolved: dict[str, Any] | None = None) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster (`resolved`: see dedup_tables)."""
    return pl.read_parquet(_table(layout, "clusters.parquet", resolved), columns=["id", "cluster_min_id"])


def dedup_tables(layout: Layout, resolved: dict[str, Any] | None = None) -> dict[str, Path]:
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
