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
import json
import os
import random
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import CorpusError, ReleaseError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import ParquetSettings, write_parquet
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.dedup.driver import dedup_sources
from corpus_dagster.ingest import driver as ingest_driver
from corpus_dagster.release import card as card_mod
from corpus_dagster.release import checks
from corpus_dagster.release import figures as fig_mod
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.ids import release_id
from corpus_dagster.release.plan import parts_of, plan_release, room_by_source, summary_frame
from corpus_dagster.release.rows import length_column, part_table
from corpus_dagster.release.segment import segment_text
from corpus_dagster.release.stats import data_stats
from corpus_dagster.tokenize.driver import token_counts_file

STATS_NAME = "_RELEASE.json"
MANIFEST_NAME = "_MANIFEST.json"
TOKENS_MANIFEST_NAME = "_TOKENS.json"
SHARD_COLUMNS = ["id", "source_id", "url", "license_spdx", "lang", "n_chars", "sha256"]
# doc_info columns with a fixed meaning; any other column is a kept source field (into metadata)
INFO_COLUMNS = ("id", "fetched_at", "repairs", "cleaned", "source_file")
SPILL_OPTIONS = ipc.IpcWriteOptions(compression="lz4")



# ---------------------------------------------------------------- tokenizer


def release_tokenizer_cfg(settings: Mapping[str, Any], tokenize_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The tokenize section with the release's tokenizer overrides (non-null keys) applied."""
    cfg = dict(tokenize_cfg)
    for key, value in (settings.get("tokenizer") or {}).items():
        if value is not None:
            cfg[key] = value
    return cfg


_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(cfg: Mapping[str, Any]) -> Any:
    """The plain text encoder (no special tokens), built once per process."""
    from corpus_dagster.tokenize.tokenizer import HFTokenizer, TiktokenTokenizer, TokenizerLoadError

    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _TOKENIZERS:
        if cfg["kind"] == "tiktoken":
            _TOKENIZERS[key] = TiktokenTokenizer(cfg["encoding"], engine=cfg.get("engine", "auto"), name=cfg.get("name"))
        elif cfg["kind"] == "huggingface":
            if not cfg.get("path"):
                raise TokenizerLoadError("release tokenizer kind is 'huggingface' but no path is set")
            _TOKENIZERS[key] = HFTokenizer(cfg["path"], name=cfg.get("name"))
        else:
            raise TokenizerLoadError(f"unknown tokenizer kind {cfg['kind']!r}")
    return _TOKENIZERS[key]


def _count(cfg: Mapping[str, Any], texts: Sequence[str]) -> list[int]:
    return [len(ids) for ids in _tokenizer(cfg).encode_texts(list(texts))]


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
        }
    return out


# ---------------------------------------------------------------- worker jobs


def _count_job(path: str, rows: list[int], cfg: dict[str, Any]) -> tuple[list[int], float, int]:
    texts = pq.read_table(path, columns=["text"])["text"].take(rows).to_pylist()
    t0 = time.perf_counter()
    counts = _count(cfg, texts)
    return counts, time.perf_counter() - t0, sum(len(t.encode("utf-8")) for t in texts)


def _segment_job(
    path: str, rows: list[int], n_tokens: list[int], doc_ids: list[str], rooms: list[list[bool]],
    settings: dict[str, Any], cfg: dict[str, Any],
) -> dict[str, Any]:
    buckets = Buckets.from_settings(settings)
    tok = _tokenizer(cfg)
    texts = pq.read_table(path, columns=["text"])["text"].take(rows).to_pylist()
    stats = {"seconds": 0.0, "bytes": 0}

    def count(s: str) -> int:
        t0 = time.perf_counter()
        n = len(tok.encode_texts([s])[0])
        stats["seconds"] += time.perf_counter() - t0
        stats["bytes"] += len(s.encode("utf-8"))
        return n

    out: dict[str, list[Any]] = {k: [] for k in ("doc_id", "segment", "char_start", "char_end", "n_tokens", "content_sha256")}
    reasons: dict[str, int] = {}
    tails = 0
    for text, n, doc_id, room in zip(texts, n_tokens, doc_ids, rooms, strict=True):
        rng = random.Random(f"{settings['seed']}:segment:{doc_id}")
        seg = segment_text(text, n, count, buckets, int(settings["max_segments"]), room, rng)
        if not seg.spans:
            reasons[seg.stop_reason] = reasons.get(seg.stop_reason, 0) + 1
        elif seg.dropped_chars:
            tails += 1
        for j, ((a, b), t) in enumerate(zip(seg.spans, seg.tokens, strict=True)):
            out["doc_id"].append(doc_id)
            out["segment"].append(j)
            out["char_start"].append(a)
            out["char_end"].append(b)
            out["n_tokens"].append(t)
            out["content_sha256"].append(hashlib.sha256(text[a:b].encode("utf-8")).digest())
    return {"rows": out, "no_segment": reasons, "tails_dropped": tails, **stats}


