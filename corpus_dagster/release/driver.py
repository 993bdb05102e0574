"""The release stage's only reader and writer: published shards -> release/<name>/<version>/.

Steps (each timed in the returned stats):
1. read: small columns of every shard (ids, sources, hashes, urls), token counts, per-document extras;
2. tokenize: documents without a reusable count (only when the token streams' tokenizer differs);
3. segment: documents over max_tokens, per shard in worker processes;
4. plan: buckets, exact duplicates, caps, shuffle, parts (ids and lengths only);
5. scatter: each shard's selected texts once into a spill file with one record batch per part;
6. write: each part from its spill batches (a worker holds one part);
7. card: statistics, figures, README.md, _RELEASE.json.
The folder appears whole (temp folder, then rename). Output bytes depend on the seed and the inputs only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_write_bytes
from corpus_dagster.core.checks import CheckReport, sample_units
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import CorpusError, ReleaseError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.dedup.driver import dedup_sources
from corpus_dagster.ingest import driver as ingest_driver
from corpus_dagster.ingest.files import normalize_url
from corpus_dagster.publish.driver import read_manifest, verified_shards
from corpus_dagster.release import card as card_mod
from corpus_dagster.release import checks
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.ids import release_id, row_ids
from corpus_dagster.release.jobs import (
    SEGMENT_SCHEMA,
    count_job,
    scatter_job,
    segment_job,
    shard_texts,
    tokenizer,
    write_job,
)
from corpus_dagster.release.plan import parts_of, plan_release, room_by_source, summary_frame
from corpus_dagster.release.rows import length_column
from corpus_dagster.release.stats import data_stats
from corpus_dagster.tokenize.driver import token_counts_file

STATS_NAME = "_RELEASE.json"
MANIFEST_NAME = "_MANIFEST.json"
TOKENS_MANIFEST_NAME = "_TOKENS.json"
SHARD_COLUMNS = ["id", "source_id", "url", "license_spdx", "lang", "n_chars", "sha256"]
# doc_info columns with a fixed meaning; any other column is a kept source field (into metadata)
INFO_COLUMNS = ("id", "fetched_at", "repairs", "cleaned", "source_file")
UNITS_NAME = "units.jsonl"  # the build's units, in the release stage's key folder
# Documents with work (a token count to compute, segments to cut) per unit of the sampled rebuild check
UNIT_DOCS = 8



# ---------------------------------------------------------------- tokenizer


def release_tokenizer_cfg(settings: Mapping[str, Any], tokenize_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The tokenize section with the release's tokenizer overrides (non-null keys) applied."""
    cfg = dict(tokenize_cfg)
    for key, value in (settings.get("tokenizer") or {}).items():
        if value is not None:
            cfg[key] = value
    return cfg


# ---------------------------------------------------------------- inputs


def _read_manifest(shards_dir: Path) -> dict[str, Any]:
    path = shards_dir / MANIFEST_NAME
    if not path.is_file():
        raise ReleaseError(f"{path}: shard manifest not found; materialize the shards (publish) first")
    return json.loads(path.read_text(encoding="utf-8"))


def _read_docs(shards_dir: Path, manifest: Mapping[str, Any]) -> tuple[pl.DataFrame, list[Path]]:
    paths = [shards_dir / s["name"] for s in manifest["shards"]]
    frames = []
    for i, path in enumerate(paths):
        if not path.is_file():
            raise ReleaseError(f"{path}: shard listed in {MANIFEST_NAME} is missing; rebuild the shards")
        names = pq.read_schema(path).names
        cols = SHARD_COLUMNS + (["fetched_at"] if "fetched_at" in names else [])
        f = pl.from_arrow(pq.read_table(path, columns=cols))
        frames.append(
            f.with_columns(
                pl.lit(i, dtype=pl.Int32).alias("shard"), pl.int_range(pl.len(), dtype=pl.Int32).alias("shard_row")
            )
        )
    docs = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return docs, paths


def reusable_counts(token_counts: Path | None, tok: Any) -> tuple[pl.DataFrame | None, str]:
    """(id, n_tokens without special tokens) from the token streams when their tokenizer is the release's.

    The streams count EOD (and BOS when configured) per document; those framing tokens are subtracted.
    Returns (None, reason) when the counts cannot be reused.
    """
    if token_counts is None:
        return None, "no token counts given"
    token_counts = Path(token_counts)
    man_path = token_counts.parent / TOKENS_MANIFEST_NAME
    if not token_counts.is_file() or not man_path.is_file():
        return None, f"{token_counts} or its {TOKENS_MANIFEST_NAME} not found"
    tman = json.loads(man_path.read_text(encoding="utf-8"))["tokenizer"]
    if tman["name"] != tok.name or tman["vocab_sha256"] != tok.vocab_sha256():
        return None, f"token streams use tokenizer {tman['name']!r}, the release uses {tok.name!r}"
    framing = 1 + (tman["special_tokens"].get("bos") is not None)
    t = pl.from_arrow(pq.read_table(token_counts, columns=["id", "n_tokens"]))
    return t.with_columns((pl.col("n_tokens") - framing).cast(pl.Int32)), "reused"


def _doc_info(doc_info: Sequence[Path | str | pa.Table]) -> list[pl.DataFrame]:
    """Per-document extras grouped by column set (tables of one shape are stacked, shapes are joined)."""
    groups: dict[tuple[str, ...], list[pl.DataFrame]] = {}
    for item in doc_info:
        table = item if isinstance(item, pa.Table) else pq.read_table(item)
        if "id" not in table.column_names:
            raise ReleaseError(f"doc_info table {item if not isinstance(item, pa.Table) else '(table)'} has no `id` column")
        f = pl.from_arrow(table)
        if "fetched_at" in f.columns and f.schema["fetched_at"] == pl.String:
            f = f.with_columns(pl.col("fetched_at").str.to_datetime(time_unit="us", time_zone="UTC"))
        if "fetched_at" in f.columns:
            f = f.with_columns(pl.col("fetched_at").dt.cast_time_unit("us").dt.convert_time_zone("UTC"))
        if "repairs" in f.columns:
            f = f.rename({"repairs": "cleaned"})
        groups.setdefault(tuple(f.columns), []).append(f)
    return [pl.concat(g, how="vertical_relaxed").unique("id", keep="first", maintain_order=True) for g in groups.values()]


