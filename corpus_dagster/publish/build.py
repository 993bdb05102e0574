"""One publish: gather the final per-source tables and stage counts, write shards and manifest."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_dagster.atomic import atomic_dir
from corpus_dagster.clean.pipeline import FILTER_KEYS, REPAIR_KINDS, filter_key
from corpus_dagster.layout import Layout
from corpus_dagster.ledger import ledger_sha256
from corpus_dagster.publish.manifest import BASE_FILTER_KEYS, build_manifest, manifest_bytes
from corpus_dagster.publish.shards import Annotations, ShardsResult, SourceDocs, build_shards
from corpus_dagster.scrub.api import PII_TYPES
from corpus_dagster.stages.dedup import clusters, dedup_stats
from corpus_dagster.store import stage_files, stage_stats


@dataclass
class PublishResult:
    """Manifest dict and shard stats of one publish."""

    manifest: dict[str, Any]
    shards: ShardsResult


def collect_filters(
    layout: Layout, source_ids: list[str], clean_cfg: dict[str, Any]
) -> tuple[dict[str, int], dict[str, int]]:
    """Filter and repair counts summed over the sources' clean records (which count their rejects tables).

    `filters` holds lang, gopher, repetition and ppl always, plus every further rule that is enabled (or
    that dropped something), in the fixed FILTER_KEYS order.
    """
    filters: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    for sid in source_ids:
        stats = stage_stats(layout, "clean", sid)
        for reason, n in stats.get("reasons", {}).items():
            filters[filter_key(reason)] += n
        repairs.update(stats.get("repairs", {}))
    keys = [k for k in FILTER_KEYS if k in BASE_FILTER_KEYS or clean_cfg.get(k, {}).get("enabled") or filters[k]]
    return {k: filters[k] for k in keys}, {k: repairs[k] for k in REPAIR_KINDS}


def collect_pii(layout: Layout, source_ids: list[str]) -> dict[str, int]:
    """Placeholders the scrub inserted, per type, over all sources."""
    total: Counter[str] = Counter()
    for sid in source_ids:
        total.update(stage_stats(layout, "scrub", sid)["pii"])
    return {t: total[t] for t in PII_TYPES}


def write_publish(layout: Layout, resolved: dict[str, Any], source_ids: list[str], out_dir: Path, workers: int) -> PublishResult:
    """Write shards and _MANIFEST.json of the given sources into out_dir (an empty folder)."""
    sources = [SourceDocs(sid, stage_files(layout, "scrub", sid, "docs")) for sid in source_ids]
    annotations = Annotations(clusters=clusters(layout))
    shards = build_shards(sources, annotations, out_dir, resolved, workers)
    filters, repairs = collect_filters(layout, source_ids, resolved["clean"])
    manifest = build_manifest(
        resolved, shards.shards, filters, repairs, dedup_stats(layout), collect_pii(layout, source_ids),
        ledger_sha256(layout.ledger),
    )
    (out_dir / "_MANIFEST.json").write_bytes(manifest_bytes(manifest))
    return PublishResult(manifest, shards)


def publish(layout: Layout, resolved: dict[str, Any], source_ids: list[str]) -> PublishResult:
    """Publish into corpus/<dataset>/<version>/, replacing it whole and atomically."""
    with atomic_dir(layout.shards) as tmp:
        result = write_publish(layout, resolved, source_ids, tmp, resolved["workers"])
    return result