def _scatter_job(
    path: str, spill: str, rows: list[int], starts: list[int], ends: list[int], gparts: list[int], seqs: list[int]
) -> dict[int, int]:
    """Write the selected texts of one shard, one record batch per part; returns part -> batch index."""
    index: dict[int, int] = {}
    order = np.lexsort((np.asarray(seqs), np.asarray(gparts)))
    # one take for the whole shard, in spill order (a take per part re-gathers the column's chunks each time)
    selected = pq.read_table(path, columns=["text"])["text"].take(pa.array(np.asarray(rows)[order])).to_pylist()
    schema = pa.schema([("key", pa.int64()), ("content", pa.string())])
    with ipc.new_file(spill, schema, options=SPILL_OPTIONS) as w:
        gp = np.asarray(gparts)[order]
        cuts = np.flatnonzero(np.diff(gp)) + 1
        for chunk, first in zip(np.split(order, cuts), [0, *cuts.tolist()], strict=True):
            if not len(chunk):
                continue
            sel = selected[first:first + len(chunk)]
            contents = [
                t if starts[i] == 0 and ends[i] == len(t) else t[starts[i]:ends[i]]
                for t, i in zip(sel, chunk, strict=True)
            ]
            keys = [seqs[i] for i in chunk]
            index[int(gparts[chunk[0]])] = len(index)
            w.write_batch(pa.record_batch([pa.array(keys, pa.int64()), pa.array(contents, pa.string())], schema=schema))
    return index


def _write_job(
    spills: list[tuple[str, int]], plan_part: pa.Table, out: str, tokenizer_name: str,
    keep_fields: list[str], zstd_level: int,
) -> tuple[int, str]:
    """Assemble one part from its spill batches and write it with fixed Parquet settings."""
    plan = pl.from_arrow(plan_part)
    found: dict[int, str] = {}
    for spill, batch in spills:
        with ipc.open_file(spill) as r:
            b = r.get_batch(batch)
        found.update(zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True))
    contents = [found[k] for k in plan["seq"].to_list()]
    table = part_table(plan, contents, tokenizer_name, keep_fields)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    settings = ParquetSettings(compression_level=zstd_level, use_dictionary=("source_type",))
    write_parquet(table, out, settings, row_groups=[0, table.num_rows])
    return table.num_rows, sha256_file(out)


