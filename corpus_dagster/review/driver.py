"""The review stage's driver: all of its reading and writing.

Candidates stream in per file with only the columns that choose the sample (ids, reason codes, values,
partners): clean rejects per source, the dedup `dropped` table, and the scrubbed files (every kept id; the
documents with a redaction are counted per PII type from their texts). Then only the chosen rows' texts are
read back (their row groups only). Outputs: `review/<dataset>/<version>/review_sample.parquet` and
`index.html`, recorded in `stages/review/_RECORD.json` under a key of the sources' clean and scrub keys,
the dedup key and the `review` settings (thresholds shown come from the clean, dedup and pii sections,
which those keys already cover).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.clean.outputs import REASON_CODES, clean_doc_files, clean_record, reject_files
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.parquet import TABLE, write_parquet
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.dedup.outputs import dedup_record, dedup_sources, dedup_tables
from corpus_dagster.review.html import render_page
from corpus_dagster.review.sample import (
    KEPT,
    KEPT_THRESHOLD,
    StratifiedSample,
    candidates,
    clean_threshold,
    dedup_threshold,
    excerpt,
    pii_threshold,
    pii_windows,
)
from corpus_dagster.scrub.outputs import PII_TYPES, PLACEHOLDERS, scrub_record, scrubbed_files

STAGE = "review"
CODE_VERSION = "1"
SAMPLE_FILE = "review_sample.parquet"
HTML_FILE = "index.html"
DEDUP_REASONS = ("exact", "near", "decontaminated")
REASON_ORDER = (*REASON_CODES, *DEDUP_REASONS, *PII_TYPES, KEPT)
BATCH_ROWS = 65536  # rows of the dedup table read at a time
# One row per sampled document. text/partner_text are excerpts (excerpt_chars); *_chars the full lengths.
# PII rows: text = one scrubbed window per line, partner_text = the same windows in the clean text.
REVIEW_SCHEMA = pa.schema([
    ("source_id", pa.string()),
    ("stratum", pa.string()),
    ("reason", pa.string()),
    ("id", pa.string()),
    ("url", pa.string()),
    ("value", pa.float64()),
    ("threshold", pa.string()),
    ("partner_id", pa.string()),
    ("jaccard", pa.float64()),
    ("detail", pa.string()),
    ("text", pa.string()),
    ("text_chars", pa.int64()),
    ("partner_text", pa.string()),
    ("partner_chars", pa.int64()),
])


REVIEW = Stage(STAGE, CODE_VERSION)


def review_key(layout: Layout, settings: Settings, source_ids: list[str]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the review sample: every source's clean and scrub keys, the dedup key, `review` settings."""
    inputs = {
        "clean": [[sid, clean_record(layout, sid).key] for sid in source_ids],
        "dedup": dedup_record(layout).key,
        "scrub": [[sid, scrub_record(layout, sid).key] for sid in source_ids],
    }
    return REVIEW.key(inputs, output_settings(settings.resolved, STAGE)), inputs


