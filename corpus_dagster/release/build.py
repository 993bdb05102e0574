"""The release build: published shards -> release/<name>/<version>/.

Steps (each timed in the returned stats):
1. read: small columns of every shard (ids, sources, hashes, urls), token counts, per-document extras;
2. tokenize: documents without a reusable count (only when the token streams' tokenizer differs);
3. segment: documents over max_tokens, per shard in worker processes;
4. plan: buckets, exact duplicates, caps, shuffle, parts (ids and lengths only);
5. scatter: each shard's selected texts once into a spill file with one record batch per part;
6. write: each part from its spill batches (a worker holds one part);
7. card: statistics, figures, README.md, _RELEASE.json.
The folder appears whole (temp folder, then rename). Output bytes depend on the seed and the inputs only.
A build and its sampled rebuild check (rebuild.py) run the same phases through the functions here.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.atomic import atomic_dir, atomic_write_bytes
from corpus_dagster.core.doc_keys import positional_url
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.settings import ReleaseSettings, Settings, TokenizeSettings
from corpus_dagster.release import card as card_mod
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.card_info import card_build_info, cleaning_rows, release_info
from corpus_dagster.release.created import (
    created_bytes,
    dates_from_field,
    read_created,
    stable_created_at,
    write_created,
)
from corpus_dagster.release.ids import file_key, release_id
from corpus_dagster.release.inputs import Inputs, read_inputs
from corpus_dagster.release.jobs import (
    SEGMENT_SCHEMA,
    count_job,
    scatter_job,
    segment_job,
    write_job,
)
from corpus_dagster.release.plan import parts_of, plan_release, room_by_source, summary_frame
from corpus_dagster.release.reproduce import write_reproduce
from corpus_dagster.release.rows import metadata_json
from corpus_dagster.release.stats import data_stats
from corpus_dagster.release.units import (
    segment_batches,
    uncounted_rows,
    unit_line,
    unit_record,
    with_counts,
    work_units,
)

STATS_NAME = "_RELEASE.json"
_ROW_SUFFIX = re.compile(r"#[0-9]+$")  # the line (JSON Lines) or row (Parquet) ingest appends to a file URL


def plan_build(inp: Inputs, docs: pl.DataFrame, units: Sequence[Mapping[str, Any]], settings: ReleaseSettings,
               doc_info: Sequence[str | Path | pa.Table], created: pl.DataFrame | None = None,
               ) -> tuple[pl.DataFrame, dict[str, Any], list[tuple[int, int, int]]]:
    """The plan (with gpart and seq), its counts and the parts, from counted docs and units. `created`: the
    created_at kept per content hash by earlier builds (created.read_created), which wins over the row's own."""
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
    plan = attach_metadata(plan, inp.facts, inp.info, settings)
    plan = dates_from_field(plan, inp.facts)
    if created is not None:
        plan, _ = stable_created_at(plan, created)
    parts = parts_of(plan)
    gpart_of = pl.DataFrame(
        {"bucket": [b for b, _, _ in parts], "part": [p for _, p, _ in parts], "gpart": list(range(len(parts)))},
        schema={"bucket": plan.schema["bucket"], "part": plan.schema["part"], "gpart": pl.Int64},
    )
    plan = plan.join(gpart_of, on=["bucket", "part"], how="left", maintain_order="left").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("seq")
    )
    return plan, plan_counts, parts


def part_path(buckets: Buckets, bucket: int, part: int) -> str:
    """A part file's path relative to the release folder."""
    return f"data/{buckets.folder(bucket)}/part-{part:05d}.parquet"


