"""The release stage's entry points: its key, its run under that key, its checks, and the readers other
code uses (the release's name, the build's arguments, the corpus build the card tells of).

The build itself is `release.build` (inputs in `release.inputs`, units in `release.units`), the blocking
checks are `release.checks`, the reproducibility checks `release.rebuild`.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.outputs import clean_doc_files, clean_record, document_keys
from corpus_dagster.core import records
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.documents import INFO_DOC_ID, INFO_FETCHED_AT
from corpus_dagster.core.errors import CorpusError, ReleaseError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.progress import Log
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.dedup.outputs import dedup_sources
from corpus_dagster.ingest import outputs as ingest_outputs
from corpus_dagster.publish.outputs import read_manifest, verified_shards
from corpus_dagster.release.build import build_release
from corpus_dagster.release.card_info import construction_step
from corpus_dagster.release.checks import check_metadata, check_no_machine_paths, check_release
from corpus_dagster.release.created import CREATED_NAME, parse_date, read_created
from corpus_dagster.release.ids import fixed_prefix
from corpus_dagster.release.inputs import INFO_CLEANED, INFO_COLUMNS, INFO_ROW_KEY
from corpus_dagster.release.outputs import STAGE, release_name
from corpus_dagster.release.rebuild import check_rebuild_sample
from corpus_dagster.tokenize.outputs import token_counts_file

CODE_VERSION = "6"  # bump when a change here changes the release's bytes (parts, card, figures, _RELEASE.json)
RELEASE = Stage(STAGE, CODE_VERSION)

UNITS_NAME = "units.jsonl"  # the build's units, in the release stage's key folder
# The stages of a corpus build before the release, in the order they run; per-source ones have a row per source
BUILD_STAGES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokens", "analysis")
PER_SOURCE = {"ingest", "clean", "minhash", "scrub"}


def _document_info(layout: Layout, sources: list[Any]) -> list[pa.Table]:
    """Per source: ingest's document info (`_doc_id`, `_fetched_at`, kept ledger fields) with the repairs
    clean applied (`_cleaned`) and the stable key (`_row_key`), one row per clean document, for `metadata`."""
    tables = []
    for source in sources:
        sid = source.source_id
        files = clean_doc_files(layout, sid)
        if not files:  # a source whose fetch found no documents: nothing to describe
            continue
        info = pl.from_arrow(ingest_outputs.document_info(layout, sid))
        repairs = pl.concat([pl.from_arrow(pq.read_table(p, columns=["id", "repairs"])) for p in files])
        keys = pl.from_arrow(document_keys(layout, source))
        clean = repairs.join(keys, on="id", how="left", maintain_order="left").select(
            pl.col("id").alias(INFO_DOC_ID), pl.col("repairs").alias(INFO_CLEANED), pl.col("key").alias(INFO_ROW_KEY))
        tables.append(clean.join(info, on=INFO_DOC_ID, how="left", maintain_order="left").to_arrow())
    return tables


def _stage_runs(layout: Layout, source_ids: list[str]) -> list[tuple[str, str | None, StageRecord]]:
    """The completed stage records of the build, in BUILD_STAGES order; the analysis only when it analysed
    the published shards (it runs beside the release, not before it)."""
    runs: list[tuple[str, str | None, StageRecord]] = []
    shards = [[e["name"], e["sha256"]] for e in read_manifest(layout)["shards"]]
    for stage in BUILD_STAGES:
        for sid in source_ids if stage in PER_SOURCE else [None]:
            folder = layout.raw_source(sid) if stage == "ingest" and sid else layout.stage(stage, sid)
            record = records.read_record(folder)
            if record is None or (stage == "analysis" and (record.inputs or {}).get("shards") != shards):
                continue
            runs.append((stage, sid, record))
    return runs


def build_info(layout: Layout, settings: Settings) -> dict[str, Any]:
    """What the card tells of the whole build, from the stage records and the manifest (see card_build_info):
    documents fetched, the stage runs, code versions, the release path (relative). No stage key: after ingest
    they follow the fetch time, and the card of a refetch of the same bytes must not change."""
    source_ids = dedup_sources(layout)
    manifest = read_manifest(layout)
    runs = _stage_runs(layout, source_ids)
    versions = {stage: rec.code_version for stage, _, rec in runs} | {STAGE: CODE_VERSION}
    release_dir = layout.release(release_name(settings))
    return {
        "fetched": sum(int(rec.stats.get("docs", 0)) for stage, _, rec in runs if stage == "ingest"),
        "steps": [construction_step(stage, sid, rec, manifest, settings) for stage, sid, rec in runs],
        "code_versions": versions,
        "release_path": release_dir.relative_to(layout.root).as_posix(),
        "ledger_sha256": sha256_file(layout.ledger) if layout.ledger.is_file() else "",
    }


def release_kwargs(layout: Layout, settings: Settings) -> dict[str, Any]:
    """The keyword arguments of `build_release` for the published corpus (also what the rebuild check reuses)."""
    source_ids = dedup_sources(layout)
    ledger = {s.source_id: s for s in load_ledger(layout.ledger)}
    missing = [sid for sid in source_ids if sid not in ledger]
    if missing:
        raise ReleaseError(f"sources {missing} are published but no longer in the ledger {layout.ledger}; rebuild the corpus")
    try:
        counts: Path | None = token_counts_file(layout)
    except CorpusError:
        counts = None
    return {
        "shards_dir": layout.shards,
        "out_dir": layout.release(release_name(settings)),
        "settings": settings.release,
        "tokenize_cfg": settings.tokenize,
        "sources": [ledger[sid] for sid in source_ids],
        "token_counts": counts,
        "doc_info": _document_info(layout, [ledger[sid] for sid in source_ids]),
        "selection_excluded": ingest_outputs.selection_counts(layout, source_ids),
        "workers": settings.workers,
        "build": build_info(layout, settings),
        "created_at_file": created_at_file(layout, settings),
        "reproduce_settings": settings,
    }


def created_at_file(layout: Layout, settings: Settings) -> Path:
    """release/<name>/_CREATED_AT.parquet: the created_at given to each content hash, kept across builds and
    versions of the release (release.created)."""
    return layout.root / "release" / release_name(settings) / CREATED_NAME


def release_key(layout: Layout, settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, inputs): the published manifest, token counts, ledger facts, ingest and clean keys, the keys of the
    stage runs the card names (its Construction section), release settings."""
    source_ids = dedup_sources(layout)
    ledger = {s.source_id: s.to_json() for s in load_ledger(layout.ledger)}
    try:
        counts = sha256_file(token_counts_file(layout))
    except CorpusError:
        counts = None
    inputs = {
        "manifest_sha256": sha256_file(layout.manifest),
        "token_counts_sha256": counts,
        "sources": [[sid, ledger.get(sid), ingest_outputs.raw_parts(layout, sid)[2].key, clean_record(layout, sid).key]
                    for sid in source_ids],
        "stages": [[stage, sid, rec.key] for stage, sid, rec in _stage_runs(layout, source_ids)],
    }
    plain = settings.resolved
    key_settings = {"release": output_settings(plain, "release"), "tokenize": output_settings(plain, "tokenize")}
    return RELEASE.key(inputs, key_settings), inputs


