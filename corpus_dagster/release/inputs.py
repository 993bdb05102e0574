"""What the release reads before it plans: the published shards' small columns, their manifest, reusable
token counts, per-document extras (doc_info) and the ledger's facts by source."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.doc_keys import stable_keys
from corpus_dagster.core.documents import INFO_COLUMNS as DOCUMENT_INFO_COLUMNS
from corpus_dagster.core.documents import INFO_DOC_ID, INFO_FETCHED_AT
from corpus_dagster.core.errors import ReleaseError
from corpus_dagster.core.settings import ReleaseSettings, TokenizeSettings
from corpus_dagster.ingest import outputs as ingest_outputs
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.jobs import tokenizer

MANIFEST_NAME = "_MANIFEST.json"
TOKENS_MANIFEST_NAME = "_TOKENS.json"
SHARD_COLUMNS = ["id", "source_id", "url", "license_spdx", "lang", "n_chars", "sha256"]
# doc_info columns with a fixed meaning (ingest's document info plus the release's own); any other column is
# a kept source field (into metadata). The leading underscore keeps them apart from every source field name.
INFO_CLEANED = "_cleaned"  # list<string>: the text repairs clean applied
INFO_ROW_KEY = "_row_key"  # the document's stable key (core.doc_keys), which release ids hash
INFO_COLUMNS = (*DOCUMENT_INFO_COLUMNS, INFO_CLEANED, INFO_ROW_KEY)


def release_tokenizer_cfg(settings: ReleaseSettings, tokenize_cfg: TokenizeSettings) -> TokenizeSettings:
    """The tokenize section with the release's tokenizer overrides (non-null keys) applied: the tokenizer's
    identity, which keys the per-process tokenizer cache and travels to the counting jobs."""
    given = settings.tokenizer.to_dict() if settings.tokenizer is not None else {}
    return dataclasses.replace(tokenize_cfg, **{key: value for key, value in given.items() if value is not None})


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


def _kept_json(frame: pl.DataFrame, kept: Sequence[str]) -> pl.Series:
    """Per row, the kept source fields as one JSON object in ledger order, null values left out (None when
    every value is null): one column whatever fields a source keeps, so sources of different shapes stack."""
    columns = [frame[c].to_list() for c in kept]
    out = []
    for values in zip(*columns, strict=True) if columns else [()] * frame.height:
        obj = {k: v for k, v in zip(kept, values, strict=True) if v is not None}
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) if obj else None)
    return pl.Series("kept", out, dtype=pl.String)


def doc_info_frame(item: Path | str | pa.Table) -> pl.DataFrame:
    """One document info table (INFO_COLUMNS, then kept source fields by their own names) in the release's
    shape: doc_id, fetched_at (UTC datetime), cleaned, row_key, kept (JSON object) and title (a kept `title`)."""
    table = item if isinstance(item, pa.Table) else pq.read_table(item)
    if INFO_DOC_ID not in table.column_names:
        raise ReleaseError(f"doc_info table {item if not isinstance(item, pa.Table) else '(table)'} has no "
                           f"`{INFO_DOC_ID}` column")
    f = pl.from_arrow(table)
    assert isinstance(f, pl.DataFrame)
    kept = [c for c in f.columns if c not in INFO_COLUMNS]
    out = f.select(pl.col(INFO_DOC_ID).cast(pl.String).alias("doc_id"))
    if INFO_FETCHED_AT in f.columns:
        at = f[INFO_FETCHED_AT]
        at = at.str.to_datetime(time_unit="us", time_zone="UTC") if at.dtype == pl.String else at
        out = out.with_columns(at.dt.cast_time_unit("us").dt.convert_time_zone("UTC").alias("fetched_at"))
    if INFO_CLEANED in f.columns:
        out = out.with_columns(f[INFO_CLEANED].cast(pl.List(pl.String)).alias("cleaned"))
    if INFO_ROW_KEY in f.columns:
        out = out.with_columns(f[INFO_ROW_KEY].cast(pl.String).alias("row_key"))
    out = out.with_columns(_kept_json(f, kept))
    if "title" in kept:
        out = out.with_columns(f["title"].cast(pl.String).alias("title"))
    return out


def doc_info_frames(doc_info: Sequence[Path | str | pa.Table]) -> list[pl.DataFrame]:
    """The document info tables as one frame (a list of one, or none), one row per document; a document
    described twice is an error (its fields would be ambiguous)."""
    frames = [doc_info_frame(item) for item in doc_info]
    if not frames:
        return []
    merged = pl.concat(frames, how="diagonal_relaxed")
    dup = merged.filter(pl.col("doc_id").is_duplicated())
    if dup.height:
        raise ReleaseError(f"document {dup['doc_id'][0]!r} appears in more than one doc_info table")
    return [merged]


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
            "urls": [ingest_outputs.normalize_url(u) for u in get("urls") or ()],
            "id_field": get("id_field"),
            "description": get("description") or "",
            "homepage": get("homepage"),
            "date_field": get("date_field"),
        }
    return out


def _own_ids(docs: pl.DataFrame, sid: str, field_name: str, info: pl.DataFrame | None) -> list[str | None]:
    """The `id_field` value of each of the source's documents (aligned with `docs`), from the kept fields."""
    if info is None or "kept" not in info.columns:
        return [None] * docs.height
    kept = docs.select("id").join(info.select(pl.col("doc_id").alias("id"), "kept"), on="id", how="left",
                                   maintain_order="left")["kept"].to_list()
    out = []
    for k in kept:
        value = json.loads(k).get(field_name) if k else None
        out.append(None if value is None else value if isinstance(value, str) else json.dumps(value))
    return out