@records.locked(lambda a: "review")
def run_review_stage(layout: Layout, settings: Settings,
                     log: Log | None = None) -> dict[str, Any]:
    """Sample, read back and write the review sample of every source the last dedup covered.

    Returns stats: `rows`, `strata` (source_id, stratum, reason, available, sampled per group), `sources`,
    `paths` (parquet, html), `seconds`, plus `cached` and `key`; {"enabled": False, ...} when switched off.
    """
    cfg = settings.review
    if not cfg.enabled:
        return {"enabled": False, "cached": False, "key": "disabled", "rows": 0, "strata": [], "sources": []}
    start = time.monotonic()
    source_ids = sorted(dedup_sources(layout))
    key, inputs = review_key(layout, settings, source_ids)
    folder = layout.stage(STAGE)
    out = layout.review
    paths = {"parquet": str(out / SAMPLE_FILE), "html": str(out / HTML_FILE)}

    def compute(key: str) -> Outputs:
        sampler = StratifiedSample(cfg.per_stratum, cfg.seed)
        for sid in source_ids:
            _offer_rejects(sampler, layout, sid)
            _offer_scrubbed(sampler, layout, sid)
            if log:
                log(f"review: {sid} offered")
        _offer_dedup(sampler, layout, set(source_ids))
        chosen = sampler.result(REASON_ORDER)
        strata = sampler.strata(REASON_ORDER)
        rows = _rows(layout, chosen, settings)
        write_parquet(pa.Table.from_pylist(rows, schema=REVIEW_SCHEMA), out / SAMPLE_FILE, TABLE)
        title = f"Review sample: {settings.dataset} {settings.version}"
        atomic_write_bytes(out / HTML_FILE, render_page(rows, strata, title, cfg).encode("utf-8"))
        stats = {"rows": len(rows), "strata": strata, "sources": source_ids, "seconds": round(time.monotonic() - start, 3)}
        return Outputs([SAMPLE_FILE, HTML_FILE], {"review": [SAMPLE_FILE, HTML_FILE]}, stats)

    # the outputs live in the review folder, named from the record's folder through `output_dir`
    run = run_cached(folder, REVIEW, inputs, output_settings(settings.resolved, STAGE), compute, key=key, clear=[out],
                     output_dir=os.path.relpath(out, folder))
    return {**run.stats, "paths": paths, "cached": run.cached, "key": run.key}


# --- Candidates: ids and the few columns that choose the sample ----------------------------------------------

def _offer_rejects(sampler: StratifiedSample, layout: Layout, source_id: str) -> None:
    for path in reject_files(layout, source_id):
        t = pq.read_table(path, columns=["id", "reason", "value"])
        sampler.add(candidates({"id": t["id"], "reason": t["reason"], "value": t["value"]},
                               source_id=source_id, stratum="clean", file=str(path)))


def _offer_dedup(sampler: StratifiedSample, layout: Layout, source_ids: set[str]) -> None:
    columns = ["id", "reason", "matched_id", "jaccard", "detail"]
    for batch in pq.ParquetFile(dedup_tables(layout)["dropped"]).iter_batches(BATCH_ROWS, columns=columns, use_threads=False):
        frame = pl.DataFrame(pl.from_arrow(batch))
        frame = frame.with_columns(source_id=pl.col("id").str.extract(r"^(.*):\d+$", 1)).filter(
            pl.col("source_id").is_in(sorted(source_ids)))
        sampler.add(candidates({"source_id": frame["source_id"], "id": frame["id"], "reason": frame["reason"],
                                "partner_id": frame["matched_id"], "jaccard": frame["jaccard"],
                                "value": frame["jaccard"], "detail": frame["detail"]}, stratum="dedup"))


def _offer_scrubbed(sampler: StratifiedSample, layout: Layout, source_id: str) -> None:
    """Every kept id (stratum kept) and, per PII type, the documents with a redaction of that type.

    Redactions per type = placeholders in the scrubbed text minus those already in the clean text; only the
    texts of documents with a redaction are read, one file (and only their row groups) at a time.
    """
    scrubbed = scrubbed_files(layout, source_id)
    clean = clean_doc_files(layout, source_id)
    for i, path in enumerate(scrubbed):
        t = pq.read_table(path, columns=["id", "pii_redactions"])
        sampler.add(candidates({"id": t["id"]}, source_id=source_id, stratum="kept", reason=KEPT, file=str(path)))
        ids = pc.filter(t["id"], pc.greater(t["pii_redactions"], 0))
        if not len(ids):
            continue
        # the clean file a scrubbed file was made from has the same index; any clean file if that changes
        before_files = [clean[i]] if len(clean) == len(scrubbed) else clean
        after = _placeholder_counts([path], ids)
        before = _placeholder_counts(before_files, ids)
        added = after.join(before, on="id", how="left", suffix="_before").fill_null(0)
        for kind in PII_TYPES:
            hit = added.select("id", value=pl.col(kind) - pl.col(f"{kind}_before")).filter(pl.col("value") > 0)
            sampler.add(candidates({"id": hit["id"], "value": hit["value"]}, source_id=source_id, stratum="pii",
                                   reason=kind, file=str(path)))


