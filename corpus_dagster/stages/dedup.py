"""Dedup stage drivers: per-source MinHash signatures (cached) and the global dedup step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from corpus_dagster.atomic import atomic_write_bytes
from corpus_dagster.dedup.pipeline import DedupSource, run_dedup
from corpus_dagster.dedup.signatures import compute_signatures
from corpus_dagster.layout import Layout
from corpus_dagster.stages.cache import cache_key, current_key, write_current
from corpus_dagster.store import clean_doc_files, read_current

SIGNATURE_KEYS = ("num_perm", "seed", "shingle_size")
STATS_FILE = "_STATS.json"


def signature_settings(dedup_cfg: dict[str, Any]) -> dict[str, Any]:
    """The dedup settings a signature depends on (others, like thresholds, do not invalidate it)."""
    return {k: dedup_cfg[k] for k in SIGNATURE_KEYS if k in dedup_cfg}


def signature_file(layout: Layout, source_id: str) -> Path:
    """The current signature file of a source."""
    folder = layout.stage("minhash", source_id)
    record = read_current(folder)
    if record is None:
        raise FileNotFoundError(f"stage 'minhash' has not completed for source {source_id!r}")
    return folder / record["file"]


def run_signatures(layout: Layout, source_id: str, resolved: dict[str, Any]) -> dict[str, Any]:
    """Hash one source's clean documents, unless the same clean output was hashed with the same settings."""
    clean_key = current_key(layout.stage("clean", source_id))
    if clean_key is None:
        raise FileNotFoundError(f"stage 'clean' has not completed for source {source_id!r}")
    key = cache_key(clean_key, signature_settings(resolved["dedup"]))
    folder = layout.stage("minhash", source_id)
    record = read_current(folder)
    if record and record["key"] == key and (folder / record["file"]).exists():
        return {**record["stats"], "cached": True}
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{key}/signatures.parquet"
    (folder / key).mkdir(exist_ok=True)
    stats = compute_signatures(clean_doc_files(layout, source_id), folder / name, resolved["dedup"], resolved["workers"])
    write_current(folder, {"key": key, "file": name, "stats": stats})
    return {**stats, "cached": False}


def run_global_dedup(layout: Layout, resolved: dict[str, Any], source_ids: list[str]) -> dict[str, Any]:
    """Decontaminate, exact- and near-dedup every source; tables and stats land in stages/dedup/."""
    sources = [DedupSource(sid, clean_doc_files(layout, sid), signature_file(layout, sid)) for sid in source_ids]
    out_dir = layout.stage("dedup")
    out_dir.mkdir(parents=True, exist_ok=True)
    stats = run_dedup(sources, resolved["dedup"], out_dir, resolved["workers"])
    atomic_write_bytes(out_dir / STATS_FILE, (json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n").encode())
    return stats


def dedup_stats(layout: Layout) -> dict[str, Any]:
    """The stats of the last global dedup."""
    path = layout.stage("dedup") / STATS_FILE
    if not path.exists():
        raise FileNotFoundError("the global dedup step has not completed (materialize `dedup`)")
    return json.loads(path.read_text())


def dropped_ids(layout: Layout) -> pl.DataFrame:
    """The id of every document the dedup step removed."""
    return pl.read_parquet(layout.stage("dedup") / "dropped.parquet", columns=["id"])


def clusters(layout: Layout) -> pl.DataFrame:
    """id, cluster_min_id of every member of a near-duplicate cluster."""
    return pl.read_parquet(layout.stage("dedup") / "clusters.parquet", columns=["id", "cluster_min_id"])