# ---------------------------------------------------------------- build


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
) -> dict[str, Any]:
    """Build release/<name>/<version>/ from the published shards; returns stats for the UI (see docs/release.md)."""
    settings = dict(settings)
    shards_dir, out_dir = Path(shards_dir), Path(out_dir)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    buckets = Buckets.from_settings(settings)
    manifest = _read_manifest(shards_dir)
    cfg = release_tokenizer_cfg(settings, tokenize_cfg)
    tok = _tokenizer(cfg)
    facts = _source_facts(sources)
    docs, paths = _read_docs(shards_dir, manifest)
    if docs.height == 0:
        raise ReleaseError(f"{shards_dir}: the shards hold no documents; nothing to release")
    unknown = sorted(set(docs["source_id"].unique().to_list()) - set(facts))
    if unknown:
        raise ReleaseError(f"{shards_dir}: sources {unknown} are in the shards but not in the ledger rows given")
    counts, counts_note = reusable_counts(Path(token_counts) if token_counts else None, tok)
    if counts is not None:
        docs = docs.join(counts, on="id", how="left")
    else:
        docs = docs.with_columns(pl.lit(None, dtype=pl.Int32).alias("n_tokens"))
    seconds["read"] = time.perf_counter() - t

    # 2. tokenize documents without a count
    t = time.perf_counter()
    tok_seconds, tok_bytes, n_tokenized = 0.0, 0, 0
    missing = docs.filter(pl.col("n_tokens").is_null())
    if missing.height:
        jobs = [
            (str(paths[s]), g["shard_row"].to_list(), cfg)
            for (s,), g in missing.group_by(["shard"], maintain_order=True)
        ]
        shard_ids = [int(s) for (s,), _ in missing.group_by(["shard"], maintain_order=True)]
        filled = []
        for s, job, (cnts, secs, nbytes) in zip(shard_ids, jobs, ordered_map(_count_job, jobs, workers), strict=True):
            filled.append(pl.DataFrame({"shard": [s] * len(cnts), "shard_row": job[1], "n_new": cnts},
                                       schema={"shard": pl.Int32, "shard_row": pl.Int32, "n_new": pl.Int32}))
            tok_seconds += secs
            tok_bytes += nbytes
            n_tokenized += len(cnts)
        docs = docs.join(pl.concat(filled), on=["shard", "shard_row"], how="left").with_columns(
            pl.coalesce("n_tokens", "n_new").alias("n_tokens")
        ).drop("n_new")
    seconds["tokenize_documents"] = time.perf_counter() - t

    # 3. segment documents over max_tokens
    t = time.perf_counter()
    room = room_by_source(docs, buckets, settings)
    long = docs.filter(pl.col("n_tokens") > buckets.max_tokens).sort("shard", "shard_row")
    seg_frames, no_segment, tails, seg_seconds, seg_bytes = [], {}, 0, 0.0, 0
    if long.height:
        groups = list(long.group_by(["shard"], maintain_order=True))
        jobs = [
            (str(paths[int(s)]), g["shard_row"].to_list(), g["n_tokens"].to_list(), g["id"].to_list(),
             [room[sid] for sid in g["source_id"].to_list()], settings, cfg)
            for (s,), g in groups
        ]
        for res in ordered_map(_segment_job, jobs, workers):
            seg_frames.append(pl.DataFrame(res["rows"], schema={
                "doc_id": pl.String, "segment": pl.Int32, "char_start": pl.Int64, "char_end": pl.Int64,
                "n_tokens": pl.Int32, "content_sha256": pl.Binary}))
            for k, v in res["no_segment"].items():
                no_segment[k] = no_segment.get(k, 0) + v
            tails += res["tails_dropped"]
            seg_seconds += res["seconds"]
            seg_bytes += res["bytes"]
    seconds["segment"] = time.perf_counter() - t

    # 4. plan
    t = time.perf_counter()
    doc_cols = ["id", "source_id", "url", "license_spdx", "lang", "shard", "shard_row"] + (
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
    if seg_frames:
        segs = pl.concat(seg_frames).join(docs.select(doc_cols).rename({"id": "doc_id"}), on="doc_id", how="left")
        cands = pl.concat([whole, segs.select(whole.columns)], how="vertical_relaxed")
    plan, plan_counts = plan_release(cands, buckets, settings)
    plan, keep_fields = _attach_metadata(plan, facts, _doc_info(doc_info), settings)
    seconds["plan"] = time.perf_counter() - t

    name = settings.get("name") or manifest["dataset"]
    version = manifest["version"]
    parts = parts_of(plan)
    gpart_of = pl.DataFrame(
        {"bucket": [b for b, _, _ in parts], "part": [p for _, p, _ in parts], "gpart": list(range(len(parts)))},
        schema={"bucket": plan.schema["bucket"], "part": plan.schema["part"], "gpart": pl.Int64},
    )
    plan = plan.join(gpart_of, on=["bucket", "part"], how="left", maintain_order="left").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("seq")
    )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    files: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}.spill-") as spill_dir, atomic_dir(out_dir) as tmp:
        # 5. scatter
        t = time.perf_counter()
        by_shard = plan.sort("shard", "gpart", "row").partition_by("shard", as_dict=True, maintain_order=True)
        jobs = [
            (str(paths[int(s[0])]), str(Path(spill_dir) / f"s{int(s[0]):05d}.arrow"), g["shard_row"].to_list(),
             g["char_start"].to_list(), g["char_end"].to_list(), g["gpart"].to_list(), g["seq"].to_list())
            for s, g in by_shard.items()
        ]
        spills: dict[int, list[tuple[str, int]]] = {}
        for job, index in zip(jobs, ordered_map(_scatter_job, jobs, workers), strict=True):
            for gp, batch in index.items():
                spills.setdefault(gp, []).append((job[1], batch))
        seconds["scatter"] = time.perf_counter() - t

        # 6. write parts
        t = time.perf_counter()
        plan_cols = [c for c in plan.columns if c not in ("content_sha256", "lang")]
        jobs = []
        by_part = plan.partition_by("gpart", as_dict=True)
        for i, (b, p, _) in enumerate(parts):
            rel = f"data/{buckets.folder(b)}/part-{p:05d}.parquet"
            part_plan = by_part[(i,)].sort("row").select(plan_cols).to_arrow()
            jobs.append((spills[i], part_plan, str(tmp / rel), tok.name, keep_fields, int(settings["zstd_level"])))
        for job, (rows, digest) in zip(jobs, ordered_map(_write_job, jobs, workers), strict=True):
            files.append({"path": str(Path(job[2]).relative_to(tmp)), "rows": rows, "sha256": digest})
        seconds["write"] = time.perf_counter() - t

        # 7. statistics, figures, card
        t = time.perf_counter()
        summary = summary_frame(plan["bucket"].to_numpy(), plan["source_id"], plan["n_tokens"].to_numpy(),
                                (plan["segment"] >= 0).to_numpy())
        data = data_stats(summary, buckets, facts)
        info = _card_info(name, version, tok.name, plan, facts, settings)
        cleaning = cleaning_rows(manifest, selection_excluded or {}, plan_counts, no_segment, tails)
        record = {"info": info, "cleaning": cleaning, "data": data, "files": files}
        _write_card(tmp, record)
        (tmp / STATS_NAME).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        seconds["card"] = time.perf_counter() - t
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
        "counts_reused": counts_note,
        "documents_tokenized": n_tokenized,
        "tokenize_documents": {"seconds": round(tok_seconds, 3), "mb": round(tok_bytes / 1e6, 3)},
        "tokenize_segments": {"seconds": round(seg_seconds, 3), "mb": round(seg_bytes / 1e6, 3)},
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "headline": card_mod.headline_rows(info, data, cleaning),
        "files": files,
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
        pl.Series("parent_id", [release_id(d) for d in plan["doc_id"].to_list()], dtype=pl.String),
    )
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