def with_row_ids(docs: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]],
                 info_frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """`docs` with `row_id`, the stable key of its document that release ids hash (core.doc_keys): the one
    doc_info carries (`_row_key`, from the clean tables), else computed here from the shard's columns. The
    values of a ledger `id_field` must be there for every document and unique."""
    info = info_frames[0] if info_frames else None
    given = None
    if info is not None and "row_key" in info.columns:
        given = docs.select("id").join(info.select(pl.col("doc_id").alias("id"), "row_key"), on="id", how="left",
                                       maintain_order="left")["row_key"]
    pieces = []
    for (sid,), part in docs.with_row_index("_pos").partition_by("source_id", as_dict=True, maintain_order=True).items():
        f = facts[sid]
        own = _own_ids(part, sid, f["id_field"], info) if f.get("id_field") else None
        if own is not None:
            missing = [d for d, o in zip(part["id"].to_list(), own, strict=True) if o is None]
            if missing:
                raise ReleaseError(f"source {sid!r}: {len(missing)} documents (e.g. {missing[0]!r}) have no value of "
                                   f"id_field {f['id_field']!r}; list it in keep_fields and give every record one")
            dup = pl.Series(own).filter(pl.Series(own).is_duplicated())
            if dup.len():
                raise ReleaseError(f"source {sid!r}: id_field {f['id_field']!r} value {dup[0]!r} names more than one "
                                   f"document; release ids must be unique")
        own_of = None if own is None else dict(zip(part["id"].to_list(), own, strict=True))
        # k order, so that occurrence numbers follow the source's order (shard order is id byte order)
        part = part.with_columns(pl.col("id").str.split(":").list.last().cast(pl.Int64).alias("_k")).sort("_k")
        keys = stable_keys(
            str(sid), [bytes(d).hex() for d in part["sha256"].to_list()],
            own_ids=None if own_of is None else [own_of.get(i) for i in part["id"].to_list()],
            urls=part["url"].to_list() if f.get("url_field") else None, ledger_urls=f.get("urls") or (),
        )
        pieces.append(pl.DataFrame({"_pos": part["_pos"], "row_id": keys}, schema={"_pos": pl.UInt32, "row_id": pl.String}))
    computed = pl.concat(pieces).sort("_pos")["row_id"] if pieces else pl.Series("row_id", [], pl.String)
    row_id = computed if given is None else given.fill_null(computed)
    return docs.with_columns(row_id.alias("row_id"))


@dataclass
class Inputs:
    """Everything a build and its sampled rebuild check plan from, read once."""

    manifest: dict[str, Any]
    cfg: TokenizeSettings
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