def units_path(layout: Layout, key: str) -> Path:
    """Where the build under `key` records its units (the stage's key folder)."""
    return layout.stage(STAGE) / key / UNITS_NAME


@records.locked(lambda a: "release")
def run_release_stage(layout: Layout, settings: Settings,
                      log: Log | None = None) -> dict[str, Any]:
    """Build the release folder unless its key is unchanged; returns build_release's stats plus cached and key,
    or `{"enabled": False}` when `release.enabled` is false (nothing is built or read).

    The record lives in the stage folder, the release folder it describes is published beside the corpus
    (output_dir points there); a cached run also needs the build's units, which the rebuild check reads."""
    if not settings.release.enabled:
        if log:
            log("release.enabled is false: nothing built")
        return {"enabled": False}
    key, inputs = release_key(layout, settings)
    folder = layout.stage(STAGE)
    out = layout.release(release_name(settings))

    def compute(key: str) -> Outputs:
        verified_shards(layout)  # the shards build_release reads, checked against the publish record
        kwargs = release_kwargs(layout, settings)
        stats = build_release(**kwargs, units_file=units_path(layout, key))
        names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        if log:
            log(f"release {out.name}: {stats.get('docs', 0)} documents, {stats.get('segments', 0)} segments, "
                f"{stats.get('tokens', 0)} tokens in {len(names)} files")
        return Outputs(names, {"release": names}, json.loads(json.dumps(stats, default=str)))

    return run_cached(folder, RELEASE, inputs, output_settings(settings.resolved, "release"), compute, key=key,
                      clear=[out.parent], output_dir=os.path.relpath(out, folder),
                      needs=[units_path(layout, key)]).summary()


def release_check(layout: Layout, settings: Settings, name: str) -> CheckReport:
    """One blocking check of the built release (a name of checks.RELEASE_CHECKS, or of LAYOUT_CHECKS: those
    read the build it came from too), computed alone."""
    if name in LAYOUT_CHECKS:
        return release_layout_check(layout, settings, name)
    return check_release(layout.release(release_name(settings)), settings.release, [name])[name]


def _release_rows(folder: Path) -> pl.DataFrame:
    """file, doc_id, created_at, the sha256 of the row's content and the parsed metadata of every row of a
    written release."""
    files, doc_ids, created, hashes, metas = [], [], [], [], []
    for path in sorted((folder / "data").glob("*/*.parquet")):
        t = pq.read_table(path, columns=["created_at", "metadata", "content"])
        rows = [json.loads(m) for m in t["metadata"].to_pylist()]
        files += [path.relative_to(folder).as_posix()] * t.num_rows
        doc_ids += [m.get("doc_id") for m in rows]
        created += t["created_at"].to_pylist()
        hashes += [hashlib.sha256(c.encode("utf-8")).digest() for c in t["content"].to_pylist()]
        metas += rows
    return pl.DataFrame({"file": files, "doc_id": doc_ids, "created_at": created, "content_sha256": hashes,
                         "metadata": pl.Series(metas, dtype=pl.Object)},
                        schema_overrides={"file": pl.String, "doc_id": pl.String, "created_at": pl.Datetime("us", "UTC"),
                                          "content_sha256": pl.Binary})


