"""The publish stage's driver: shards + `_MANIFEST.json` of the sources the last dedup covered, and checks.

The published folder `corpus/<dataset>/<version>/` is replaced whole and atomically. Its record lives
in `stages/publish/` and is keyed by the dedup, scrub and clean keys of every source, the ledger's bytes
(the manifest's `ledger_ref`) and the output config (the manifest's `config_sha256`): an unchanged rerun
writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_dagster.clean.driver import clean_record, filter_and_repair_counts
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_write_bytes
from corpus_dagster.core.checks import CheckReport, report_of
from corpus_dagster.core.config import config_sha256, output_settings
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import ledger_sha256, load_ledger
from corpus_dagster.core.progress import Log, Progress, heartbeat, interval_of
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.dedup.driver import clusters, dedup_record, dedup_sources, dedup_stats
from corpus_dagster.ingest.driver import selection_counts
from corpus_dagster.publish import checks
from corpus_dagster.publish.manifest import build_manifest, manifest_bytes
from corpus_dagster.publish.shards import Annotations, ShardsResult, SourceDocs, build_shards
from corpus_dagster.scrub.driver import pii_counts, scrub_record, scrubbed_files

STAGE = "publish"
CODE_VERSION = "1"
MANIFEST = "_MANIFEST.json"


@dataclass
class PublishResult:
    """Manifest dict and shard stats of one publish; `cached` when nothing had to be written."""

    manifest: dict[str, Any]
    shards: ShardsResult
    sources: list[str]
    cached: bool = False
    key: str = ""
    shards_rewritten: bool = True


def shard_settings(resolved: dict[str, Any]) -> dict[str, Any]:
    """The settings that decide shard bytes (the manifest depends on the whole output config)."""
    return {"shard_rows": resolved["shard_rows"], "val_permille": resolved["val_permille"],
            "publish": output_settings(resolved, "publish")}


def publish_key(layout: Layout, resolved: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the published folder."""
    sids = dedup_sources(layout)
    inputs = {
        "dedup": dedup_record(layout).key,
        "sources": [[sid, clean_record(layout, sid).key, scrub_record(layout, sid).key] for sid in sids],
        "ledger_sha256": ledger_sha256(layout.ledger),
    }
    return stage_key(STAGE, CODE_VERSION, inputs, {"config_sha256": config_sha256(resolved)}), inputs


def write_publish(layout: Layout, resolved: dict[str, Any], out_dir: Path, workers: int) -> PublishResult:
    """Write shards and _MANIFEST.json of the dedup's sources into out_dir (an empty folder)."""
    source_ids = dedup_sources(layout)
    sources = [SourceDocs(sid, scrubbed_files(layout, sid)) for sid in source_ids]
    shards = build_shards(sources, Annotations(clusters=clusters(layout)), out_dir, resolved, workers)
    manifest = manifest_for(layout, resolved, shards.shards, source_ids)
    (out_dir / MANIFEST).write_bytes(manifest_bytes(manifest))
    return PublishResult(manifest, shards, source_ids)


def manifest_for(layout: Layout, resolved: dict[str, Any], shards: list[dict[str, Any]], source_ids: list[str]) -> dict[str, Any]:
    """The manifest of the given shard entries, with counts from the stage records."""
    filters, repairs = filter_and_repair_counts(layout, source_ids, resolved["clean"])
    selected = {s.source_id for s in load_ledger(layout.ledger) if s.where}
    if selected & set(source_ids):  # ledger `where` predicates: records they excluded, as one more filter
        filters["where"] = sum(n for sid, n in selection_counts(layout, source_ids).items() if sid in selected)
    return build_manifest(
        resolved, shards, filters, repairs, dedup_stats(layout), pii_counts(layout, source_ids), ledger_sha256(layout.ledger)
    )