def _source_facts(sources: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Ledger facts by source id from Source objects or ledger row dicts."""
    out = {}
    for s in sources:
        get = s.get if isinstance(s, Mapping) else lambda k, d=None, s=s: getattr(s, k, d)
        out[get("source_id")] = {
            "hub_dataset": get("hub_dataset"),
            "category": get("category"),
            "license_spdx": get("license_spdx"),
            "url_field": get("url_field"),
            # how release ids name a source row (ids.row_ids): URLs normalized as ingest does
            "format": get("format"),
            "urls": [normalize_url(u) for u in get("urls") or ()],
            "id_field": get("id_field"),
        }
    return out


# ---------------------------------------------------------------- build
#
# A build and its sampled rebuild check run the same phases: inputs, units (runs of documents whose token
# count the release computes or which it segments), plan, scatter and write, record and card.


@dataclass
class _Inputs:
    manifest: dict[str, Any]
    cfg: dict[str, Any]
    tok: Any
    facts: dict[str, dict[str, Any]]
    docs: pl.DataFrame  # one row per published document; n_tokens null where no count is reusable
    paths: list[Path]
    counts_note: str
    buckets: Buckets
    info: list[pl.DataFrame]  # per-document extras (doc_info), grouped by column set


def _inputs(shards_dir: Path, settings: Mapping[str, Any], tokenize_cfg: Mapping[str, Any], sources: Sequence[Any],
            token_counts: str | Path | None, doc_info: Sequence[str | Path | pa.Table] = ()) -> _Inputs:
    buckets = Buckets.from_settings(settings)
    manifest = _read_manifest(shards_dir)
    cfg = release_tokenizer_cfg(settings, tokenize_cfg)
    tok = tokenizer(cfg)
    facts = _source_facts(sources)
    docs, paths = _read_docs(shards_dir, manifest)
    if docs.height == 0:
        raise ReleaseError(f"{shards_dir}: the shards hold no documents; nothing to release")
    unknown = sorted(set(docs["source_id"].unique().to_list()) - set(facts))
    if unknown:
        raise ReleaseError(f"{shards_dir}: sources {unknown} are in the shards but not in the ledger rows given")
    info = _doc_info(doc_info)
    docs = _with_row_ids(docs, facts, info)
    counts, counts_note = reusable_counts(Path(token_counts) if token_counts else None, tok)
    if counts is not None:
        docs = docs.join(counts, on="id", how="left")
    else:
        docs = docs.with_columns(pl.lit(None, dtype=pl.Int32).alias("n_tokens"))
    return _Inputs(manifest, cfg, tok, facts, docs, paths, counts_note, buckets, info)


def _uncounted(docs: pl.DataFrame) -> list[tuple[int, list[int]]]:
    """(shard, rows) of the documents without a reusable token count, in shard order."""
    missing = docs.filter(pl.col("n_tokens").is_null())
    return [(int(s), g["shard_row"].to_list()) for (s,), g in missing.group_by(["shard"], maintain_order=True)]


def _with_counts(docs: pl.DataFrame, counted: Mapping[int, Mapping[int, int]]) -> pl.DataFrame:
    """`docs` with the counts the release computed filled in (counted: shard -> row -> n_tokens)."""
    frames = [
        pl.DataFrame({"shard": [s] * len(c), "shard_row": list(c), "n_new": list(c.values())},
                     schema={"shard": pl.Int32, "shard_row": pl.Int32, "n_new": pl.Int32})
        for s, c in counted.items() if c
    ]
    if not frames:
        return docs
    return docs.join(pl.concat(frames), on=["shard", "shard_row"], how="left").with_columns(
        pl.coalesce("n_tokens", "n_new").alias("n_tokens")
    ).drop("n_new")


def _work_units(docs: pl.DataFrame, counted: Mapping[int, Mapping[int, int]], buckets: Buckets) -> list[tuple[int, list[int]]]:
    """(shard, rows) of every unit: up to UNIT_DOCS consecutive documents of one shard with work for the
    worker processes (a token count the release computed, or over max_tokens), in shard and row order."""
    long = docs.filter(pl.col("n_tokens") > buckets.max_tokens).select("shard", "shard_row")
    rows_by_shard: dict[int, set[int]] = {int(s): set(c) for s, c in counted.items() if c}
    for s, r in long.iter_rows():
        rows_by_shard.setdefault(int(s), set()).add(int(r))
    units = []
    for s in sorted(rows_by_shard):
        rows = sorted(rows_by_shard[s])
        units += [(s, rows[i:i + UNIT_DOCS]) for i in range(0, len(rows), UNIT_DOCS)]
    return units


def _segment_batches(docs: pl.DataFrame, units: Sequence[tuple[int, list[int]]], buckets: Buckets,
                     room: Mapping[str, list[bool]]
                     ) -> list[tuple[list[int], list[int], list[str], list[list[bool]], list[str]]]:
    """Per unit, its documents over max_tokens as a segment job's batch (rows, n_tokens, doc_ids, rooms,
    row ids: a segmentation is seeded by the source row, so it survives a shift of shard ids)."""
    long = docs.filter(pl.col("n_tokens") > buckets.max_tokens).select(
        "shard", "shard_row", "n_tokens", "id", "source_id", "row_id")
    by_key = {(int(s), int(r)): (int(n), i, sid, rid) for s, r, n, i, sid, rid in long.iter_rows()}
    batches = []
    for s, rows in units:
        hit = [(r, by_key[(s, r)]) for r in rows if (s, r) in by_key]
        batches.append(([r for r, _ in hit], [v[0] for _, v in hit], [v[1] for _, v in hit], [room[v[2]] for _, v in hit],
                        [v[3] for _, v in hit]))
    return batches


def _unit(shard: int, rows: list[int], counted: Mapping[int, int], segmented: Mapping[str, Any]) -> dict[str, Any]:
    """A unit as recorded: its rows, the counts the release computed for them, their segments."""
    mine = [r for r in rows if r in counted]
    return {"shard": shard, "rows": rows, "counted": {"rows": mine, "n_tokens": [counted[r] for r in mine]},
            "segmented": dict(segmented)}


def unit_line(unit: Mapping[str, Any]) -> bytes:
    """One unit as the line the build writes and the check compares (canonical JSON)."""
    return json.dumps(unit, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _with_row_ids(docs: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]],
                  info_frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """`docs` with `row_id`, the name of its source row that release ids hash (ids.row_ids); the values
    of a ledger `id_field` come from the kept fields (doc_info), so that field is in keep_fields too."""
    own = None
    wanted = {sid: f["id_field"] for sid, f in facts.items() if f.get("id_field")}
    if wanted:
        pieces = []
        for sid, field_name in sorted(wanted.items()):
            for f in info_frames:
                if field_name in f.columns:
                    try:
                        values = f[field_name].cast(pl.String)
                    except pl.exceptions.PolarsError as exc:
                        raise ReleaseError(f"source {sid!r}: id_field {field_name!r} is not a scalar field ({exc})") from exc
                    pieces.append(pl.DataFrame({"id": f["id"], "own_id": values})
                                  .filter(pl.col("id").str.starts_with(f"{sid}:")))
        frame = (pl.concat(pieces).unique("id", keep="first", maintain_order=True) if pieces
                 else pl.DataFrame(schema={"id": pl.String, "own_id": pl.String}))
        own_frame = docs.select("id", "source_id").join(frame, on="id", how="left", maintain_order="left")
        mine = own_frame.filter(pl.col("source_id").is_in(list(wanted)))
        missing = mine.filter(pl.col("own_id").is_null())
        if missing.height:
            sid = missing["source_id"][0]
            raise ReleaseError(f"source {sid!r}: {missing.height} documents (e.g. {missing['id'][0]!r}) have no value of "
                               f"id_field {wanted[sid]!r}; list it in keep_fields and give every record one")
        dup = mine.filter(pl.struct("source_id", "own_id").is_duplicated())
        if dup.height:
            raise ReleaseError(f"source {dup['source_id'][0]!r}: id_field {wanted[dup['source_id'][0]]!r} value "
                               f"{dup['own_id'][0]!r} names more than one document; release ids must be unique")
        own = own_frame["own_id"].to_list()
    ids = row_ids(docs["id"].to_list(), docs["source_id"].to_list(), docs["url"].to_list(), facts, own)
    return docs.with_columns(pl.Series("row_id", ids, dtype=pl.String))


def _plan(inp: _Inputs, docs: pl.DataFrame, units: Sequence[Mapping[str, Any]], settings: Mapping[str, Any],
          doc_info: Sequence[str | Path | pa.Table]) -> tuple[pl.DataFrame, dict[str, Any], list[str], list[tuple[int, int, int]]]:
    """The plan (with gpart and seq), its counts, the kept fields and the parts, from counted docs and units."""
    buckets = inp.buckets
    doc_cols = ["id", "source_id", "url", "license_spdx", "lang", "shard", "shard_row", "row_id"] + (
        ["fetched_at"] if "fetched_at" in docs.columns else []
    )
    whole = docs.filter(pl.col("n_tokens") <= buckets.max_tokens).select(
        *doc_cols,
        pl.lit(-1, dtype=pl.Int32).alias("segment"),
        pl.lit(0, dtype=pl.Int64).alias("char_start"),
        pl.col("n_chars").cast(pl.Int64).alias("char_end"),
        pl.col("n_tokens").cast(pl.Int32),
        pl.col("sha256").cast(pl.Binary).alias("content_sha256"),
    ).rename({"id": "doc_id"})
    cands = whole
    seg_frames = [
        pl.DataFrame({k: u["segmented"]["rows"][k] for k in SEGMENT_SCHEMA}, schema=SEGMENT_SCHEMA)
        .with_columns(pl.col("content_sha256").str.decode("hex"))
        for u in units if u["segmented"]["rows"]["doc_id"]
    ]
    if seg_frames:
        segs = pl.concat(seg_frames).join(docs.select(doc_cols).rename({"id": "doc_id"}), on="doc_id", how="left")
        cands = pl.concat([whole, segs.select(whole.columns)], how="vertical_relaxed")
    plan, plan_counts = plan_release(cands, buckets, settings)
    plan, keep_fields = _attach_metadata(plan, inp.facts, inp.info, settings)
    parts = parts_of(plan)
    gpart_of = pl.DataFrame(
        {"bucket": [b for b, _, _ in parts], "part": [p for _, p, _ in parts], "gpart": list(range(len(parts)))},
        schema={"bucket": plan.schema["bucket"], "part": plan.schema["part"], "gpart": pl.Int64},
    )
    plan = plan.join(gpart_of, on=["bucket", "part"], how="left", maintain_order="left").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("seq")
    )
    return plan, plan_counts, keep_fields, parts


@dataclass
class _Selected:
    """Texts of some rows of one shard, read once for the rebuild check's jobs: array, shard row -> position."""

    array: pa.Array
    position: dict[int, int]


