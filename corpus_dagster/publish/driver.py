"""The publish stage's driver: shards + `_MANIFEST.json` of the sources the last dedup covered, and checks.

The published folder `corpus/<dataset>/<version>/` is replaced whole and atomically. Its record lives
in `stages/publish/` and is keyed by the dedup, scrub and clean keys of every source, the ledger's bytes
(the manifest's `ledger_ref`) and the output config (the manifest's `config_sha256`): an unchanged rerun
writes nothing.

Publishing is a unit stage (`core.units.UnitStage`, `PublishStage`), one unit per shard, that any executor
can run: its plan sorts every id, decides the shard boundaries and writes each shard's job into a work
folder `corpus/<dataset>/.<version>.work-<key>/` (`core.work.WorkFolder`) beside the published folder, so
finishing links the shards in on one file system; a unit writes one shard and its manifest entry there; the
finish swaps the shards and the manifest into the published folder and commits the record. `run_publish`
runs the three in one process. The work folder:

    plan.json                the plan, written last (a work folder without it is incomplete and replanned):
                             input files (relative to the artifacts root), sources, units and their shards,
                             writer settings, the size of every job file
    jobs/<unit>.npy          int64 [3, rows]: file index, row index in that file, minhash_cluster
    units/<unit>.parquet     the shard a unit wrote
    units/<unit>.json        its done-marker, written last: its manifest entry (name, sha256, rows), seconds

What a unit does inside the work folder is `publish.units`; the rebuild check's comparison `publish.rebuild`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from corpus_dagster.clean.outputs import clean_record, filter_and_repair_counts
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_write_bytes
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import config_sha256, output_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import ledger_sha256, load_ledger
from corpus_dagster.core.progress import Log, Progress, interval_of
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, commit_outputs
from corpus_dagster.core.units import Plan, UnitStage, run_stage
from corpus_dagster.core.work import WorkFolder, remove_all_work_folders
from corpus_dagster.dedup.outputs import clusters, dedup_record, dedup_sources, dedup_stats
from corpus_dagster.ingest.outputs import selection_counts
from corpus_dagster.publish import checks
from corpus_dagster.publish.manifest import build_manifest, ledger_ref_of, manifest_bytes
from corpus_dagster.publish.outputs import STAGE, published_shards, read_manifest
from corpus_dagster.publish.rebuild import rebuild_problems
from corpus_dagster.publish.shards import Annotations, ShardsResult, SourceDocs, ordered_files, shard_jobs
from corpus_dagster.publish.sources_check import check_sources_in_ledger
from corpus_dagster.publish.units import (
    SHARD,
    PublishUnitError,
    job_files,
    link_or_move,
    shard_entries,
    stored_path,
    write_jobs,
    write_planned_unit,
)
from corpus_dagster.scrub.outputs import pii_counts, scrub_record, scrubbed_files

CODE_VERSION = "2"
PUBLISH = Stage(STAGE, CODE_VERSION)
MANIFEST = "_MANIFEST.json"


@dataclass(frozen=True)
class PublishResult:
    """Manifest dict and shard stats of one publish; `cached` when nothing had to be written,
    `shards_rewritten` false when only the manifest was."""

    manifest: dict[str, Any]
    shards: ShardsResult
    sources: list[str]
    cached: bool = False
    key: str = ""
    shards_rewritten: bool = True


def shard_settings(settings: Settings) -> dict[str, Any]:
    """The settings that decide shard bytes (the manifest depends on the whole output config)."""
    resolved = settings.resolved
    return {"shard_rows": resolved["shard_rows"], "val_permille": resolved["val_permille"],
            "publish": output_settings(resolved, "publish")}


def publish_key(layout: Layout, settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the published folder."""
    sids = dedup_sources(layout)
    inputs = {
        "dedup": dedup_record(layout).key,
        "sources": [[sid, clean_record(layout, sid).key, scrub_record(layout, sid).key] for sid in sids],
        "ledger_ref": ledger_ref_of(layout.ledger, layout.root),  # the manifest names it
        "ledger_sha256": ledger_sha256(layout.ledger),
    }
    return PUBLISH.key(inputs, {"config_sha256": config_sha256(settings.resolved)}), inputs


def manifest_for(layout: Layout, settings: Settings, shards: list[dict[str, Any]], source_ids: list[str]) -> dict[str, Any]:
    """The manifest of the given shard entries, with counts from the stage records."""
    filters, repairs = filter_and_repair_counts(layout, source_ids, settings.clean)
    selected = {s.source_id for s in load_ledger(layout.ledger) if s.where}
    if selected & set(source_ids):  # ledger `where` predicates: records they excluded, as one more filter
        filters["where"] = sum(n for sid, n in selection_counts(layout, source_ids).items() if sid in selected)
    return build_manifest(
        settings, shards, filters, repairs, dedup_stats(layout), pii_counts(layout, source_ids),
        ledger_ref_of(layout.ledger, layout.root), ledger_sha256(layout.ledger),
    )


