"""The scrub stage's driver: per source, drop what dedup removed, scrub PII, recompute sha256 and n_chars.

It runs after the global dedup (so only kept documents are scrubbed) but caches per source under a key
of (clean output, pii config, that source's dropped ids): a new source scrubs only itself unless dedup
changed what another source keeps. Other stages read the scrubbed files, the PII types and placeholders and
the detector through `scrub.outputs`, which imports this driver only to rebuild.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.clean.outputs import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_hex
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import INTERMEDIATE, write_parquet
from corpus_dagster.core.progress import Log, Progress
from corpus_dagster.core.settings import PiiSettings, Settings
from corpus_dagster.core.stage import CachedUnit, Outputs, Stage, run_cached_many
from corpus_dagster.dedup.outputs import dedup_sources, dropped_ids
from corpus_dagster.scrub.api import PII_TYPES, scrub_texts

STAGE = "scrub"  # the stage folder, as `scrub.outputs` reads it (the read face never imports this driver eagerly)
CODE_VERSION = "5"  # bump when a change to the scrub logic changes its output bytes
SCRUB = Stage(STAGE, CODE_VERSION)


def scrub_file(in_path: Path, out_path: Path, drop: list[str], pii_cfg: PiiSettings) -> dict[str, Any]:
    """Scrub one clean document file into out_path, leaving out the ids in `drop`; returns counts and examples."""
    start = time.monotonic()
    table = read_table(in_path)
    rows_in = table.num_rows
    if drop:
        keep = pc.invert(pc.is_in(table["id"], value_set=pa.array(drop, pa.string())))
        table = table.filter(keep)
    # A polars Series in and out: the texts stay in Arrow memory; Python strings are made only for the texts
    # the detectors look into.
    texts = pl.Series("text", table["text"], dtype=pl.String)
    outcome = scrub_texts(texts, pii_cfg)
    new_texts = outcome.text
    new_arrow = _one_chunk(new_texts.to_arrow().cast(pa.string()))
    changed = (texts != new_texts).arg_true()
    sha = table["sha256"].to_pylist()
    nchars = table["n_chars"].to_pylist()
    # hashed straight from the Arrow buffer: no Python string per changed text
    offsets = np.frombuffer(new_arrow.buffers()[1], np.int32)[new_arrow.offset : new_arrow.offset + len(new_arrow) + 1]
    data = memoryview(new_arrow.buffers()[2] or b"")
    lengths = new_texts.gather(changed).str.len_chars().to_list()
    for i, n in zip(changed.to_list(), lengths, strict=True):
        sha[i] = hashlib.sha256(data[offsets[i] : offsets[i + 1]]).digest()
        nchars[i] = n
    ids = table["id"]
    out = (
        table.set_column(table.schema.get_field_index("text"), "text", new_arrow)
        .set_column(table.schema.get_field_index("sha256"), "sha256", pa.array(sha, pa.binary(32)))
        .set_column(table.schema.get_field_index("n_chars"), "n_chars", pa.array(nchars, pa.int32()))
        .append_column("pii_redactions", pa.array(np.asarray(outcome.redactions, dtype=np.int32)))
    )
    write_parquet(out, out_path, INTERMEDIATE)
    return {
        "docs": out.num_rows,
        "dropped": rows_in - out.num_rows,
        "docs_redacted": int(np.count_nonzero(outcome.redactions)),
        "pii": {t: int(sum(outcome.counts[t])) for t in PII_TYPES},
        "preexisting": {t: int(outcome.preexisting.get(t, 0)) for t in PII_TYPES},
        "examples": [[ids[i].as_py(), kind, snippet] for i, kind, snippet in outcome.examples],
        "bytes": int(pc.sum(pc.binary_length(table["text"])).as_py() or 0),
        "seconds": round(time.monotonic() - start, 3),
    }


def read_table(path: Path) -> pa.Table:
    """The Parquet file as the Arrow table `pq.read_table` gives (same values, types, schema metadata).

    Read by polars and cast to the schema the file declares: pyarrow's reader allocates through its
    default pool, whose fresh pages cost 0.5-2 s of kernel time per 160 MB of clean files on the 2-core
    machine (run to run), where polars' reader and the conversion cost 0.35 s. Any file whose conversion
    does not give that schema exactly is read by pyarrow.
    """
    schema = pq.read_schema(path)
    try:
        table = pl.read_parquet(path).to_arrow().cast(schema)
    except (pl.exceptions.PolarsError, pa.ArrowException, ValueError, TypeError):
        table = None
    if table is None or not table.schema.equals(schema, check_metadata=True):
        table = pq.read_table(path, use_threads=False)
    return table


def _one_chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One Arrow array (a polars Series converts to one, but a ChunkedArray is accepted)."""
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _scrub_key(layout: Layout, source_id: str, settings: Settings, drop: list[str]) -> tuple[str, dict, dict]:
    inputs = {"clean": clean_record(layout, source_id).key, "dropped_ids": sha256_hex("\n".join(drop).encode())}
    key_settings = output_settings(settings.resolved, "pii")
    return SCRUB.key(inputs, key_settings), inputs, key_settings