@records.locked(lambda a: "publish")
def run_publish(layout: Layout, resolved: dict[str, Any], log: Log | None = None) -> PublishResult:
    """Publish into corpus/<dataset>/<version>/ (replaced whole and atomically) unless the key is unchanged.

    `log` (a callable taking a line) hears a heartbeat every `progress.interval_s` seconds and a closing line.
    """
    key, inputs = publish_key(layout, resolved)
    folder = layout.stage(STAGE)
    done = records.cached(folder, key)
    if done is not None:
        manifest = read_manifest(layout)
        return PublishResult(manifest, ShardsResult(shards=manifest["shards"], n_docs=manifest["n_docs"]),
                             done.stats["sources"], cached=True, key=key)
    records.begin(folder)
    records.begin(layout.shards.parent)
    shards_key = stage_key(STAGE, CODE_VERSION, inputs, shard_settings(resolved))
    previous = records.read_record(folder)
    if previous and previous.stats.get("shards_key") == shards_key and records.outputs_intact(folder, previous):
        # Only settings outside the shards changed (the manifest's config_sha256): rewrite the manifest alone.
        old = read_manifest(layout)
        manifest = manifest_for(layout, resolved, old["shards"], previous.stats["sources"])
        atomic_write_bytes(layout.manifest, manifest_bytes(manifest))
        result = PublishResult(manifest, ShardsResult(shards=manifest["shards"], n_docs=manifest["n_docs"]),
                               previous.stats["sources"], shards_rewritten=False)
    else:
        with atomic_dir(layout.shards) as tmp, heartbeat(log, "shards", interval_of(resolved)):
            result = write_publish(layout, resolved, tmp, resolved["workers"])
        progress = Progress(log, "shards", interval_s=interval_of(resolved))
        progress.update(result.manifest["n_docs"], sum((layout.shards / s["name"]).stat().st_size for s in result.manifest["shards"]))
        progress.finish()
    names = [s["name"] for s in result.manifest["shards"]] + [MANIFEST]
    records.commit(folder, StageRecord(
        stage=STAGE, key=key, code_version=CODE_VERSION, inputs=inputs, settings={"config_sha256": config_sha256(resolved)},
        output_dir=os.path.relpath(layout.shards, folder), outputs=records.describe_outputs(layout.shards, names),
        files={"shards": names[:-1], "manifest": [MANIFEST]},
        stats={"sources": result.sources, "n_docs": result.manifest["n_docs"], "shards_key": shards_key,
               "seconds": round(result.shards.seconds, 3)},
    ))
    result.key = key
    return result


def read_manifest(layout: Layout) -> dict[str, Any]:
    """The published manifest (UpstreamMissing when nothing was published yet)."""
    if not layout.manifest.exists():
        raise UpstreamMissing(f"no published manifest at {layout.manifest}; materialize shards")
    return json.loads(layout.manifest.read_text(encoding="utf-8"))


def published_shards(layout: Layout) -> list[Path]:
    """The published shard files in order (what later stages read)."""
    return checks.shard_paths(layout.shards)


# --- Checks (each returns a CheckReport; the Dagster layer only translates it) ------------------------------

def check_schema(layout: Layout) -> CheckReport:
    paths = published_shards(layout)
    return report_of(checks.check_schema(paths), shards=len(paths))


def check_manifest(layout: Layout) -> CheckReport:
    return report_of(checks.check_manifest(layout.shards, layout.manifest))


def check_ids_sorted(layout: Layout) -> CheckReport:
    paths = published_shards(layout)
    return report_of(checks.check_ids_sorted(paths), shards=len(paths))


def check_split(layout: Layout, resolved: dict[str, Any]) -> CheckReport:
    return report_of(checks.check_split(published_shards(layout), resolved["val_permille"]))


def check_hashes(layout: Layout) -> CheckReport:
    return report_of(checks.check_hashes(published_shards(layout)))


def check_no_pii(layout: Layout, resolved: dict[str, Any]) -> CheckReport:
    return report_of(checks.check_no_pii(published_shards(layout), resolved["pii"]))


def check_rebuild(layout: Layout, resolved: dict[str, Any]) -> CheckReport:
    """Rebuild with another worker count into a temporary folder and compare bytes.

    With `publish.rebuild_check_shards` = n > 0 the whole plan is recomputed and a seeded sample of n shards
    (seeded by the publish key, so every new build draws anew) is rewritten and compared; 0 rebuilds every
    shard and the manifest (what a scheduled full check runs).
    """
    other_workers = 2 if resolved["workers"] == 1 else 1
    sample = int(resolved["publish"]["rebuild_check_shards"])
    tmp = Path(tempfile.mkdtemp(prefix=".corpus-rebuild-", dir=layout.root))
    try:
        if sample:
            sources = [SourceDocs(sid, scrubbed_files(layout, sid)) for sid in dedup_sources(layout)]
            seed = records.require_record(layout.stage(STAGE), "shards").key
            problems = checks.check_rebuild_sample(sources, Annotations(clusters=clusters(layout)), layout.shards, tmp,
                                                   resolved, other_workers, sample, seed)
        else:
            write_publish(layout, resolved, tmp, other_workers)
            problems = checks.compare_folders(layout.shards, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report_of(problems, rebuild_workers=other_workers, build_workers=resolved["workers"],
                     shards_rebuilt=sample or "all")