def _fallback(settings: Settings) -> datetime:
    return datetime.fromisoformat(settings.release.created_at_fallback.replace("Z", "+00:00")).astimezone(UTC)


def expected_metadata(layout: Layout, settings: Settings) -> pl.DataFrame:
    """Per published source's clean document: doc_id, created_at (its `date_field` value, else its fetch time,
    else the configured fallback: the date a content new to the release takes), cleaned (the repairs) and kept (its non-null kept fields), read from the ingest and clean tables
    themselves, never from the release's plan."""
    ledger = {s.source_id: s for s in load_ledger(layout.ledger)}
    sources = [ledger[sid] for sid in dedup_sources(layout) if sid in ledger]
    fallback = _fallback(settings)
    doc_ids, created, cleaned, kept = [], [], [], []
    for source in sources:
        tables = _document_info(layout, [source])
        if not tables:
            continue
        table = tables[0]
        fields = [c for c in table.column_names if c not in INFO_COLUMNS]
        values = {c: table.column(c).to_pylist() for c in fields}
        doc_ids += table.column(INFO_DOC_ID).to_pylist()
        fetched = [datetime.fromisoformat(t.replace("Z", "+00:00")).astimezone(UTC) if t else fallback
                   for t in table.column(INFO_FETCHED_AT).to_pylist()]
        dates = values.get(source.date_field) if getattr(source, "date_field", None) else None
        created += [(parse_date(dates[i]) if dates is not None and dates[i] is not None else None) or at
                    for i, at in enumerate(fetched)]
        cleaned += table.column(INFO_CLEANED).to_pylist()
        kept += [{c: values[c][i] for c in fields if values[c][i] is not None} for i in range(table.num_rows)]
    return pl.DataFrame({"doc_id": doc_ids, "created_at": created, "cleaned": pl.Series(cleaned, dtype=pl.Object),
                         "kept": pl.Series(kept, dtype=pl.Object)},
                        schema_overrides={"doc_id": pl.String, "created_at": pl.Datetime("us", "UTC")})


def machine_paths(layout: Layout, settings: Settings) -> list[str]:
    """The build machine's folders a release must never name: the artifacts root, the ledger's folder, the
    local sources' fixed folders and local tokenizer files (as given and resolved), the home folder."""
    paths = [layout.root, layout.ledger.parent, Path.home()]
    for source in load_ledger(layout.ledger):
        for url in source.urls:
            local = ingest_outputs.normalize_url(url)
            if local.startswith("file://"):
                paths.append(Path(fixed_prefix(local)[len("file://"):] or "/"))
    release_tok = settings.release.tokenizer
    paths += [Path(p) for p in (settings.tokenize.path, release_tok.path if release_tok is not None else None) if p]
    out = set()
    for p in paths:
        out.add(str(p))
        try:
            out.add(str(Path(p).resolve()))
        except OSError:
            pass
    return sorted(out)


def release_layout_check(layout: Layout, settings: Settings, name: str) -> CheckReport:
    """One blocking check of the built release against the build it came from (LAYOUT_CHECKS): `metadata`
    (every row's created_at, cleaned and kept fields equal the ingest and clean tables) or `no_machine_paths`."""
    folder = layout.release(release_name(settings))
    if name == "metadata_matches_ingest":
        kept = read_created(created_at_file(layout, settings))
        return check_metadata(_release_rows(folder), expected_metadata(layout, settings), kept,
                              fallback=_fallback(settings))
    if name == "no_machine_paths":
        return check_no_machine_paths(folder, machine_paths(layout, settings))
    raise ValueError(f"unknown release check {name!r}; known: {list(LAYOUT_CHECKS)}")


LAYOUT_CHECKS = ("metadata_matches_ingest", "no_machine_paths")


def release_rebuild_check(layout: Layout, settings: Settings) -> CheckReport:
    """Rebuild with another worker count and compare bytes: a seeded sample of units and output files, the
    plan, README.md and _RELEASE.json (`release.rebuild_check_units`, seeded by the stage key), or with 0
    everything into a temp folder (see rebuild.check_rebuild_sample)."""
    kwargs = release_kwargs(layout, settings)
    other = 2 if settings.workers == 1 else 1
    sample = int(settings.release.rebuild_check_units)
    record = records.require_record(layout.stage(STAGE), STAGE)
    units = record.stats.get("units") or {}
    report = check_rebuild_sample(kwargs["out_dir"], kwargs, other, units_path(layout, record.key),
                                  units.get("sha256"), sample, record.key)
    report.metadata["rebuild_workers"] = other
    return report

