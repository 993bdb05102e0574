"""One publish: gather the final per-source tables and stage counts, write shards and manifest."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_dagster.atomic import atomic_dir
from corpus_dagster.layout import Layout
from corpus_dagster.ledger import ledger_sha256
from corpus_dagster.publish.manifest import build_manifest, manifest_bytes
from corpus_dagster.publish.shards import Annotations, ShardsResult, SourceDocs, build_shards
from corpus_dagster.store import stage_files, stage_stats

FINAL_STAGE = "clean"  # the last per-source stage before the shards


@dataclass
class PublishResult:
    """Manifest dict and shard stats of one publish."""

    manifest: dict[str, Any]
    shards: ShardsResult


def reason_filter_key(reason: str) -> str:
    """Manifest `filters` key of a clean reason code."""
    return reason


def collect_filters(layout: Layout, source_ids: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Filter and repair counts summed over the sources' clean records (from their rejects tables)."""
    filters: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    for sid in source_ids:
        stats = stage_stats(layout, "clean", sid)
        for reason, n in stats.get("reasons", {}).items():
            filters[reason_filter_key(reason)] += n
        repairs.update(stats.get("repairs", {}))
    return dict(filters), dict(repairs)


def write_publish(layout: Layout, resolved: dict[str, Any], source_ids: list[str], out_dir: Path, workers: int) -> PublishResult:
    """Write shards and _MANIFEST.json of the given sources into out_dir (an empty folder)."""
    sources = [SourceDocs(sid, stage_files(layout, FINAL_STAGE, sid, "docs")) for sid in source_ids]
    annotations = Annotations()
    shards = build_shards(sources, annotations, out_dir, resolved, workers)
    filters, repairs = collect_filters(layout, source_ids)
    manifest = build_manifest(resolved, shards.shards, filters, repairs, {}, {}, ledger_sha256(layout.ledger))
    (out_dir / "_MANIFEST.json").write_bytes(manifest_bytes(manifest))
    return PublishResult(manifest, shards)


def publish(layout: Layout, resolved: dict[str, Any], source_ids: list[str]) -> PublishResult:
    """Publish into corpus/<dataset>/<version>/, replacing it whole and atomically."""
    with atomic_dir(layout.shards) as tmp:
        result = write_publish(layout, resolved, source_ids, tmp, resolved["workers"])
    return result
