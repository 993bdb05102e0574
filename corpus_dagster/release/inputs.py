"""What the release reads before it plans: the published shards' small columns, their manifest, reusable
token counts, per-document extras (doc_info) and the ledger's facts by source."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.errors import ReleaseError
from corpus_dagster.core.settings import ReleaseSettings, TokenizeSettings
from corpus_dagster.ingest import driver as ingest_driver
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.ids import row_ids
from corpus_dagster.release.jobs import tokenizer

MANIFEST_NAME = "_MANIFEST.json"
TOKENS_MANIFEST_NAME = "_TOKENS.json"
SHARD_COLUMNS = ["id", "source_id", "url", "license_spdx", "lang", "n_chars", "sha256"]
# doc_info columns with a fixed meaning; any other column is a kept source field (into metadata)
INFO_COLUMNS = ("id", "fetched_at", "repairs", "cleaned", "source_file")


def release_tokenizer_cfg(settings: ReleaseSettings, tokenize_cfg: TokenizeSettings) -> dict[str, Any]:
    """The tokenize section with the release's tokenizer overrides (non-null keys) applied, as a dict: the
    tokenizer's identity, which keys the per-process tokenizer cache and travels to the counting jobs."""
    cfg = tokenize_cfg.to_dict()
    for key, value in (settings.tokenizer.to_dict() if settings.tokenizer is not None else {}).items():
        if value is not None:
            cfg[key] = value
    return cfg


def read_shard_manifest(shards_dir: Path) -> dict[str, Any]:
    """The published shards' _MANIFEST.json (the release's document count, version and shard list)."""
    path = shards_dir / MANIFEST_NAME
    if not path.is_file():
        raise ReleaseError(f"{path}: shard manifest not found; materialize the shards (publish) first")
    return json.loads(path.read_text(encoding="utf-8"))


def read_docs(shards_dir: Path, manifest: Mapping[str, Any]) -> tuple[pl.DataFrame, list[Path]]:
    """The small columns of every shard (no texts: those are read once, when scattered), with each row's
    shard and row number, and the shard paths in manifest order."""
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


def doc_info_frames(doc_info: Sequence[Path | str | pa.Table]) -> list[pl.DataFrame]:
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


def source_facts(sources: Sequence[Any]) -> dict[str, dict[str, Any]]:
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
            "urls": [ingest_driver.normalize_url(u) for u in get("urls") or ()],
            "id_field": get("id_field"),
            "description": get("description") or "",
            "homepage": get("homepage"),
            "date_field": get("date_field"),
        }
    return out


def with_row_ids(docs: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]],
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


@dataclass
class Inputs:
    """Everything a build and its sampled rebuild check plan from, read once."""

    manifest: dict[str, Any]
    cfg: dict[str, Any]
    tok: Any
    facts: dict[str, dict[str, Any]]
    docs: pl.DataFrame  # one row per published document; n_tokens null where no count is reusable
    paths: list[Path]
    counts_note: str
    buckets: Buckets
    info: list[pl.DataFrame]  # per-document extras (doc_info), grouped by column set


def read_inputs(shards_dir: Path, settings: ReleaseSettings, tokenize_cfg: TokenizeSettings, sources: Sequence[Any],
                token_counts: str | Path | None, doc_info: Sequence[str | Path | pa.Table] = ()) -> Inputs:
    """The release's inputs: every published document with its row id and its reusable token count (or
    null), the ledger facts of its source, the kept fields; fails on an empty corpus or an unknown source."""
    buckets = Buckets.from_settings(settings)
    manifest = read_shard_manifest(shards_dir)
    cfg = release_tokenizer_cfg(settings, tokenize_cfg)
    tok = tokenizer(cfg)
    facts = source_facts(sources)
    docs, paths = read_docs(shards_dir, manifest)
    if docs.height == 0:
        raise ReleaseError(f"{shards_dir}: the shards hold no documents; nothing to release")
    unknown = sorted(set(docs["source_id"].unique().to_list()) - set(facts))
    if unknown:
        raise ReleaseError(f"{shards_dir}: sources {unknown} are in the shards but not in the ledger rows given")
    info = doc_info_frames(doc_info)
    docs = with_row_ids(docs, facts, info)
    counts, counts_note = reusable_counts(Path(token_counts) if token_counts else None, tok)
    if counts is not None:
        docs = docs.join(counts, on="id", how="left")
    else:
        docs = docs.with_columns(pl.lit(None, dtype=pl.Int32).alias("n_tokens"))
    return Inputs(manifest, cfg, tok, facts, docs, paths, counts_note, buckets, info)