def _placeholder_counts(paths: list[Path], ids: pa.Array | pa.ChunkedArray) -> pl.DataFrame:
    """Per document of `ids` (in file order): how many placeholders of each PII type its text holds.

    Counted inside polars' scan (the texts never become Arrow tables in Python): for the 342 redacted
    changelogs of the bench corpus 0.09 s against 0.32 s through pyarrow row groups."""
    counts = [pl.col("text").str.count_matches(PLACEHOLDERS[k], literal=True).alias(k) for k in PII_TYPES]
    wanted = ids.to_pylist()
    if not paths:
        return pl.DataFrame({"id": pl.Series([], dtype=pl.String), **{k: pl.Series([], dtype=pl.UInt32) for k in PII_TYPES}})
    return (pl.scan_parquet([str(p) for p in paths]).select("id", "text").filter(pl.col("id").is_in(wanted))
            .select("id", *counts).collect())


# --- Reading back the chosen rows' texts ------------------------------------------------------------------

@dataclass(frozen=True)
class Cut:
    """A fetched text the page shows only the start of: its first characters and its full length. The
    texts themselves were 1.07 GB of Python strings for the 1,608 rows read back at 10x the bench corpus."""

    head: str
    chars: int


def _fetch(paths: Iterable[Path], ids: Iterable[str], columns: list[str], limit: int,
           full: Collection[str] = (), on_full: Callable[[str, str], None] | None = None) -> dict[str, dict[str, Any]]:
    """{id: row} of the given ids (a sample's few rows) from document files, read by polars' scan, which
    decodes the id column and then the other columns of the matching rows' pages only (the whole row groups
    through pyarrow: 0.7 s of the review's 2 s on the bench corpus). One file at a time, and each text is
    cut to a `Cut` of `limit` characters as it arrives, but for the ids in `full` (the PII rows, whose
    windows need the whole texts): those are kept whole, or, with `on_full`, handed to it and then cut."""
    wanted = sorted(set(ids))
    found: dict[str, dict[str, Any]] = {}
    if not wanted:
        return found
    for path in paths:
        frame = pl.scan_parquet(str(path)).select("id", *columns).filter(pl.col("id").is_in(wanted)).collect()
        for row in frame.iter_rows(named=True):
            text = row.get("text")
            if text is not None and row["id"] in full and on_full is not None:
                on_full(row["id"], text)
            if text is not None and (row["id"] not in full or on_full is not None):
                row["text"] = Cut(text[:limit], len(text))
            found[row["id"]] = row
    return found


def _source_of(doc_id: str) -> str:
    return doc_id.rsplit(":", 1)[0]