# --- The work folder of one publish key ----------------------------------------------------------------------

def work_folder(layout: Layout, key: str) -> WorkFolder:
    """`corpus/<dataset>/.<version>.work-<key>/`: the plan and unit outputs of one publish key, beside the
    published folder."""
    return WorkFolder(layout.shards.parent, key, "shards", "shards_plan (or run_publish)", "shards_write",
                      prefix=_work_prefix(layout), error=PublishUnitError)


def _work_prefix(layout: Layout) -> str:
    return f".{layout.version}.work-"


def write_plan(layout: Layout, settings: Settings, work: WorkFolder, shards_key: str,
               heal: bool = False) -> dict[str, Any]:
    """Plan every shard (global id order, clusters, boundaries) and write the jobs and plan.json into `work`.

    Memory ~ the ids of the corpus (the plan), as before the split into units; plan.json is written last.
    The scrub and dedup outputs it reads are checked against their records; with `heal` (the stage's own
    plan, not a check) a damaged one is rebuilt first by its stage.
    """
    start = time.monotonic()
    source_ids = dedup_sources(layout)
    upstream = settings if heal else None
    sources = [SourceDocs(sid, scrubbed_files(layout, sid, upstream)) for sid in source_ids]
    files = ordered_files(sources)
    jobs = shard_jobs(sources, Annotations(clusters=clusters(layout, upstream)), Path(), settings)
    planned = write_jobs(work, jobs)
    pub = settings.publish
    plan = {
        "shards_key": shards_key, "sources": source_ids,
        "files": [stored_path(layout.root, f) for f in files],
        "units": planned, "n_docs": sum(u["rows"] for u in planned),
        "val_permille": settings.val_permille, "row_group_max_bytes": pub.row_group_max_bytes,
        "zstd_level": pub.zstd_level, "seconds": round(time.monotonic() - start, 3),
    }
    return work.write_plan(plan, files=job_files(planned))


# --- The three entries of the stage (plan, unit, finish) and the one-process run ----------------------------

def manifest_only(layout: Layout, settings: Settings, inputs: dict[str, Any]) -> tuple[str, StageRecord | None]:
    """(shards_key, the previous record when only the manifest needs rewriting, else None).

    When the shard-deciding inputs and settings are unchanged and the published shards intact, only
    settings outside the shards changed (the manifest's config_sha256).
    """
    folder = layout.stage(STAGE)
    shards_key = PUBLISH.key(inputs, shard_settings(settings))
    previous = records.read_record(folder)
    if previous and previous.stats.get("shards_key") == shards_key and records.outputs_intact(folder, previous):
        return shards_key, previous
    return shards_key, None