def _select_texts(path: Path, rows: Collection[int]) -> _Selected:
    wanted = sorted(rows)
    return _Selected(shard_texts(str(path)).take(pa.array(wanted, pa.int64())), {r: i for i, r in enumerate(wanted)})


def part_path(buckets: Buckets, bucket: int, part: int) -> str:
    """A part file's path relative to the release folder."""
    return f"data/{buckets.folder(bucket)}/part-{part:05d}.parquet"


def _scatter_write(plan: pl.DataFrame, parts: Sequence[tuple[int, int, int]], inp: _Inputs, keep_fields: list[str],
                   settings: Mapping[str, Any], spill_dir: Path, out: Path, workers: int,
                   only: Sequence[int] | None = None, texts: Mapping[int, _Selected] | None = None,
                   ) -> tuple[list[dict[str, Any]], float, float]:
    """Write the parts (all, or the global part indexes `only`) under `out`; returns their files entries
    (path, rows, sha256) in part order and the scatter and write seconds. The scatter jobs read their
    shards, or take the texts of `texts` (by shard) where given."""
    t = time.perf_counter()
    chosen = plan if only is None else plan.filter(pl.col("gpart").is_in(list(only)))
    by_shard = chosen.sort("shard", "gpart", "row").partition_by("shard", as_dict=True, maintain_order=True)
    jobs = []
    for (s, *_), g in by_shard.items():
        rows = g["shard_row"].to_list()
        source: str | pa.Array = str(inp.paths[s])
        if texts is not None and s in texts:
            source, rows = texts[s].array, [texts[s].position[r] for r in rows]
        jobs.append((source, str(spill_dir / f"s{int(s):05d}.arrow"), rows, g["char_start"].to_list(),
                     g["char_end"].to_list(), g["gpart"].to_list(), g["seq"].to_list()))
    spills: dict[int, list[tuple[str, int]]] = {}
    for job, index in zip(jobs, ordered_map(scatter_job, jobs, workers), strict=True):
        for gp, batch in index.items():
            spills.setdefault(gp, []).append((job[1], batch))
    scatter_s, t = time.perf_counter() - t, time.perf_counter()
    plan_cols = [c for c in chosen.columns if c not in ("content_sha256", "lang")]
    by_part = chosen.partition_by("gpart", as_dict=True)
    jobs = []
    for i in range(len(parts)) if only is None else sorted(only):
        b, p, _ = parts[i]
        part_plan = by_part[(i,)].sort("row").select(plan_cols).to_arrow()
        jobs.append((spills[i], part_plan, str(out / part_path(inp.buckets, b, p)), inp.tok.name, keep_fields,
                     int(settings["zstd_level"])))
    files = [
        {"path": str(Path(job[2]).relative_to(out)), "rows": rows, "sha256": digest}
        for job, (rows, digest) in zip(jobs, ordered_map(write_job, jobs, workers), strict=True)
    ]
    return files, scatter_s, time.perf_counter() - t