def _rows(layout: Layout, chosen: pl.DataFrame, settings: Settings) -> list[dict[str, Any]]:
    """The output rows of the chosen candidates, with texts read back, excerpts, thresholds and windows."""
    cfg = settings.review
    limit = cfg.excerpt_chars
    picks = chosen.to_dicts()
    by_file: dict[str, list[str]] = {}
    for p in picks:
        if p["file"] is not None:
            by_file.setdefault(p["file"], []).append(p["id"])
    # rejects files hold url and text; scrubbed files (kept and pii rows) also the language columns
    kept_files = {p["file"] for p in picks if p["stratum"] == KEPT}
    pii_ids = {p["id"] for p in picks if p["stratum"] == "pii"}  # their windows need the whole texts
    texts: dict[tuple[str, str], dict[str, Any]] = {}  # (file, id) -> row
    for file, ids in sorted(by_file.items()):
        cols = ["url", "text", "lang", "lang_score"] if file in kept_files else ["url", "text"]
        full = {p["id"] for p in picks if p["stratum"] == "pii" and p["file"] == file}
        for doc_id, row in _fetch([Path(file)], ids, cols, limit, full).items():
            texts[(file, doc_id)] = row
    # clean texts: dropped duplicates, their kept partners, and the PII documents before the scrub
    need: dict[str, set[str]] = {}
    for p in picks:
        for doc_id in (p["id"], p["partner_id"]) if p["stratum"] in ("dedup", "pii") else ():
            if doc_id is not None:
                need.setdefault(_source_of(doc_id), set()).add(doc_id)
    # a PII document's windows are made as its clean text arrives; then both texts are cut (at 10x the bench
    # corpus, whole PII texts held to the end were 0.4 GB)
    pii_picks: dict[str, list[dict[str, Any]]] = {}
    for p in picks:
        if p["stratum"] == "pii":
            pii_picks.setdefault(p["id"], []).append(p)
    windows: dict[tuple[str, str, str], tuple[list[str], list[str] | None, int, int, int]] = {}

    def make_windows(doc_id: str, before: str) -> None:
        for p in pii_picks.get(doc_id, []):
            doc = texts.get((p["file"], doc_id), {})
            after = doc.get("text")
            if isinstance(after, str):
                left, right, total = pii_windows(before, after, p["reason"], PLACEHOLDERS, cfg.pii_context_chars, limit)
                windows[(p["file"], doc_id, p["reason"])] = (left, right, total, len(after), len(before))
        for p in pii_picks.get(doc_id, []):
            doc = texts.get((p["file"], doc_id), {})
            if isinstance(doc.get("text"), str):
                doc["text"] = Cut(doc["text"][:limit], len(doc["text"]))

    clean: dict[str, dict[str, Any]] = {}
    for sid, ids in sorted(need.items()):
        clean.update(_fetch(clean_doc_files(layout, sid), ids, ["url", "text"], limit, pii_ids, make_windows))
    rows = []
    for p in picks:
        row = {k: p[k] for k in ("source_id", "stratum", "reason", "id", "value", "partner_id", "jaccard", "detail")}
        row.update(url=None, text=None, text_chars=None, partner_text=None, partner_chars=None)
        stratum, reason = p["stratum"], p["reason"]
        if stratum == "clean":
            doc = texts.get((p["file"], p["id"]), {})
            row.update(threshold=clean_threshold(reason, settings.clean), url=doc.get("url"))
            _set_text(row, "text", doc.get("text"), limit)
        elif stratum == "dedup":
            doc = clean.get(p["id"], {})
            row.update(threshold=dedup_threshold(reason, settings.dedup), url=doc.get("url"))
            _set_text(row, "text", doc.get("text"), limit)
            if p["partner_id"] is not None:
                _set_text(row, "partner_text", clean.get(p["partner_id"], {}).get("text"), limit)
        elif stratum == "pii":
            doc = texts.get((p["file"], p["id"]), {})
            row.update(threshold=pii_threshold(reason, settings.pii), url=doc.get("url"))
            if (p["file"], p["id"], reason) in windows:
                left, right, total, chars, before_chars = windows[(p["file"], p["id"], reason)]
                row.update(text="\n".join(left), text_chars=chars, partner_chars=before_chars,
                           partner_text=None if right is None else "\n".join(right),
                           detail=f"{len(left)} of {total} redactions of this type shown")
        else:
            doc = texts.get((p["file"], p["id"]), {})
            row.update(threshold=KEPT_THRESHOLD, url=doc.get("url"))
            if doc.get("lang") is not None:
                row["detail"] = f"lang {doc['lang']} (score {doc['lang_score']:.3f})"
            _set_text(row, "text", doc.get("text"), limit)
        rows.append(row)
    return rows


def _set_text(row: dict[str, Any], column: str, text: str | Cut | None, limit: int) -> None:
    chars = "text_chars" if column == "text" else "partner_chars"
    if isinstance(text, Cut):
        row[column], row[chars] = excerpt(text.head, limit), text.chars
        return
    row[column] = excerpt(text, limit)
    row[chars] = None if text is None else len(text)
