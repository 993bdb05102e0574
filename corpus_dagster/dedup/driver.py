"""The dedup stage's driver: per-source MinHash signatures and the global dedup step, all their I/O.

- `run_signatures`: `stages/minhash/<source_id>/<key>/signatures.parquet`, keyed by the clean output's key
  and the signature settings the signature logic declares (`SIGNATURE_SETTINGS`, scheme included).
- `run_global_dedup`: `stages/dedup/<key>/{dropped,clusters,pairs}.parquet`, keyed by every source's clean
  and signature keys, the protected sets' content hashes and the `dedup` settings. The record also names
  the sources it covered: the scrub and publish stages build exactly that source set.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import polars as pl

from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log, Progress, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.dedup.corpus_dedup import DedupSource, run_dedup
from corpus_dagster.dedup.protected import protected_set_specs
from corpus_dagster.dedup.signatures import SIGNATURE_SETTINGS, compute_signatures

SIGNATURES = "minhash"
DEDUP = "dedup"
SIGNATURES_CODE_VERSION = "1"
DEDUP_CODE_VERSION = "1"
TABLES = ("dropped.parquet", "clusters.parquet", "pairs.parquet")


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
    stats = compute_signatures(clean_doc_files(layout, source_id), folder / name, resolved["dedup"], resolved["workers"])
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


@records.locked(lambda a: "dedup")
def run_global_dedup(
    layout: Layout, resolved: dict[str, Any], source_ids: list[str], log: Log | None = None
) -> dict[str, Any]:
    """Decontaminate, exact- and near-dedup the given sources; tables and stats land in stages/dedup/<key>/.

    `log` (a callable taking a line) hears a start line, a heartbeat every `progress.interval_s` seconds and a
    closing line with documents, MB and rate.
    """
    source_ids = sorted(source_ids)
    key, inputs = dedup_key(layout, resolved, source_ids)
    folder = layout.stage(DEDUP)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    records.begin(folder)
    for sid in source_ids:  # a missing or stale signature file is computed here rather than refused later
        if records.cached(layout.stage(SIGNATURES, sid), signature_key(layout, sid, resolved)[0]) is None:
            run_signatures(layout, sid, resolved)
    sources = [DedupSource(sid, clean_doc_files(layout, sid), signature_file(layout, sid)) for sid in source_ids]
    out_dir = folder / key
    out_dir.mkdir(parents=True, exist_ok=True)
    records.begin(out_dir)
    n_docs = sum(clean_record(layout, sid).stats.get("kept", 0) for sid in source_ids)
    n_bytes = sum(p.stat().st_size for s in sources for p in s.doc_files)
    progress = Progress(log, "dedup", total_docs=n_docs, interval_s=interval_of(resolved))
    if log is not None:
        log(f"dedup: {len(sources)} source(s), {n_docs:,} documents, {n_bytes / 1e6:.1f} MB of clean Parquet")
    with heartbeat(log, "dedup", interval_of(resolved), f"{n_docs:,} documents"):
        stats = run_dedup(sources, resolved["dedup"], out_dir, resolved["workers"])
    progress.update(n_docs, n_bytes)
    progress.finish()
    stats["sources"] = source_ids
    names = [f"{key}/{t}" for t in TABLES]
    records.commit(folder, StageRecord(
        stage=DEDUP, key=key, code_version=DEDUP_CODE_VERSION, inputs=inputs, settings=output_settings(resolved, "dedup"),
        outputs=records.describe_outputs(folder, names), files={"tables": names}, stats=_jsonable(stats),
    ))
    return {**stats, "cached": False, "key": key}


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


def _table(layout: Layout, name: str) -> Path:
    folder = layout.stage(DEDUP)
    record = dedup_record(layout)
    return next(p for p in records.record_files(folder, record, "tables") if p.name == name)


def dropped_ids(layout: Layout) -> pl.DataFrame:
    """The id of every document the dedup step removed."""
    return pl.read_parquet(_table(layout, "dropped.parquet"), columns=["id"])


def clusters(layout: Layout) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster."""
    return pl.read_parquet(_table(layout, "clusters.parquet"), columns=["id", "cluster_min_id"])


def dedup_tables(layout: Layout) -> dict[str, Path]:
    """Paths of the dedup tables by name (dropped, clusters, pairs)."""
    folder = layout.stage(DEDUP)
    return {p.stem: p for p in records.record_files(folder, dedup_record(layout), "tables")}