def _record(inp: _Inputs, settings: Mapping[str, Any], plan: pl.DataFrame, plan_counts: Mapping[str, Any],
            units: Sequence[Mapping[str, Any]], selection_excluded: Mapping[str, int] | None,
            files: list[dict[str, Any]], build: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The statistics record (_RELEASE.json): card info (with the build's counts, stage runs and
    reproduce facts), cleaning rows, data statistics, files."""
    no_segment: dict[str, int] = {}
    for u in units:
        for k, v in u["segmented"]["no_segment"].items():
            no_segment[k] = no_segment.get(k, 0) + v
    tails = sum(u["segmented"]["tails_dropped"] for u in units)
    summary = summary_frame(plan["bucket"].to_numpy(), plan["source_id"], plan["n_tokens"].to_numpy(),
                            (plan["segment"] >= 0).to_numpy())
    data = data_stats(summary, inp.buckets, inp.facts)
    name = settings.get("name") or inp.manifest["dataset"]
    info = _card_info(name, inp.manifest["version"], inp.tok.name, plan, inp.facts, settings)
    info |= card_build_info(inp.manifest, build)
    cleaning = cleaning_rows(inp.manifest, selection_excluded or {}, plan_counts, no_segment, tails)
    return {"info": info, "cleaning": cleaning, "data": data, "files": files}


def _record_bytes(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def build_release(
    *,
    shards_dir: str | Path,
    out_dir: str | Path,
    settings: Mapping[str, Any],
    tokenize_cfg: Mapping[str, Any],
    sources: Sequence[Any],
    token_counts: str | Path | None = None,
    doc_info: Sequence[str | Path | pa.Table] = (),
    selection_excluded: Mapping[str, int] | None = None,
    workers: int = 1,
    units_file: str | Path | None = None,
    build: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build release/<name>/<version>/ from the published shards; returns stats for the UI (see docs/release.md).

    With `units_file`, the units (runs of up to UNIT_DOCS documents of a shard with a token count the
    release computed or segments to cut: those counts and segments, one canonical JSON line each) are
    written there too, for the sampled rebuild check (`check_rebuild_sample`); stats["units"] holds its sha256.
    `build` (see `build_info`): the stage runs and counts of the corpus build, for the card's headline,
    Construction and Reproduce sections; without it the card has the manifest's counts and the release alone."""
    settings = dict(settings)
    shards_dir, out_dir = Path(shards_dir), Path(out_dir)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    inp = _inputs(shards_dir, settings, tokenize_cfg, sources, token_counts, doc_info)
    buckets, cfg = inp.buckets, inp.cfg
    seconds["read"] = time.perf_counter() - t

    # 2. tokenize documents without a count
    t = time.perf_counter()
    counted: dict[int, dict[int, int]] = {}
    tok_seconds, tok_bytes, n_tokenized = 0.0, 0, 0
    uncounted = _uncounted(inp.docs)
    jobs = [(str(inp.paths[s]), rows, cfg) for s, rows in uncounted]
    for (s, rows), (cnts, secs, nbytes) in zip(uncounted, ordered_map(count_job, jobs, workers), strict=True):
        counted[s] = dict(zip(rows, cnts, strict=True))
        tok_seconds += secs
        tok_bytes += nbytes
        n_tokenized += len(cnts)
    docs = _with_counts(inp.docs, counted)
    seconds["tokenize_documents"] = time.perf_counter() - t

    # 3. segment documents over max_tokens: one job per shard, one result per unit
    t = time.perf_counter()
    room = room_by_source(docs, buckets, settings)
    work = _work_units(docs, counted, buckets)
    batches = _segment_batches(docs, work, buckets, room)
    shards = sorted({s for s, _ in work})
    jobs = [(str(inp.paths[s]), [b for (us, _), b in zip(work, batches, strict=True) if us == s], settings, cfg)
            for s in shards]
    results = []
    seg_seconds, seg_bytes = 0.0, 0
    for res in ordered_map(segment_job, jobs, workers):
        results += res["batches"]
        seg_seconds += res["seconds"]
        seg_bytes += res["bytes"]
    units = [_unit(s, rows, counted.get(s, {}), seg) for (s, rows), seg in zip(work, results, strict=True)]
    units_stats = None
    if units_file is not None:
        body = b"".join(unit_line(u) for u in units)
        atomic_write_bytes(units_file, body)
        units_stats = {"file": str(units_file), "sha256": hashlib.sha256(body).hexdigest(), "units": len(units)}
    seconds["segment"] = time.perf_counter() - t

    # 4. plan
    t = time.perf_counter()
    plan, plan_counts, keep_fields, parts = _plan(inp, docs, units, settings, doc_info)
    seconds["plan"] = time.perf_counter() - t

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}.spill-") as spill_dir, atomic_dir(out_dir) as tmp:
        # 5. scatter, 6. write parts
        files, seconds["scatter"], seconds["write"] = _scatter_write(
            plan, parts, inp, keep_fields, settings, Path(spill_dir), tmp, workers)

        # 7. statistics, figures, card
        t = time.perf_counter()
        record = _record(inp, settings, plan, plan_counts, units, selection_excluded, files, build)
        _write_card(tmp, record)
        (tmp / STATS_NAME).write_bytes(_record_bytes(record))
        seconds["card"] = time.perf_counter() - t
    info, data, cleaning = record["info"], record["data"], record["cleaning"]
    return {
        "release_dir": str(out_dir),
        "card": str(out_dir / "README.md"),
        "figures": [str(out_dir / "assets" / f) for f, _ in card_mod.FIGURES],
        "docs": data["docs"],
        "tokens": data["tokens"],
        "segments": data["segments"],
        "sources": data["n_sources"],
        "buckets": len(data["buckets"]),
        "parts": len(parts),
        "docs_per_bucket": {b["folder"]: b["docs"] for b in data["buckets"]},
        "cleaning": cleaning,
        "counts_reused": inp.counts_note,
        "documents_tokenized": n_tokenized,
        "tokenize_documents": {"seconds": round(tok_seconds, 3), "mb": round(tok_bytes / 1e6, 3)},
        "tokenize_segments": {"seconds": round(seg_seconds, 3), "mb": round(seg_bytes / 1e6, 3)},
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "headline": card_mod.headline_rows(info, data, cleaning),
        "files": files,
        **({"units": units_stats} if units_stats else {}),
    }