def scatter_write(plan: pl.DataFrame, parts: Sequence[tuple[int, int, int]], inp: Inputs,
                  settings: ReleaseSettings, spill_dir: Path, out: Path, workers: int,
                  only: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], float, float]:
    """Write the parts (all, or the global part indexes `only`) under `out`; returns their files entries
    (path, rows, sha256) in part order and the scatter and write seconds. The scatter jobs read their
    shards' row groups."""
    t = time.perf_counter()
    chosen = plan if only is None else plan.filter(pl.col("gpart").is_in(list(only)))
    by_shard = chosen.sort("shard", "gpart", "row").partition_by("shard", as_dict=True, maintain_order=True)
    jobs = []
    for (s, *_), g in by_shard.items():
        rows = g["shard_row"].to_list()
        jobs.append((str(inp.paths[s]), str(spill_dir / f"s{int(s):05d}.arrow"), rows, g["char_start"].to_list(),
                     g["char_end"].to_list(), g["gpart"].to_list(), g["seq"].to_list()))
    spills: dict[int, list[tuple[str, int]]] = {}
    for job, index in zip(jobs, ordered_map(scatter_job, jobs, workers), strict=True):
        for gp, batches in index.items():
            spills.setdefault(gp, []).extend((job[1], batch) for batch in batches)
    scatter_s, t = time.perf_counter() - t, time.perf_counter()
    plan_cols = [c for c in chosen.columns if c not in ("content_sha256", "lang")]
    by_part = chosen.partition_by("gpart", as_dict=True)
    jobs = []
    for i in range(len(parts)) if only is None else sorted(only):
        b, p, _ = parts[i]
        part_plan = by_part[(i,)].sort("row").select(plan_cols).to_arrow()
        jobs.append((spills[i], part_plan, str(out / part_path(inp.buckets, b, p)), inp.tok.name,
                     int(settings.zstd_level)))
    files = [
        {"path": str(Path(job[2]).relative_to(out)), "rows": rows, "sha256": digest}
        for job, (rows, digest) in zip(jobs, ordered_map(write_job, jobs, workers), strict=True)
    ]
    return files, scatter_s, time.perf_counter() - t


def _no_machine_path(value: Any) -> Any:
    """A url or file of a local source reduced to its file name (and #line): the card names no folder of
    the machine that built it."""
    if isinstance(value, str) and (value.startswith(("file://", "/", "~")) or re.match(r"^[A-Za-z]:[\\/]", value)):
        return value.rstrip("/").rsplit("/", 1)[-1]
    return value


def example_row(inp: Inputs, plan: pl.DataFrame) -> dict[str, Any] | None:
    """The card's example: the first row of the first part (as the release has it; local paths in its
    metadata reduced to file names), its content read from its shard."""
    if plan.height == 0:
        return None
    row = plan.sort("gpart", "row").row(0, named=True)
    pf = pq.ParquetFile(inp.paths[row["shard"]])
    start = 0
    for rg in range(pf.metadata.num_row_groups):
        stop = start + pf.metadata.row_group(rg).num_rows
        if start <= row["shard_row"] < stop:
            text = pf.read_row_group(rg, columns=["text"]).column("text")[row["shard_row"] - start].as_py()
            break
        start = stop
    content = text[row["char_start"]:row["char_end"]]
    meta = json.loads(metadata_json(row))
    meta = {k: _no_machine_path(v) if k in ("url", "source_file") else v for k, v in meta.items()}
    # created_at by its day, as the card's build date: a refetch the same day gives the same card
    return {"id": row["id"], "created_at": row["created_at"].strftime("%Y-%m-%d"),
            "source_type": row["source_type"], "metadata": json.dumps(meta, ensure_ascii=False, separators=(",", ":")),
            "content": content[:card_mod.EXAMPLE_CHARS], "content_chars": len(content), "length": int(row["n_tokens"])}