class PublishStage(UnitStage[PublishResult]):
    """The published folder as a unit stage: plan (every shard's rows), one unit per shard, finish."""

    name: ClassVar[str] = "shards"
    lock: ClassVar[str] = "publish"
    phases: ClassVar[tuple[str, ...]] = ("write",)

    def folder(self, layout: Layout) -> Path:
        return layout.stage(STAGE)

    def key(self, layout: Layout, settings: Settings) -> str:
        return publish_key(layout, settings)[0]

    def plan(self, layout: Layout, settings: Settings, key: str, log: Log | None) -> Plan:
        """Only the manifest to rewrite: no units. Otherwise one unit per shard; a complete plan of this key
        already on disk is kept with its finished units (resume), work folders of other keys are removed."""
        _key, inputs = publish_key(layout, settings)
        records.begin(self.folder(layout))
        records.begin(layout.shards.parent)  # temps of a killed plan or finish; never a work folder's content
        shards_key, previous = manifest_only(layout, settings, inputs)
        if previous is not None:
            remove_all_work_folders(layout.shards.parent, _work_prefix(layout))
            return Plan(key, (), info={"manifest_only": True})
        work = work_folder(layout, key)
        plan = work.start()  # a complete plan of this key is kept with its finished units; else planned afresh
        if plan is None:
            plan = write_plan(layout, settings, work, shards_key, heal=True)
        units = tuple(u["unit"] for u in plan["units"])
        if log is not None:
            finished = len(units) - len(work.pending(units))
            log(f"shards: {plan['n_docs']:,} documents planned into {len(plan['units'])} shards"
                + (f", {finished} already written" if finished else ""))
        return Plan(key, units, info={"work": str(work.path), "n_docs": plan["n_docs"]})

    def run_unit(self, layout: Layout, settings: Settings, key: str, unit: str) -> None:
        """Write one shard of the plan of `key` (and its manifest entry) into the work folder; idempotent.
        Units of one plan write different files, each atomically, and the finish checks them."""
        write_planned_unit(layout.root, work_folder(layout, key), unit)

    def finish(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> PublishResult:
        """Publish what the plan decided: a rewritten manifest, or the units' shards swapped into the
        published folder whole; commit the record and remove the work folder."""
        return _finish(layout, settings, plan.key, log)

    def reuse(self, layout: Layout, settings: Settings, key: str, record: StageRecord) -> PublishResult:
        remove_all_work_folders(layout.shards.parent, _work_prefix(layout))
        manifest = read_manifest(layout)
        return PublishResult(manifest, ShardsResult(shards=manifest["shards"], n_docs=manifest["n_docs"],
                                                    seconds=float(record.stats.get("seconds", 0.0))),
                             record.stats["sources"], cached=True, key=key)


PUBLISH_UNITS = PublishStage()


def _finish(layout: Layout, settings: Settings, key: str, log: Log | None) -> PublishResult:
    current, inputs = publish_key(layout, settings)
    if current != key:
        raise PublishUnitError(
            f"the publish inputs or settings changed since the shards plan planned key {key} (now {current}); "
            f"run shards_plan again (or run_publish), then its units and shards_finish"
        )
    shards_key, previous = manifest_only(layout, settings, inputs)
    if previous is not None:
        # Only settings outside the shards changed (the manifest's config_sha256): rewrite the manifest alone.
        old = read_manifest(layout)
        manifest = manifest_for(layout, settings, old["shards"], previous.stats["sources"])
        atomic_write_bytes(layout.manifest, manifest_bytes(manifest))
        result = PublishResult(manifest, ShardsResult(shards=manifest["shards"], n_docs=manifest["n_docs"]),
                               previous.stats["sources"], shards_rewritten=False, key=key)
        names = [s["name"] for s in manifest["shards"]] + [MANIFEST]
        commit_publish(layout, settings, result, inputs, shards_key, records.describe_outputs(layout.shards, names))
        remove_all_work_folders(layout.shards.parent, _work_prefix(layout))
        return result
    work = work_folder(layout, key)
    plan = work.read_plan()
    units = [u["unit"] for u in plan["units"]]
    entries = work.require_done(units, verify=False)  # sizes here; the sha256 once, below, as the record needs it
    shards = shard_entries(entries)
    manifest = manifest_for(layout, settings, shards, plan["sources"])
    names = [s["name"] for s in shards] + [MANIFEST]
    with atomic_dir(layout.shards) as tmp:
        for unit, s in zip(units, shards, strict=True):
            link_or_move(work.unit_path(unit, SHARD), tmp / s["name"])
        (tmp / MANIFEST).write_bytes(manifest_bytes(manifest))
        outputs = records.describe_outputs(tmp, names)  # the hashes the record keeps, and a check of the units
        damaged = [u for u, s in zip(units, shards, strict=True) if outputs[s["name"]]["sha256"] != s["sha256"]]
        if damaged:  # their done-markers no longer match: the next plan lists them and their units redo them
            raise PublishUnitError(
                f"{len(damaged)} shard(s) in {work.units_dir} changed since their unit wrote them "
                f"({', '.join(damaged[:5])}: sha256 differs from the unit's done-marker); run those units again "
                f"(shards_write, or run_publish), then shards_finish"
            )
    # rounded as the record keeps it, so this build and a later reuse of it report the same figure
    seconds = round(plan["seconds"] + sum(e.get("seconds", 0.0) for e in entries), 3)
    result = PublishResult(manifest, ShardsResult(shards=shards, n_docs=plan["n_docs"], seconds=seconds), plan["sources"], key=key)
    commit_publish(layout, settings, result, inputs, shards_key, outputs)
    # this key's, and any a unit of an older plan recreated after that plan was removed
    remove_all_work_folders(layout.shards.parent, _work_prefix(layout))
    progress = Progress(log, "shards", interval_s=interval_of(settings.resolved))
    progress.update(manifest["n_docs"], sum(outputs[s["name"]]["bytes"] for s in shards))
    progress.finish()
    return result


def commit_publish(layout: Layout, settings: Settings, result: PublishResult, inputs: dict[str, Any],
                   shards_key: str, outputs: dict[str, dict[str, Any]]) -> None:
    """Write the publish record of a published folder whose files are described by `outputs`."""
    folder = layout.stage(STAGE)
    names = list(outputs)
    stats = {"sources": result.sources, "n_docs": result.manifest["n_docs"], "shards_key": shards_key,
             "seconds": round(result.shards.seconds, 3)}
    commit_outputs(folder, PUBLISH, result.key, inputs, {"config_sha256": config_sha256(settings.resolved)},
                   Outputs(names, files={"shards": names[:-1], "manifest": [MANIFEST]}, stats=stats),
                   output_dir=os.path.relpath(layout.shards, folder), described=outputs)


def run_publish(layout: Layout, settings: Settings, log: Log | None = None) -> PublishResult:
    """Publish into corpus/<dataset>/<version>/ (replaced whole and atomically) unless the key is unchanged:
    plan, every unit through a pool of `workers` processes, finish.

    `log` (a callable taking a line) hears a heartbeat every `progress.interval_s` seconds and a closing line.
    """
    return run_stage(PUBLISH_UNITS, layout, settings, log)


# --- Checks (each returns a CheckReport; the Dagster layer only translates it) ------------------------------

def check_no_pii(layout: Layout, settings: Settings) -> CheckReport:
    """Every published text is the scrub's output byte for byte (all documents, by sha256), and no PII
    detector fires on a seeded sample of `publish.pii_check_docs` documents within `publish.pii_check_chars`
    characters (seeded by the publish key, so each new build scans others; 0 scans every document, what a
    scheduled full check runs)."""
    paths = published_shards(layout)
    scrubbed = [p for sid in dedup_sources(layout) for p in scrubbed_files(layout, sid)]
    sample, budget = int(settings.publish.pii_check_docs), int(settings.publish.pii_check_chars)
    seed = records.require_record(layout.stage(STAGE), "shards").key
    text = checks.check_published_text_scrubbed(paths, scrubbed)
    pii = checks.check_no_pii(paths, settings.pii, sample, seed, budget)
    return CheckReport(metadata=pii.metadata).extend(text.problems + pii.problems)


def check_rebuild(layout: Layout, settings: Settings) -> CheckReport:
    """Rebuild with another worker count into a temporary folder and compare bytes.

    The whole plan (every id sorted across sources, clusters, shard boundaries) is recomputed into a temporary
    work folder, so which documents each shard holds is checked for every shard; then the same unit function
    a build runs writes shards again, through a pool of the other worker count. With
    `publish.rebuild_check_shards` = n > 0 a seeded sample of n shards (seeded by the publish key, so every
    new build draws anew) is rewritten and compared; 0 rebuilds every shard and the manifest (what a
    scheduled full check runs).
    """
    other_workers = 2 if settings.workers == 1 else 1
    sample = int(settings.publish.rebuild_check_shards)
    seed = records.require_record(layout.stage(STAGE), "shards").key
    tmp = Path(tempfile.mkdtemp(prefix=".corpus-rebuild-", dir=layout.root))
    try:
        work = WorkFolder(tmp, seed, "shards rebuild check", "check_rebuild", "write_planned_unit", error=PublishUnitError)
        work.path.mkdir()
        plan = write_plan(layout, settings, work, "")
        problems = rebuild_problems(layout.shards, layout.root, plan, work, sample, seed, other_workers,
                                    lambda shards: manifest_for(layout, settings, shards, plan["sources"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_shards = len(plan["units"])
    rebuilt = n_shards if sample <= 0 else min(sample, n_shards)  # what sample_units draws: at most every shard
    return CheckReport(metadata={"rebuild_workers": other_workers, "build_workers": settings.workers,
                                 "shards_rebuilt": rebuilt, "shards_total": n_shards,
                                 "manifest_rebuilt": sample <= 0}).extend(problems)


CHECKS: dict[str, Callable[[Layout, Settings], CheckReport]] = {
    "shard_schema": lambda layout, _: checks.check_schema(published_shards(layout)),
    "manifest_consistent": lambda layout, _: checks.check_manifest(layout.shards, layout.manifest),
    "ids_sorted": lambda layout, _: checks.check_ids_sorted(published_shards(layout)),
    "split_matches_sha256": lambda layout, s: checks.check_split(published_shards(layout), s.val_permille),
    "hashes_match_text": lambda layout, _: checks.check_hashes(published_shards(layout)),
    "no_pii_in_shards": check_no_pii,
    "sources_in_ledger": lambda layout, _: check_sources_in_ledger(layout, published_shards(layout)),
    "deterministic_rebuild": check_rebuild,
}


def publish_check(layout: Layout, settings: Settings, name: str) -> CheckReport:
    """One blocking check of the published folder (a name of CHECKS, the asset check's name), computed alone."""
    return CHECKS[name](layout, settings)


def check_scope(layout: Layout) -> dict[str, Any]:
    """What every published-folder check covers, from the manifest: the first shard names, files, rows, bytes."""
    m = read_manifest(layout)
    n_bytes = sum((layout.shards / s["name"]).stat().st_size for s in m["shards"])
    return {"checked": ", ".join(s["name"] for s in m["shards"][:3]) + (" ..." if m["n_shards"] > 3 else ""),
            "files_checked": m["n_shards"], "rows_checked": m["n_docs"], "bytes_checked": n_bytes}