def _attach_metadata(
    plan: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]], info_frames: list[pl.DataFrame], settings: Mapping[str, Any]
) -> tuple[pl.DataFrame, list[str]]:
    """Columns the rows need beyond the plan: source_type, created_at, source_file, parent_id, extras."""
    keep_fields: list[str] = []
    for f in info_frames:
        extra = [c for c in f.columns if c not in INFO_COLUMNS and c not in plan.columns]
        keep_fields += [c for c in extra if c not in keep_fields]
        cols = [c for c in f.columns if c == "id" or c not in plan.columns]
        plan = plan.join(f.select(cols).rename({"id": "doc_id"}), on="doc_id", how="left", maintain_order="left")
    fallback = datetime.fromisoformat(settings["created_at_fallback"].replace("Z", "+00:00")).astimezone(UTC)
    fetched = pl.col("fetched_at") if "fetched_at" in plan.columns else pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    hub = {sid: f.get("hub_dataset") or sid for sid, f in facts.items()}
    by_file = {sid for sid, f in facts.items() if not f.get("url_field")}
    plan = plan.with_columns(
        fetched.fill_null(pl.lit(fallback).cast(pl.Datetime("us", "UTC"))).alias("created_at"),
        pl.col("source_id").replace_strict(hub, return_dtype=pl.String).alias("source_type"),
        pl.when(pl.col("source_id").is_in(list(by_file)))
        .then(pl.col("url").str.replace(r"#[^#]*$", ""))
        .otherwise(pl.col("source_file") if "source_file" in plan.columns else pl.lit(None, dtype=pl.String))
        .alias("source_file"),
        pl.Series("parent_id", [release_id(d) for d in plan["row_id"].to_list()], dtype=pl.String),
    ).drop("row_id")
    if "cleaned" not in plan.columns:
        plan = plan.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias("cleaned"))
    if "title" not in plan.columns:
        plan = plan.with_columns(pl.lit(None, dtype=pl.String).alias("title"))
    return plan, keep_fields


def _card_info(name: str, version: str, tokenizer: str, plan: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]],
               settings: Mapping[str, Any]) -> dict[str, Any]:
    langs = plan.filter(pl.col("lang") != "und").group_by("lang").len().sort(["len", "lang"], descending=[True, False])
    build_date = settings.get("build_date")
    if not build_date:
        build_date = plan["created_at"].max().date().isoformat() if plan.height else settings["created_at_fallback"][:10]
    licenses = [facts[s]["license_spdx"] for s in sorted(set(plan["source_id"].to_list()))]
    return {
        "name": name,
        "version": version,
        "pretty_name": settings.get("pretty_name") or name,
        "tokenizer": tokenizer,
        "length_column": length_column(tokenizer),
        "build_date": str(build_date),
        "license": settings.get("license") or card_mod.hub_license(licenses),
        "languages": langs["lang"].to_list(),
        "task_categories": list(settings["task_categories"]),
        "tags": list(settings["tags"]),
        "settings": {k: settings[k] for k in ("bucket_width", "min_tokens", "max_tokens", "max_segments",
                                                "per_bucket_cap", "per_source_cap", "seed", "part_tokens")},
    }


def package_version() -> str:
    """The installed corpus_dagster version (the package's __version__ when it runs uninstalled)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        from corpus_dagster import __version__

        return __version__


def card_build_info(manifest: Mapping[str, Any], build: Mapping[str, Any] | None) -> dict[str, Any]:
    """The card info's corpus, build and reproduce parts: counts from the shard manifest, stage runs from
    `build`. Only relative paths: a ledger outside the artifacts root is named by its config key."""
    build = build or {}
    dedup = manifest.get("dedup", {})
    ref = manifest.get("ledger_ref") or "corpus/LEDGER.jsonl"
    return {
        "corpus": {
            "fetched": build.get("fetched"),
            "filters": {k: int(v) for k, v in manifest.get("filters", {}).items()},
            "dedup": {k: int(dedup.get(k, 0)) for k in ("exact_dropped", "near_dropped", "decontaminated")},
            "pii": {k: int(v) for k, v in manifest.get("pii", {}).items()},
            "published": int(manifest.get("n_docs", 0)),
        },
        "build": {"steps": list(build.get("steps", [])),
                  "code_versions": dict(build.get("code_versions", {}))},
        "reproduce": {
            "config_sha256": manifest.get("config_sha256", ""),
            "ledger_sha256": manifest.get("ledger_sha256") or build.get("ledger_sha256", ""),
            "ledger_ref": "<paths.ledger of the config>" if PurePosixPath(ref).is_absolute() else ref,
            "package": PACKAGE,
            "package_version": package_version(),
            "release_path": build.get("release_path"),
        },
    }


def cleaning_rows(
    manifest: Mapping[str, Any], excluded: Mapping[str, int], plan_counts: Mapping[str, Any],
    no_segment: Mapping[str, int], tails: int,
) -> list[dict[str, Any]]:
    """Drops and repairs by stage and reason, from the shard manifest, the ingest selection and the release."""
    rows = [{"stage": "ingest", "reason": f"where ({sid})", "count": int(n)} for sid, n in sorted(excluded.items())]
    rows += [{"stage": "clean", "reason": f"filter {k}", "count": int(v)} for k, v in manifest.get("filters", {}).items()]
    rows += [{"stage": "clean", "reason": f"repaired {k} (kept)", "count": int(v)} for k, v in manifest.get("repairs", {}).items()]
    dedup = manifest.get("dedup", {})
    rows += [{"stage": "dedup", "reason": k, "count": int(dedup.get(k, 0))}
             for k in ("exact_dropped", "near_dropped", "decontaminated")]
    rows += [
        {"stage": "release", "reason": "under min_tokens (after cleaning and repair)",
         "count": sum(plan_counts["below_min_tokens"].values())},
        {"stage": "release", "reason": "exact_duplicate", "count": int(plan_counts["exact_duplicates"])},
        {"stage": "release", "reason": "over per-source bucket cap", "count": sum(plan_counts["over_cap"].values())},
        {"stage": "release", "reason": "segment tail dropped (documents)", "count": int(tails)},
    ]
    rows += [{"stage": "release", "reason": f"too long, not segmented ({k})", "count": int(v)}
             for k, v in sorted(no_segment.items())]
    return rows


def _write_card(folder: Path, record: Mapping[str, Any], figures: Collection[str] | None = None) -> None:
    """README.md and the figures (all, or the file names in `figures`), from the statistics record alone."""
    info, data, cleaning = record["info"], record["data"], record["cleaning"]
    assets = folder / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    tokenizer = info["tokenizer"]
    if figures is None or figures:
        from corpus_dagster.release import figures as fig_mod  # matplotlib: imported only to draw

    def source_mix() -> bytes:
        mix = fig_mod.mix_shares(
            [(b["bucket"], sid, n) for b in data["buckets"] for sid, n in b.get("source_docs", [])], len(data["buckets"])
        )
        return fig_mod.source_mix(data, mix, tokenizer)

    draw = {
        "docs_per_bucket.png": lambda: fig_mod.docs_per_bucket(data, tokenizer),
        "tokens_by_source.png": lambda: fig_mod.tokens_by_source(data, tokenizer),
        "source_mix.png": source_mix,
    }
    for fname, render in draw.items():
        if figures is None or fname in figures:
            (assets / fname).write_bytes(render())
    (folder / "README.md").write_text(card_mod.render_card(info, data, cleaning), encoding="utf-8")


# ---------------------------------------------------------------- checks


def _file_summary(release_dir: Path, buckets: Buckets, length_col: str) -> tuple[pl.DataFrame, list[str], list[dict[str, Any]]]:
    """Per-row (bucket, source_id, n_tokens, segmented) read back from the part files, ids, and folder problems."""
    frames, ids, problems = [], [], []
    folders = {buckets.folder(k): k for k in range(buckets.count)}
    for path in sorted((release_dir / "data").glob("*/*.parquet")):
        k = folders.get(path.parent.name)
        if k is None:
            problems.append({"file": str(path), "problem": "folder is not a bucket of the configured settings"})
            continue
        t = pq.read_table(path, columns=["id", "metadata", length_col])
        metas = [json.loads(m) for m in t["metadata"].to_pylist()]
        ids += t["id"].to_pylist()
        frames.append(
            pl.DataFrame({
                "file": [str(path.relative_to(release_dir))] * t.num_rows,
                "bucket": [k] * t.num_rows,
                "source_id": [m["source_id"] for m in metas],
                "n_tokens": t[length_col].to_numpy().astype(np.int64),
                "segmented": ["segment" in m for m in metas],
            }, schema={"file": pl.String, "bucket": pl.Int32, "source_id": pl.String, "n_tokens": pl.Int64,
                       "segmented": pl.Boolean})
        )
    frame = pl.concat(frames) if frames else pl.DataFrame(
        schema={"file": pl.String, "bucket": pl.Int32, "source_id": pl.String, "n_tokens": pl.Int64, "segmented": pl.Boolean})
    return frame, ids, problems


def check_release(release_dir: str | Path, settings: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The blocking checks on a written release, by name: bucket_bounds, source_caps, unique_ids,
    card_matches_data. Each report: passed, problems (list), metadata (counts)."""
    release_dir = Path(release_dir)
    stats_path = release_dir / STATS_NAME
    if not stats_path.is_file():
        raise ReleaseError(f"{stats_path}: not found; build the release first")
    record = json.loads(stats_path.read_text(encoding="utf-8"))
    buckets = Buckets.from_settings(settings)
    frame, ids, folder_problems = _file_summary(release_dir, buckets, record["info"]["length_column"])
    bounds = checks.check_bucket_bounds(frame, buckets)
    bounds["problems"] = folder_problems + bounds["problems"]
    bounds["passed"] = not bounds["problems"]
    summary = frame.drop("file")
    data = data_stats(summary, buckets, {s["source_id"]: {"hub_dataset": s["hub_dataset"], "category": s["category"],
                                                            "license_spdx": s["license"]} for s in record["data"]["sources"]})
    expected_card = card_mod.render_card(record["info"], data, record["cleaning"])
    actual_card = (release_dir / "README.md").read_text(encoding="utf-8")
    return {
        "bucket_bounds": bounds,
        "source_caps": checks.check_source_caps(summary, settings),
        "unique_ids": checks.check_unique_ids(ids),
        "card_matches_data": checks.check_card(actual_card, expected_card, record["data"], data),
    }