def release_record(inp: Inputs, settings: ReleaseSettings, plan: pl.DataFrame, plan_counts: Mapping[str, Any],
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
    name = settings.name or inp.manifest["dataset"]
    info = release_info(name, inp.manifest["version"], inp.tok.name, plan, inp.facts, settings,
                        tokenizer_kind=inp.cfg.kind, tokenizer_sha256=inp.tok.vocab_sha256())
    info["example"] = example_row(inp, plan)
    info |= card_build_info(inp.manifest, build)
    cleaning = cleaning_rows(inp.manifest, selection_excluded or {}, plan_counts, no_segment, tails)
    return {"info": info, "cleaning": cleaning, "data": data, "files": files}


def record_bytes(record: Mapping[str, Any]) -> bytes:
    """_RELEASE.json's bytes: what the build writes and the sampled rebuild check compares."""
    return (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def build_release(
    *,
    shards_dir: str | Path,
    out_dir: str | Path,
    settings: ReleaseSettings,
    tokenize_cfg: TokenizeSettings,
    sources: Sequence[Any],
    token_counts: str | Path | None = None,
    doc_info: Sequence[str | Path | pa.Table] = (),
    selection_excluded: Mapping[str, int] | None = None,
    workers: int = 1,
    units_file: str | Path | None = None,
    build: Mapping[str, Any] | None = None,
    created_at_file: str | Path | None = None,
    reproduce_settings: Settings | None = None,
) -> dict[str, Any]:
    """Build release/<name>/<version>/ from the published shards; returns stats for the UI (see docs/release.md).

    With `units_file`, the units (runs of up to UNIT_DOCS documents of a shard with a token count the
    release computed or segments to cut: those counts and segments, one canonical JSON line each) are
    written there too, for the sampled rebuild check (`rebuild.check_rebuild_sample`); stats["units"] holds its sha256.
    `build` (see `driver.build_info`): the stage runs and counts of the corpus build, for the card's headline,
    Construction and Reproduce sections; without it the card has the manifest's counts and the release alone.
    `created_at_file` (release/<name>/_CREATED_AT.parquet): the created_at of every content an earlier build
    released, reused for the same content and extended with this build's new ones (see release.created).
    `reproduce_settings` (the build's settings, whose resolved config it ships): the release folder then ships reproduce/ (release.reproduce)."""
    shards_dir, out_dir = Path(shards_dir), Path(out_dir)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    inp = read_inputs(shards_dir, settings, tokenize_cfg, sources, token_counts, doc_info)
    buckets, cfg = inp.buckets, inp.cfg
    seconds["read"] = time.perf_counter() - t

    # 2. tokenize documents without a count
    t = time.perf_counter()
    counted: dict[int, dict[int, int]] = {}
    tok_seconds, tok_bytes, n_tokenized = 0.0, 0, 0
    uncounted = uncounted_rows(inp.docs)
    jobs = [(str(inp.paths[s]), rows, cfg) for s, rows in uncounted]
    for (s, rows), (cnts, secs, nbytes) in zip(uncounted, ordered_map(count_job, jobs, workers), strict=True):
        counted[s] = dict(zip(rows, cnts, strict=True))
        tok_seconds += secs
        tok_bytes += nbytes
        n_tokenized += len(cnts)
    docs = with_counts(inp.docs, counted)
    seconds["tokenize_documents"] = time.perf_counter() - t

    # 3. segment documents over max_tokens: one job per shard, one result per unit
    t = time.perf_counter()
    room = room_by_source(docs, buckets, settings)
    work = work_units(docs, counted, buckets)
    batches = segment_batches(docs, work, buckets, room)
    shards = sorted({s for s, _ in work})
    jobs = [(str(inp.paths[s]), [b for (us, _), b in zip(work, batches, strict=True) if us == s], settings, cfg)
            for s in shards]
    results = []
    seg_seconds, seg_bytes = 0.0, 0
    for res in ordered_map(segment_job, jobs, workers):
        results += res["batches"]
        seg_seconds += res["seconds"]
        seg_bytes += res["bytes"]
    units = [unit_record(s, rows, counted.get(s, {}), seg) for (s, rows), seg in zip(work, results, strict=True)]
    units_stats = None
    if units_file is not None:
        body = b"".join(unit_line(u) for u in units)
        atomic_write_bytes(units_file, body)
        units_stats = {"file": str(units_file), "sha256": hashlib.sha256(body).hexdigest(), "units": len(units)}
    seconds["segment"] = time.perf_counter() - t

    # 4. plan
    t = time.perf_counter()
    kept_created = read_created(created_at_file) if created_at_file is not None else None
    plan, plan_counts, parts = plan_build(inp, docs, units, settings, doc_info, kept_created)
    seconds["plan"] = time.perf_counter() - t

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}.spill-") as spill_dir, atomic_dir(out_dir) as tmp:
        # 5. scatter, 6. write parts
        files, seconds["scatter"], seconds["write"] = scatter_write(
            plan, parts, inp, settings, Path(spill_dir), tmp, workers)

        # 7. statistics, figures, card
        t = time.perf_counter()
        record = release_record(inp, settings, plan, plan_counts, units, selection_excluded, files, build)
        write_card(tmp, record)
        if reproduce_settings is not None:
            rows = [s.to_json() if hasattr(s, "to_json") else dict(s) for s in sources]
            write_reproduce(tmp, reproduce_settings, rows, created_bytes(plan))
        (tmp / STATS_NAME).write_bytes(record_bytes(record))
        seconds["card"] = time.perf_counter() - t
    if created_at_file is not None and kept_created is not None:
        new = plan.select("content_sha256", "created_at").join(kept_created, on="content_sha256", how="anti")
        write_created(created_at_file, kept_created, new)  # after the release folder is in place
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


def source_files(source_ids: Sequence[str], urls: Sequence[str | None], facts: Mapping[str, Mapping[str, Any]]) -> list[str | None]:
    """Each document's file relative to the fixed part of the ledger URL (glob) that names it, as the release
    ids' file names are (`ids.file_key`); None for a source with a `url_field` (its url names no file)."""
    cache: dict[tuple[str, str], str] = {}
    out: list[str | None] = []
    for sid, url in zip(source_ids, urls, strict=True):
        f = facts[sid]
        if f.get("url_field") or url is None:
            out.append(None)
            continue
        file_url = url if f.get("format") == "text" else _ROW_SUFFIX.sub("", url)
        if (sid, file_url) not in cache:
            cache[(sid, file_url)] = file_key(file_url, [str(u) for u in f.get("urls") or ()])
        out.append(cache[(sid, file_url)])
    return out


def published_urls(source_ids: Sequence[str], urls: Sequence[str | None], facts: Mapping[str, Mapping[str, Any]]) -> list[str | None]:
    """The url a release row shows: a `url_field` source's own value; None for other sources and for a record
    that had no url (ingest then wrote its file position, a path of the build machine)."""
    return [url if facts[sid].get("url_field") and not positional_url(url, facts[sid].get("urls") or ()) else None
            for sid, url in zip(source_ids, urls, strict=True)]


def attach_metadata(
    plan: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]], info_frames: list[pl.DataFrame], settings: ReleaseSettings
) -> pl.DataFrame:
    """Columns the rows need beyond the plan: created_at, cleaned, kept (JSON of the kept fields), title,
    source_type, source_file, url (only a `url_field` source's) and parent_id, from the one document info
    frame (every source's rows, whatever fields each keeps)."""
    wanted = {"fetched_at": pl.Datetime("us", "UTC"), "cleaned": pl.List(pl.String), "kept": pl.String, "title": pl.String}
    info = info_frames[0] if info_frames else pl.DataFrame(schema={"doc_id": pl.String})
    present = [c for c in wanted if c in info.columns and c not in plan.columns]
    plan = plan.join(info.select("doc_id", *present), on="doc_id", how="left", maintain_order="left")
    plan = plan.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in wanted.items() if c not in plan.columns)
    fallback = datetime.fromisoformat(settings.created_at_fallback.replace("Z", "+00:00")).astimezone(UTC)
    hub = {sid: f.get("hub_dataset") or sid for sid, f in facts.items()}
    plan = plan.with_columns(
        pl.col("fetched_at").fill_null(pl.lit(fallback).cast(pl.Datetime("us", "UTC"))).alias("created_at"),
        pl.col("source_id").replace_strict(hub, return_dtype=pl.String).alias("source_type"),
        pl.Series("source_file", source_files(plan["source_id"].to_list(), plan["url"].to_list(), facts), dtype=pl.String),
        pl.Series("url", published_urls(plan["source_id"].to_list(), plan["url"].to_list(), facts), dtype=pl.String),
        pl.Series("parent_id", [release_id(d) for d in plan["row_id"].to_list()], dtype=pl.String),
    ).drop("row_id", "fetched_at")
    return plan


def write_card(folder: Path, record: Mapping[str, Any], figures: Collection[str] | None = None) -> None:
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