def _write_card(folder: Path, record: Mapping[str, Any]) -> None:
    """README.md and the figures, from the statistics record alone."""
    info, data, cleaning = record["info"], record["data"], record["cleaning"]
    assets = folder / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    mix = fig_mod.mix_shares(
        [(b["bucket"], sid, n) for b in data["buckets"] for sid, n in b.get("source_docs", [])], len(data["buckets"])
    )
    pngs = {
        "docs_per_bucket.png": fig_mod.docs_per_bucket(data, info["tokenizer"]),
        "tokens_by_source.png": fig_mod.tokens_by_source(data, info["tokenizer"]),
        "source_mix.png": fig_mod.source_mix(data, mix, info["tokenizer"]),
    }
    for fname, body in pngs.items():
        (assets / fname).write_bytes(body)
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
        kwargs = dict(build_kwargs) | {"out_dir": Path(tmp) / "release", "workers": workers}
        build_release(**kwargs)
        return checks.check_identical(file_hashes(release_dir), file_hashes(Path(tmp) / "release"))


# --- The stage as the Dagster layer runs it: inputs from the other drivers, a content-keyed stage record -----

STAGE = "release"
CODE_VERSION = "1"


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
    }


def release_key(layout: Layout, resolved: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, inputs): the published manifest, token counts, ledger facts, ingest and clean keys, release settings."""
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
    }
    settings = {"release": output_settings(resolved, "release"), "tokenize": output_settings(resolved, "tokenize")}
    return stage_key(STAGE, CODE_VERSION, inputs, settings), inputs


@records.locked(lambda a: "release")
def run_release_stage(layout: Layout, resolved: Mapping[str, Any]) -> dict[str, Any]:
    """Build the release folder unless its key is unchanged; returns build_release's stats plus cached and key."""
    key, inputs = release_key(layout, resolved)
    folder = layout.stage(STAGE)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    records.begin(folder)
    kwargs = release_kwargs(layout, resolved)
    out = Path(kwargs["out_dir"])
    records.begin(out.parent)
    stats = build_release(**kwargs)
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


def release_rebuild_check(layout: Layout, resolved: Mapping[str, Any]) -> CheckReport:
    """Rebuild with another worker count into a temp folder: every file, the card included, byte-identical."""
    kwargs = release_kwargs(layout, resolved)
    other = 2 if resolved["workers"] == 1 else 1
    report = _report(check_rebuild(kwargs["out_dir"], kwargs, other))
    report.metadata["rebuild_workers"] = other
    return report


def _report(result: Mapping[str, Any]) -> CheckReport:
    report = CheckReport(metadata={k: v for k, v in result.get("metadata", {}).items() if isinstance(v, int | float | str)})
    return report.extend([str(p) for p in result.get("problems", [])])