def file_hashes(folder: str | Path) -> dict[str, str]:
    """SHA-256 of every file under `folder`, by relative path (sorted)."""
    folder = Path(folder)
    return {
        str(p.relative_to(folder)): sha256_file(p)
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def check_rebuild(release_dir: str | Path, build_kwargs: Mapping[str, Any], workers: int) -> dict[str, Any]:
    """Rebuild with `workers` into a temp folder and compare every file's bytes with `release_dir`."""
    release_dir = Path(release_dir)
    with tempfile.TemporaryDirectory(prefix="release-rebuild-") as tmp:
        kwargs = dict(build_kwargs) | {"out_dir": Path(tmp) / "release", "workers": workers, "units_file": None}
        build_release(**kwargs)
        return checks.check_identical(file_hashes(release_dir), file_hashes(Path(tmp) / "release"))


def _read_units(units_file: Path, sha256: str | None) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The build's units in order, or (None, why not)."""
    if not units_file.is_file():
        return None, f"{units_file}: the build's units file is missing; rebuild the release"
    body = units_file.read_bytes()
    if hashlib.sha256(body).hexdigest() != sha256:
        return None, f"{units_file}: sha256 differs from the one the build recorded; rebuild the release"
    return [json.loads(line) for line in body.decode("utf-8").splitlines()], None


def check_rebuild_sample(release_dir: str | Path, build_kwargs: Mapping[str, Any], workers: int, units_file: str | Path,
                         units_sha256: str | None, sample: int, seed: str) -> dict[str, Any]:
    """Rebuild a seeded sample of the release with `workers` and compare bytes; `sample` 0 rebuilds everything.

    A unit is a run of up to UNIT_DOCS documents of one input shard with work for the worker processes
    (a token count the release computes, segments of a document over max_tokens); the build records each
    unit's counts and segments in `units_file`. With `sample` n > 0:
    - n units are recomputed, one job each, through a pool of `workers` and must equal the build's units;
    - the whole plan (buckets, duplicates, caps, shuffle, parts) is recomputed from the inputs and the
      build's units, and the set of part files must be the planned one;
    - n output files drawn from the part files and the three figures are written again (parts through the
      scatter and write jobs with `workers`) and compared byte for byte;
    - README.md and _RELEASE.json are rendered again from the recomputed plan and compared byte for byte
      (_RELEASE.json holds every part's sha256: the rewritten parts' from the rebuild, the others' from
      their files).
    Draws are seeded by `seed` (the stage key: a new build checks other units); `sample` 0 runs the full
    rebuild (`check_rebuild`), what a scheduled full check runs."""
    release_dir = Path(release_dir)
    if sample <= 0:
        full = check_rebuild(release_dir, build_kwargs, workers)
        full["metadata"]["mode"] = "full"
        return full
    units, why = _read_units(Path(units_file), units_sha256)
    if units is None:
        return checks.rebuild_report([{"file": str(units_file), "problem": why}], mode="sample")
    kw = dict(build_kwargs)
    settings = dict(kw["settings"])
    inp = _inputs(Path(kw["shards_dir"]), settings, kw["tokenize_cfg"], kw["sources"], kw.get("token_counts"),
                  kw.get("doc_info", ()))
    problems: list[dict[str, Any]] = []

    def shard_name(s: int) -> str:
        return inp.paths[s].name

    counted: dict[int, dict[int, int]] = {}
    for u in units:
        counted.setdefault(int(u["shard"]), {}).update(zip(u["counted"]["rows"], u["counted"]["n_tokens"], strict=True))
    uncounted = {(s, r) for s, rows in _uncounted(inp.docs) for r in rows}
    if uncounted != {(s, r) for s, c in counted.items() for r in c}:
        return checks.rebuild_report([{"file": str(units_file), "problem": "the documents the build counted are not "
                                       "the documents without a reusable count"}], mode="sample")
    docs = _with_counts(inp.docs, counted)
    work = _work_units(docs, counted, inp.buckets)
    if work != [(int(u["shard"]), u["rows"]) for u in units]:
        return checks.rebuild_report([{"file": str(units_file), "problem": f"{len(units)} units recorded, the inputs "
                                       f"make {len(work)} (or other rows)"}], mode="sample")
    picks = sample_units(len(work), sample, f"{seed}:units")
    recount = [i for i in picks if units[i]["counted"]["rows"]]
    jobs = [(str(inp.paths[work[i][0]]), units[i]["counted"]["rows"], inp.cfg) for i in recount]
    recounted = {i: dict(zip(units[i]["counted"]["rows"], cnts, strict=True))
                 for i, (cnts, _, _) in zip(recount, ordered_map(count_job, jobs, workers), strict=True)}
    room = room_by_source(docs, inp.buckets, settings)
    batches = _segment_batches(docs, [work[i] for i in picks], inp.buckets, room)

    plan, plan_counts, keep_fields, parts = _plan(inp, docs, units, settings, kw.get("doc_info", ()))
    part_files = [part_path(inp.buckets, b, p) for b, p, _ in parts]
    figures = [f"assets/{f}" for f, _ in card_mod.FIGURES]
    outputs = part_files + figures
    expected = set(outputs) | {"README.md", STATS_NAME}
    on_disk = {str(p.relative_to(release_dir)) for p in release_dir.rglob("*") if p.is_file()}
    problems += [{"file": f, "problem": "missing in release"} for f in sorted(expected - on_disk)]
    problems += [{"file": f, "problem": "not in the rebuilt plan"} for f in sorted(on_disk - expected)]
    drawn = sample_units(len(outputs), sample, f"{seed}:outputs")
    part_picks = [i for i in drawn if i < len(parts)]
    fig_picks = [outputs[i] for i in drawn if i >= len(parts)]

    # each shard the sample needs is read once, here; the jobs get only their texts
    needed: dict[int, set[int]] = {}
    for i, b in zip(picks, batches, strict=True):
        needed.setdefault(work[i][0], set()).update(b[0])
    for s, r in plan.filter(pl.col("gpart").is_in(part_picks)).select("shard", "shard_row").iter_rows():
        needed.setdefault(int(s), set()).add(int(r))
    texts = {s: _select_texts(inp.paths[s], rows) for s, rows in sorted(needed.items())}
    jobs = []
    for i, (rows, n_tokens, doc_ids, rooms, seeds) in zip(picks, batches, strict=True):
        sel = texts.get(work[i][0])
        source = sel.array.take(pa.array([sel.position[r] for r in rows], pa.int64())) if rows else pa.array([], pa.string())
        jobs.append((source, [(list(range(len(rows))), n_tokens, doc_ids, rooms, seeds)], settings, inp.cfg))
    for i, res in zip(picks, ordered_map(segment_job, jobs, workers), strict=True):
        s, rows = work[i]
        again = _unit(s, rows, recounted.get(i, {}), res["batches"][0])
        if unit_line(again) != unit_line(units[i]):
            problems.append({"file": shard_name(s), "problem": f"rows {rows[0]}..{rows[-1]}: counts or segments differ "
                             f"from a rebuild with workers={workers}"})
    with tempfile.TemporaryDirectory(prefix="release-rebuild-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "spill").mkdir()
        written, _, _ = _scatter_write(plan, parts, inp, keep_fields, settings, tmp / "spill", tmp / "out", workers,
                                       only=part_picks, texts=texts)
        digests = {f["path"]: f["sha256"] for f in written}
        files = []
        for rel, (_, _, rows) in zip(part_files, parts, strict=True):
            here = release_dir / rel
            digest = digests.get(rel) or (sha256_file(here) if here.is_file() else "")
            files.append({"path": rel, "rows": rows, "sha256": digest})
        record = _record(inp, settings, plan, plan_counts, units, kw.get("selection_excluded"), files, kw.get("build"))
        _write_card(tmp / "out", record, figures={Path(f).name for f in fig_picks})
        (tmp / "out" / STATS_NAME).write_bytes(_record_bytes(record))
        for rel in [*(part_files[i] for i in part_picks), *fig_picks, "README.md", STATS_NAME]:
            here = release_dir / rel
            if here.is_file() and sha256_file(here) != sha256_file(tmp / "out" / rel):
                problems.append({"file": rel, "problem": f"bytes differ from a rebuild with workers={workers}"})
    return checks.rebuild_report(problems, mode="sample", units_rebuilt=len(picks), units=len(work),
                                 parts_rewritten=len(part_picks), parts=len(parts), figures_redrawn=len(fig_picks),
                                 files=len(expected))


# --- The stage as the Dagster layer runs it: inputs from the other drivers, a content-keyed stage record -----

STAGE = "release"
CODE_VERSION = "5"  # 2: the build records its units for the sampled rebuild check; 3: figures with exact labels;
# 4: ids name the source row (file and line, or the ledger's id_field), not the shard id; 5: the card tells the build


PACKAGE = "corpus_dagster"  # the distribution name in pyproject.toml
# The stages of a corpus build before the release, in the order they run; per-source ones have a row per source
BUILD_STAGES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokens", "analysis")
PER_SOURCE = {"ingest", "clean", "minhash", "scrub"}


def release_name(resolved: Mapping[str, Any]) -> str:
    """The release's folder name: `release.name`, else the dataset name."""
    return resolved["release"]["name"] or resolved["dataset"]


def _document_info(layout: Layout, source_ids: list[str]) -> list[pa.Table]:
    """Per source: id, fetched_at, kept ledger fields (from ingest) and repairs (from clean), for `metadata`."""
    tables = []
    for sid in source_ids:
        files = clean_doc_files(layout, sid)
        if not files:  # a source whose fetch found no documents: nothing to describe
            continue
        info = pl.from_arrow(ingest_driver.document_info(layout, sid))
        repairs = pl.concat([pl.from_arrow(pq.read_table(p, columns=["id", "repairs"])) for p in files])
        tables.append(repairs.join(info, on="id", how="left").to_arrow())
    return tables


def _pick(d: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: d[k] for k in keys if k in d}


def _enabled(settings: Mapping[str, Any]) -> list[str]:
    """Names of the sub-sections switched on (clean filters, scrub detectors)."""
    return sorted(k for k, v in settings.items() if isinstance(v, Mapping) and v.get("enabled"))


def _step(stage: str, source: str | None, record: StageRecord, manifest: Mapping[str, Any],
          resolved: Mapping[str, Any]) -> dict[str, Any]:
    """One Construction row from a stage record: its counts and the settings that decided its output."""
    st, cfg = record.stats, record.settings if isinstance(record.settings, Mapping) else {}
    counts: dict[str, Any]
    settings: dict[str, Any]
    if stage == "ingest":
        counts = {"documents": st.get("docs", 0), "excluded by where": st.get("excluded_by_where", 0),
                  "quarantined": sum(int(v) for v in (st.get("quarantined") or {}).values())}
        settings = dict(cfg)
    elif stage == "clean":
        counts = {"in": st.get("docs_in", 0), "kept": st.get("kept", 0), "rejected": st.get("rejected", 0),
                  "repaired": sum(int(v) for v in (st.get("repairs") or {}).values())}
        settings = {"filters": _enabled(cfg), "repair": sorted(k for k, v in (cfg.get("repair") or {}).items() if v)}
    elif stage == "minhash":
        counts = {"documents": st.get("docs", 0), "no signature": st.get("no_signature", 0)}
        settings = _pick(cfg, "num_perm", "shingle_size", "scheme", "seed")
    elif stage == "dedup":
        counts = {"in": st.get("docs", 0), "exact dropped": st.get("exact_dropped", 0),
                  "near dropped": st.get("near_dropped", 0), "decontaminated": st.get("decontaminated", 0)}
        settings = _pick(cfg, "jaccard_threshold", "num_perm", "bands", "ngram", "action")
    elif stage == "scrub":
        counts = {"documents": st.get("docs", 0), "documents redacted": st.get("docs_redacted", 0),
                  "placeholders": sum(int(v) for v in (st.get("pii") or {}).values())}
        settings = {"detectors": _enabled(cfg)}
    elif stage == "publish":
        counts = {"documents": manifest.get("n_docs", 0), "shards": manifest.get("n_shards", 0)}
        settings = {"shard_rows": resolved["shard_rows"], "val_permille": resolved["val_permille"]}
    elif stage == "tokens":
        counts = {"documents": st.get("n_docs", 0), "tokens": st.get("n_tokens", 0)}
        settings = {"tokenizer": cfg.get("name") or cfg.get("encoding") or cfg.get("path"),
                    **_pick(cfg, "kind", "eod_token", "bos_token")}
    else:  # analysis
        dup = (st.get("steps") or {}).get("duplicates") or {}
        counts = {"documents with exact duplicates": dup.get("docs_with_exact", 0),
                  "documents with near duplicates": dup.get("docs_with_near", 0)}
        settings = _pick(cfg, "pair_threshold", "cluster_thresholds", "tokenizers")
    return {"stage": stage, "source": source, "code_version": record.code_version,
            "counts": {k: int(v) for k, v in counts.items()}, "settings": settings}


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


def build_info(layout: Layout, resolved: Mapping[str, Any]) -> dict[str, Any]:
    """What the card tells of the whole build, from the stage records and the manifest (see card_build_info):
    documents fetched, the stage runs, code versions, the release path (relative). No stage key: after ingest
    they follow the fetch time, and the card of a refetch of the same bytes must not change."""
    source_ids = dedup_sources(layout)
    manifest = read_manifest(layout)
    runs = _stage_runs(layout, source_ids)
    versions = {stage: rec.code_version for stage, _, rec in runs} | {STAGE: CODE_VERSION}
    release_dir = layout.release(release_name(resolved))
    return {
        "fetched": sum(int(rec.stats.get("docs", 0)) for stage, _, rec in runs if stage == "ingest"),
        "steps": [_step(stage, sid, rec, manifest, resolved) for stage, sid, rec in runs],
        "code_versions": versions,
        "release_path": release_dir.relative_to(layout.root).as_posix(),
        "ledger_sha256": sha256_file(layout.ledger) if layout.ledger.is_file() else "",
    }


def release_kwargs(layout: Layout, resolved: Mapping[str, Any]) -> dict[str, Any]:
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
        "out_dir": layout.release(release_name(resolved)),
        "settings": resolved["release"],
        "tokenize_cfg": resolved["tokenize"],
        "sources": [ledger[sid] for sid in source_ids],
        "token_counts": counts,
        "doc_info": _document_info(layout, source_ids),
        "selection_excluded": ingest_driver.selection_counts(layout, source_ids),
        "workers": resolved["workers"],
        "build": build_info(layout, resolved),
    }


def release_key(layout: Layout, resolved: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
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
        "sources": [[sid, ledger.get(sid), ingest_driver.raw_parts(layout, sid)[2].key, clean_record(layout, sid).key]
                    for sid in source_ids],
        "stages": [[stage, sid, rec.key] for stage, sid, rec in _stage_runs(layout, source_ids)],
    }
    settings = {"release": output_settings(resolved, "release"), "tokenize": output_settings(resolved, "tokenize")}
    return stage_key(STAGE, CODE_VERSION, inputs, settings), inputs


@records.locked(lambda a: "release")
def run_release_stage(layout: Layout, resolved: Mapping[str, Any]) -> dict[str, Any]:
    """Build the release folder unless its key is unchanged; returns build_release's stats plus cached and key."""
    key, inputs = release_key(layout, resolved)
    folder = layout.stage(STAGE)
    done = records.cached(folder, key)
    if done is not None and units_path(layout, key).is_file():  # the rebuild check needs the units too
        return {**done.stats, "cached": True, "key": key}
    records.begin(folder)
    verified_shards(layout)  # the shards build_release reads, checked against the publish record
    kwargs = release_kwargs(layout, resolved)
    out = Path(kwargs["out_dir"])
    records.begin(out.parent)
    stats = build_release(**kwargs, units_file=units_path(layout, key))
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    stats = json.loads(json.dumps(stats, default=str))
    records.commit(folder, StageRecord(
        stage=STAGE, key=key, code_version=CODE_VERSION, inputs=inputs, settings=output_settings(resolved, "release"),
        output_dir=os.path.relpath(out, folder), outputs=records.describe_outputs(out, names), files={"release": names},
        stats=stats,
    ))
    return {**stats, "cached": False, "key": key}


def release_checks(layout: Layout, resolved: Mapping[str, Any]) -> dict[str, CheckReport]:
    """The blocking checks of the built release, as CheckReports by name."""
    out = layout.release(release_name(resolved))
    return {name: _report(r) for name, r in check_release(out, resolved["release"]).items()}


def units_path(layout: Layout, key: str) -> Path:
    """Where the build under `key` records its units (the stage's key folder)."""
    return layout.stage(STAGE) / key / UNITS_NAME


def release_rebuild_check(layout: Layout, resolved: Mapping[str, Any]) -> CheckReport:
    """Rebuild with another worker count and compare bytes: a seeded sample of units and output files, the
    plan, README.md and _RELEASE.json (`release.rebuild_check_units`, seeded by the stage key), or with 0
    everything into a temp folder (see check_rebuild_sample)."""
    kwargs = release_kwargs(layout, resolved)
    other = 2 if resolved["workers"] == 1 else 1
    sample = int(resolved["release"]["rebuild_check_units"])
    record = records.require_record(layout.stage(STAGE), STAGE)
    units = record.stats.get("units") or {}
    report = _report(check_rebuild_sample(kwargs["out_dir"], kwargs, other, units_path(layout, record.key),
                                          units.get("sha256"), sample, record.key))
    report.metadata["rebuild_workers"] = other
    return report


def _report(result: Mapping[str, Any]) -> CheckReport:
    report = CheckReport(metadata={k: v for k, v in result.get("metadata", {}).items() if isinstance(v, int | float | str)})
    return report.extend([str(p) for p in result.get("problems", [])])