def scrub_sources(layout: Layout, source_ids: list[str], settings: Settings,
                  drop: dict[str, list[str]],
                  progress: Progress | None = None) -> dict[str, dict[str, Any]]:
    """Scrub the kept documents of every source whose inputs or settings changed since last time.

    The files of all those sources go through one pool of `workers`, largest first, so a corpus of many
    one-file sources scrubs in parallel too; each source's record is committed once all its files are
    written. Every source's lock is held throughout (taken in sorted order, so two runs cannot deadlock).
    Each source is one unit of `core.stage.run_cached_many`: cached sources are skipped, the others are all
    begun before the pool starts and committed after it ends.
    """
    with contextlib.ExitStack() as locks:
        for sid in sorted(source_ids):
            locks.enter_context(records.stage_lock(layout.root, f"scrub.{sid}", settings, what=f"scrub ({sid})"))
        units = []
        for sid in source_ids:
            key, inputs, key_settings = _scrub_key(layout, sid, settings, drop.get(sid, []))
            folder = layout.stage(STAGE, sid)
            units.append(CachedUnit(folder, SCRUB, inputs, key_settings, key, clear=(folder / key,)))
        runs = run_cached_many(units, lambda pending: _scrub_together(
            layout, settings, drop, progress, [(source_ids[i], key) for i, key in pending]))
    return {sid: run.summary() for sid, run in zip(source_ids, runs, strict=True)}


def _scrub_together(layout: Layout, settings: Settings, drop: dict[str, list[str]], progress: Progress | None,
                    pending: list[tuple[str, str]]) -> list[Outputs]:
    """Scrub the files of every (source, key) in `pending` through one pool, largest file first; returns each
    source's Outputs in the order of `pending`."""
    parts: dict[str, list[dict[str, Any] | None]] = {}
    jobs: list[tuple[str, int, tuple]] = []
    for sid, key in pending:
        out_dir = layout.stage(STAGE, sid) / key
        files = clean_doc_files(layout, sid, settings)
        parts[sid] = [None] * len(files)
        jobs += [(sid, n, (path, out_dir / f"docs-{n:05d}.parquet", drop.get(sid, []), settings.pii))
                 for n, path in enumerate(files)]
    jobs.sort(key=lambda job: -job[2][0].stat().st_size)  # stable: equal sizes stay in source, file order
    results = ordered_map(scrub_file, [job for _, _, job in jobs], settings.workers) if jobs else iter(())
    for (sid, n, _), part in zip(jobs, results, strict=True):
        parts[sid][n] = part
        if progress is not None:
            progress.update(part["docs"] + part["dropped"], part["bytes"])
    outputs = []
    for sid, key in pending:
        names = [f"{key}/docs-{n:05d}.parquet" for n in range(len(parts[sid]))]
        outputs.append(Outputs(names, files={"docs": names},
                               stats=summarize([part for part in parts[sid] if part is not None])))
    return outputs


def summarize(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up per-file scrub stats."""
    pii: Counter[str] = Counter()
    pre: Counter[str] = Counter()
    for p in parts:
        pii.update(p["pii"])
        pre.update(p["preexisting"])
    examples = [e for p in parts for e in p["examples"]][:10]
    return {
        "docs": sum(p["docs"] for p in parts),
        "dropped": sum(p["dropped"] for p in parts),
        "docs_redacted": sum(p["docs_redacted"] for p in parts),
        "pii": {t: int(pii[t]) for t in PII_TYPES},
        "preexisting": {t: int(pre[t]) for t in PII_TYPES},
        "examples": examples,
        "bytes": sum(p["bytes"] for p in parts),
        "seconds": round(sum(p["seconds"] for p in parts), 3),
    }


def run_scrub(layout: Layout, settings: Settings, log: Log | None = None) -> dict[str, dict]:
    """Scrub every source the last dedup covered (cached per source); returns stats per source.

    `log` (a callable taking a line) receives progress every `progress.interval_s` seconds and a closing line.
    """
    source_ids = dedup_sources(layout)
    dropped = dropped_ids(layout, settings)
    ids = dropped.get_column("id").sort().to_list() if dropped.height else []
    by_source: dict[str, list[str]] = {}
    for x in ids:
        by_source.setdefault(x.rsplit(":", 1)[0], []).append(x)
    total = sum(clean_record(layout, sid).stats.get("kept", 0) for sid in source_ids)
    progress = Progress(log, "scrub", total_docs=total, interval_s=float(settings.progress.interval_s))
    out = scrub_sources(layout, source_ids, settings, by_source, progress)
    progress.finish()
    return out
