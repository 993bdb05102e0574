"""All reading and writing of the corpus analysis: resolve inputs, run resumable steps, write outputs.

Steps run in a fixed order; each writes its outputs atomically (temp name, then rename) and only then a
record `_state/<step>.json` holding the run key. A rerun skips a step whose record has the current key
and whose outputs exist; a step that died leaves no record, so it runs again, and every step after a
step that ran is run again too. Intermediate arrays live in `_work/` (kept so a rerun can resume).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.analysis import costs
from corpus_dagster.analysis.candidates import bucket_pairs, candidate_probability, unpack_pairs
from corpus_dagster.analysis.clusters import complete_linkage
from corpus_dagster.analysis.exact import exact_representatives, group_members
from corpus_dagster.analysis.inputs import INPUTS_FILE, read_inputs, select_corpus_files
from corpus_dagster.analysis.lengths import length_tables
from corpus_dagster.analysis.report import dataset_card, render_report
from corpus_dagster.analysis.tokenizers import load_tokenizers
from corpus_dagster.analysis.views import (
    DUPLICATES_SCHEMA,
    Groups,
    doc_duplicate_tables,
    exact_view,
    rate_by_length,
    threshold_view,
    views_table,
)
from corpus_dagster.clean.driver import clean_doc_files, clean_record
from corpus_dagster.core import records
from corpus_dagster.core.arrays import unique_sorted
from corpus_dagster.core.atomic import atomic_dir, atomic_path, remove_stale_temps
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.errors import AnalysisError, CorpusError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.memory import peak_rss_mb, reset_peak_rss
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import ParquetSettings, write_parquet
from corpus_dagster.core.records import StageRecord, stage_key
from corpus_dagster.dedup.driver import signature_file
from corpus_dagster.lib.jaccard import ShingleStore, jaccard_of, shingle_sets_task
from corpus_dagster.lib.lsh import band_hashes
from corpus_dagster.lib.minhash import batch_signatures, permutations
from corpus_dagster.lib.text import byte_batches, tokenize_batch
from corpus_dagster.publish.driver import read_manifest, verified_shards
from corpus_dagster.tokenize.driver import token_counts_file

STEPS = ("scan", "exact", "candidates", "jaccard", "duplicates", "clusters", "lengths", "figures", "report")
# Keys that only change speed or memory, never an output byte: left out of the run key.
EXECUTION_KEYS = ("batch_bytes", "verify_batch_shingles", "verify_cluster_bytes")
# Analysis tables: written whole, one row group unless a size is given (fixed settings, same bytes every run).
ANALYSIS_PARQUET = ParquetSettings(compression_level=3, use_dictionary=False, write_statistics=False)
GROUPS_FILE = "duplicate_groups.jsonl"
VIEWS_FILE = "duplication_views"
RATES_FILE = "duplicate_rate_by_length.parquet"
LENGTHS_FILE = "token_lengths"
HISTOGRAM_FILE = "token_length_histogram.parquet"
DOC_COUNTS_FILE = "doc_token_counts.parquet"
FIGURES_DIR = "figures"
REPORT_FILE = "REPORT.md"
NEAR_DUP_DIR = "near_dup"  # the duplicate tables as a dataset folder with its own card (README.md)


def tag(threshold: float) -> str:
    """File tag of a threshold: 0.7 -> t70, 0.85 -> t85."""
    return f"t{round(threshold * 100):02d}"


# ---------------------------------------------------------------------------------------------- inputs


@dataclass
class CorpusFiles:
    """Parquet files of one corpus, each with a `text` column, read in list order.

    source_ids: per file, its source (None: the file's `source_id` column, else `default_source`).
    root: the folder the files were selected from (select_corpus_files), recorded in `_INPUTS.json`.
    """

    files: list[Path]
    source_ids: list[str | None]
    default_source: str = "corpus"
    root: Path | None = None

    def __post_init__(self) -> None:
        self.files = [Path(f) for f in self.files]
        if len(self.source_ids) != len(self.files):
            raise AnalysisError("CorpusFiles: one source id (or None) per file is needed")


def corpus_from_dir(corpus_dir: str | Path, exclude: Path | None = None) -> CorpusFiles:
    """The `*.parquet` files under a folder that select_corpus_files picks (recursively, sorted by path;
    hidden names and `exclude` skipped; under a stage record listing `docs`, only those): the rule the
    verify/ scripts apply to the same folder."""
    root = Path(corpus_dir)
    files = select_corpus_files(root, exclude)
    if not files:
        raise AnalysisError(f"--corpus-dir {root}: no *.parquet files found; point it at a folder of shards")
    return CorpusFiles(files, [None] * len(files), root.resolve().name or "corpus", root)


def corpus_from_sources(sources: dict[str, Sequence[Path]], root: Path | None = None) -> CorpusFiles:
    """Files per source id (the graph's clean per-source documents), sources in name order; `root` is
    the folder select_corpus_files picks the same files from (the clean stage folder)."""
    files, ids = [], []
    for source_id in sorted(sources):
        for f in sources[source_id]:
            files.append(Path(f))
            ids.append(source_id)
    return CorpusFiles(files, ids, root=root)


def _footer_sha(path: Path) -> str:
    """SHA-256 of a Parquet file's footer (row groups, offsets, statistics): a cheap content fingerprint."""
    with open(path, "rb") as fh:
        fh.seek(-8, os.SEEK_END)
        n = int.from_bytes(fh.read(4), "little")
        fh.seek(-(8 + n), os.SEEK_END)
        return hashlib.sha256(fh.read(n + 8)).hexdigest()


def _fingerprint(files: Sequence[Path]) -> list[list[Any]]:
    out = []
    for f in files:
        if not Path(f).is_file():
            raise AnalysisError(f"{f}: input file does not exist")
        out.append([Path(f).name, Path(f).stat().st_size, _footer_sha(Path(f))])
    return out


def _text_file(path: Path) -> pq.ParquetFile:
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise AnalysisError(f"{path}: not a readable Parquet file ({exc})") from exc
    if "text" not in pf.schema_arrow.names:
        raise AnalysisError(f"{path}: no `text` column (columns: {pf.schema_arrow.names}); the analysis needs one")
    return pf


def corpus_size(corpus: CorpusFiles) -> tuple[int, int]:
    """(documents, uncompressed text bytes) from Parquet metadata only, without reading any text."""
    docs = text_bytes = 0
    for path in corpus.files:
        pf = _text_file(path)
        md = pf.metadata
        col = pf.schema_arrow.names.index("text")
        docs += md.num_rows
        for rg in range(md.num_row_groups):
            text_bytes += md.row_group(rg).column(col).total_uncompressed_size
    return docs, text_bytes


# ---------------------------------------------------------------------------------------------- context


@dataclass
class _Ctx:
    documents: CorpusFiles
    lengths: CorpusFiles
    out: Path
    cfg: dict[str, Any]
    signature_files: list[Path]
    token_counts: list[Path]
    workers: int
    key: str
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def work(self) -> Path:
        return self.out / "_work"

    @property
    def state(self) -> Path:
        return self.out / "_state"


def _check_cfg(cfg: dict[str, Any]) -> None:
    thresholds = cfg["cluster_thresholds"]
    if cfg["pair_threshold"] > min(thresholds) + 1e-12:
        raise AnalysisError(
            f"analysis.pair_threshold ({cfg['pair_threshold']}) exceeds the smallest cluster threshold "
            f"({min(thresholds)}); lower it so every cluster pair is among the verified pairs"
        )
    if len({tag(t) for t in thresholds}) != len(thresholds):
        raise AnalysisError(f"analysis.cluster_thresholds: two thresholds share a file tag: {thresholds}")


def _run_key(ctx_inputs: dict[str, Any], cfg: dict[str, Any]) -> str:
    settings = {k: v for k, v in cfg.items() if k not in EXECUTION_KEYS}
    blob = json.dumps({"code": CODE_VERSION, "cfg": settings, "inputs": ctx_inputs}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _write_json(path: Path, value: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_parquet(table: pa.Table, path: Path, row_group: int | None = None) -> None:
    n = table.num_rows
    step = row_group or max(n, 1)
    write_parquet(table, path, ANALYSIS_PARQUET, row_groups=[*range(0, n, step), n] if n else [0, 0])


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        np.save(tmp, array)


# ---------------------------------------------------------------------------------------------- step: scan


def _scan_task(path: str, rg: int, row0: int, stem: str, width: int, has: dict[str, bool], cfg: dict[str, Any],
               sigs: bool) -> dict[str, Any]:
    """Ids, digests, sizes, word counts (and band keys when `sigs`) of one row group (runs in a worker)."""
    cols = ["text"] + [c for c in ("id", "source_id", "split") if has[c]]
    table = pq.ParquetFile(path).read_row_group(rg, columns=cols)
    texts = table.column("text").combine_chunks()
    n = len(texts)
    if has["id"]:
        ids = table.column("id").combine_chunks().cast(pa.string())
    else:
        ids = pa.array([f"{stem}_{row0 + i:0{width}d}" for i in range(n)], pa.string())
    raw = texts.cast(pa.large_binary())
    digests = np.frombuffer(_digests(raw), dtype=np.uint8).reshape(n, 32)
    n_bytes = pc.fill_null(pc.binary_length(raw), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    words, bands = [], []
    a = b = None
    if sigs:
        a, b = permutations(cfg["bands"] * cfg["rows"], cfg["seed"], cfg["scheme"])
    for start, stop in byte_batches(texts, cfg["batch_bytes"]):
        wb = tokenize_batch(texts.slice(start, stop - start))
        words.append(wb.word_counts())
        if sigs:
            sig, _, _ = batch_signatures(wb, cfg["shingle_size"], a, b, cfg["scheme"])
            bands.append(band_hashes(sig, cfg["bands"]))
    out = {
        "ids": ids,
        "source": table.column("source_id").combine_chunks().cast(pa.string()) if has["source_id"] else None,
        "split": table.column("split").combine_chunks().cast(pa.string()) if has["split"] else None,
        "digests": digests,
        "n_bytes": n_bytes,
        "n_words": np.concatenate(words) if words else np.zeros(0, np.int64),
        "bands": np.concatenate(bands) if bands else np.zeros((0, cfg["bands"]), np.uint64),
    }
    return out


def _digests(raw: pa.Array) -> bytes:
    """Concatenated SHA-256 digests of every value (null as empty text)."""
    return b"".join(hashlib.sha256(v or b"").digest() for v in raw.to_pylist())


def _file_jobs(corpus: CorpusFiles) -> list[tuple[int, Path, pq.ParquetFile, dict[str, bool], int]]:
    out = []
    for i, path in enumerate(corpus.files):
        pf = _text_file(path)
        names = set(pf.schema_arrow.names)
        has = {c: c in names for c in ("id", "source_id", "split")}
        out.append((i, path, pf, has, pf.metadata.num_rows))
    return out


def _row_group_starts(pf: pq.ParquetFile) -> np.ndarray:
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _step_scan(ctx: _Ctx) -> dict[str, Any]:
    cfg, sigs = ctx.cfg, not ctx.signature_files
    jobs, meta = [], []
    for i, path, pf, has, rows in _file_jobs(ctx.documents):
        starts = _row_group_starts(pf)
        width = max(5, len(str(max(rows - 1, 0))))
        for rg in range(pf.metadata.num_row_groups):
            jobs.append((str(path), rg, int(starts[rg]), path.stem, width, has, cfg, sigs))
            meta.append((i, int(starts[rg]), pf.metadata.row_group(rg).num_rows))
    ctx.work.mkdir(parents=True, exist_ok=True)
    parts: dict[str, list] = {k: [] for k in ("id", "source_id", "split", "file_no", "row", "n_bytes", "n_words")}
    digests = []
    bands_path = ctx.work / "bands.u64"
    with atomic_path(bands_path) as tmp, open(tmp, "wb") as bands_fh:
        for (file_no, row0, n), res in zip(meta, ordered_map(_scan_task, jobs, ctx.workers), strict=True):
            fixed = ctx.documents.source_ids[file_no]
            parts["id"].append(res["ids"])
            if fixed is not None or res["source"] is None:
                src = pa.array([fixed or ctx.documents.default_source] * n, pa.string())
            else:
                src = pc.fill_null(res["source"], ctx.documents.default_source)
            parts["source_id"].append(src)
            parts["split"].append(pc.fill_null(res["split"], "all") if res["split"] is not None
                                  else pa.array(["all"] * n, pa.string()))
            parts["file_no"].append(np.full(n, file_no, np.int32))
            parts["row"].append(np.arange(row0, row0 + n, dtype=np.int64))
            parts["n_bytes"].append(res["n_bytes"])
            parts["n_words"].append(res["n_words"])
            digests.append(res["digests"])
            bands_fh.write(np.ascontiguousarray(res["bands"], dtype=np.uint64).tobytes())
    n_total = sum(len(x) for x in parts["file_no"])
    table = pa.table(
        {
            "id": pa.concat_arrays(parts["id"]) if parts["id"] else pa.array([], pa.string()),
            "source_id": pa.concat_arrays(parts["source_id"]) if parts["id"] else pa.array([], pa.string()),
            "split": pa.concat_arrays(parts["split"]) if parts["id"] else pa.array([], pa.string()),
            "file_no": np.concatenate(parts["file_no"]) if n_total else np.zeros(0, np.int32),
            "row": np.concatenate(parts["row"]) if n_total else np.zeros(0, np.int64),
            "scan_pos": np.arange(n_total, dtype=np.int64),
            "n_bytes": np.concatenate(parts["n_bytes"]) if n_total else np.zeros(0, np.int64),
            "n_words": np.concatenate(parts["n_words"]) if n_total else np.zeros(0, np.int64),
            "sha256": pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(32), n_total, [None, pa.py_buffer(np.concatenate(digests).tobytes() if digests else b"")]
            ),
        }
    )
    if n_total == 0:
        raise AnalysisError(f"no documents in {len(ctx.documents.files)} input file(s); nothing to analyse")
    if table.column("id").null_count:
        raise AnalysisError("an input `id` column has null values; every document needs an id")
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))
    ids = table.column("id").combine_chunks()
    same = pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy(zero_copy_only=False)
    if same.any():
        k = int(np.flatnonzero(same)[0])
        f1 = ctx.documents.files[table.column("file_no")[k].as_py()]
        f2 = ctx.documents.files[table.column("file_no")[k + 1].as_py()]
        raise AnalysisError(f"document id {ids[k].as_py()!r} occurs twice ({f1}, {f2}); ids must be unique")
    _write_parquet(table, ctx.work / "docs.parquet", row_group=1 << 20)
    words = table.column("n_words").to_numpy()
    return {
        "docs": n_total,
        "text_bytes": int(pc.sum(table.column("n_bytes")).as_py()),
        "files": len(ctx.documents.files),
        "no_shingle_docs": int((words < cfg["shingle_size"]).sum()),
        "signatures": "computed" if sigs else "reused from dedup signature files",
    }


def _load_docs(ctx: _Ctx) -> pa.Table:
    return pq.read_table(ctx.work / "docs.parquet")


def _digest_matrix(table: pa.Table) -> np.ndarray:
    col = table.column("sha256").combine_chunks()
    return np.frombuffer(col.buffers()[1], dtype=np.uint8)[col.offset * 32 : (col.offset + len(col)) * 32].reshape(
        len(col), 32
    )


# ---------------------------------------------------------------------------------------------- step: exact


def _step_exact(ctx: _Ctx) -> dict[str, Any]:
    docs = _load_docs(ctx)
    rep = exact_representatives(_digest_matrix(docs))
    _save_npy(ctx.work / "rep.npy", rep)
    starts, sizes, members = group_members(rep)
    ids = docs.column("id").combine_chunks()
    groups = np.flatnonzero(sizes >= 2)
    with atomic_path(ctx.out / GROUPS_FILE) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for g in groups.tolist():
            rows = members[starts[g] : starts[g] + sizes[g]]
            fh.write(json.dumps({"doc_ids": ids.take(pa.array(rows)).to_pylist()}, ensure_ascii=False) + "\n")
    return {
        "exact_groups": len(groups),
        "docs_in_exact_groups": int(sizes[groups].sum()),
        "exact_removable": int((sizes[groups] - 1).sum()),
    }


def _groups(ctx: _Ctx) -> Groups:
    rep = np.load(ctx.work / "rep.npy")
    starts, sizes, members = group_members(rep)
    return Groups(rep, starts, sizes, members)


# ------------------------------------------------------------------------------------------ step: candidates


def _reused_band_keys(ctx: _Ctx, docs: pa.Table, rows: np.ndarray) -> np.ndarray:
    """Band keys of `rows` from dedup signature files (their first bands x rows values)."""
    cfg, need = ctx.cfg, ctx.cfg["bands"] * ctx.cfg["rows"]
    want = pl.DataFrame({"id": docs.column("id").take(pa.array(rows)), "pos": np.arange(len(rows))})
    out = np.zeros((len(rows), cfg["bands"]), dtype=np.uint64)
    found = np.zeros(len(rows), dtype=bool)
    for path in ctx.signature_files:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(b"corpus_dagster.dedup.signature", b"{}"))
        if meta.get("shingle_size") != cfg["shingle_size"] or meta.get("num_perm", 0) < need:
            raise AnalysisError(
                f"{path}: signature file has shingle_size {meta.get('shingle_size')} and num_perm "
                f"{meta.get('num_perm')}; the analysis needs shingle_size {cfg['shingle_size']} and at least "
                f"{need} values (bands x rows): drop the signature files to compute fresh ones"
            )
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536, columns=["id", "signature"]):
            hit = pl.DataFrame({"id": batch.column(0)}).with_row_index("r").join(want, on="id", how="inner")
            if hit.height == 0:
                continue
            sig = batch.column(1)
            width = sig.type.list_size
            vals = pc.fill_null(sig.values.slice(sig.offset * width, len(sig) * width), 0).to_numpy()
            vals = vals.reshape(len(sig), width)[hit["r"].to_numpy()]
            pos = hit["pos"].to_numpy()
            out[pos] = band_hashes(np.ascontiguousarray(vals[:, :need]), cfg["bands"])
            found[pos] = True
    if not found.all():
        miss = docs.column("id")[int(rows[np.flatnonzero(~found)[0]])].as_py()
        raise AnalysisError(f"document {miss!r} has no row in the given signature files; pass them all or none")
    return out


def _step_candidates(ctx: _Ctx) -> dict[str, Any]:
    cfg = ctx.cfg
    docs = _load_docs(ctx)
    rep = np.load(ctx.work / "rep.npy")
    words = docs.column("n_words").to_numpy()
    rows = np.flatnonzero((rep == np.arange(len(rep))) & (words >= cfg["shingle_size"]))
    if ctx.signature_files:
        keys = _reused_band_keys(ctx, docs, rows)
    else:
        pos = docs.column("scan_pos").to_numpy()[rows]
        mm = np.memmap(ctx.work / "bands.u64", dtype=np.uint64, mode="r").reshape(-1, cfg["bands"])
        keys = np.array(mm[pos])
        del mm
    # The union of every band's pairs. Merging each band into the running set re-sorted that set 16 times;
    # merging once the pending bands hold as many pairs as the set does keeps memory within about twice
    # the set and sorts each pair a few times only.
    pairs, pending, largest = np.zeros(0, np.uint64), [], 0
    for band in range(cfg["bands"]):
        found, big = bucket_pairs(keys[:, band], rows)
        pending.append(found)
        largest = max(largest, big)
        if sum(map(len, pending)) >= max(len(pairs), 1 << 20):
            pairs, pending = unique_sorted(np.concatenate([pairs, *pending])), []
    pairs = unique_sorted(np.concatenate([pairs, *pending])).astype(np.uint64, copy=False)
    _save_npy(ctx.work / "candidates.npy", pairs)
    return {
        "lsh_docs": len(rows),
        "candidate_pairs": len(pairs),
        "largest_bucket": largest,
        "bands": cfg["bands"],
        "rows": cfg["rows"],
        "p_candidate_at_pair_threshold": round(candidate_probability(cfg["pair_threshold"], cfg["bands"], cfg["rows"]), 4),
    }


# --------------------------------------------------------------------------------------------- step: jaccard


def _text_jobs(ctx: _Ctx, docs: pa.Table, nodes: np.ndarray) -> tuple[list[tuple], list[np.ndarray]]:
    """Per (file, row group): the local rows to read and the node numbers they fill, in file order."""
    file_no = docs.column("file_no").to_numpy()[nodes]
    row = docs.column("row").to_numpy()[nodes]
    order = np.lexsort((row, file_no))
    jobs, slots = [], []
    for i, path in enumerate(ctx.documents.files):
        sel = order[file_no[order] == i]
        if not len(sel):
            continue
        starts = _row_group_starts(pq.ParquetFile(path))
        rg_of = np.searchsorted(starts, row[sel], side="right") - 1
        for rg in unique_sorted(rg_of).tolist():
            take = sel[rg_of == rg]
            jobs.append((str(path), rg, row[take] - starts[rg], ctx.cfg["shingle_size"], ctx.cfg["batch_bytes"]))
            slots.append(take)
    return jobs, slots


def _step_jaccard(ctx: _Ctx) -> dict[str, Any]:
    cfg = ctx.cfg
    pairs = unpack_pairs(np.load(ctx.work / "candidates.npy"))
    docs = _load_docs(ctx)
    inter = union = np.zeros(len(pairs), dtype=np.int64)
    if len(pairs):
        nodes = unique_sorted(pairs)
        store_path = ctx.work / "shingles.u64"
        store = ShingleStore(store_path, len(nodes))
        try:
            jobs, slots = _text_jobs(ctx, docs, nodes)
            for slot, (values, lengths) in zip(slots, ordered_map(shingle_sets_task, jobs, ctx.workers), strict=True):
                store.append(slot, values, lengths)
            store.close()
            pn = np.searchsorted(nodes, pairs)
            inter, union = store.counts(pn[:, 0], pn[:, 1], cfg["verify_batch_shingles"], threads=ctx.workers)
        finally:
            store_path.unlink(missing_ok=True)
    jac = jaccard_of(inter, union)  # every threshold decision below is on this float64 ratio, as before
    keep = jac >= cfg["pair_threshold"]
    table = pa.table({"a": pairs[keep, 0], "b": pairs[keep, 1], "jaccard": jac[keep],
                      "intersection": inter[keep], "union": union[keep]})
    _write_parquet(table, ctx.work / "pairs.parquet", row_group=1 << 20)
    return {
        "candidate_pairs": len(pairs),
        "verified_pairs": int(keep.sum()),
        "rejected_pairs": int((~keep).sum()),
        "pair_threshold": cfg["pair_threshold"],
    }


def _load_pairs(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pairs, float64 Jaccard, intersection, union) of the verified pairs."""
    t = pq.read_table(ctx.work / "pairs.parquet")
    pairs = np.stack([t.column("a").to_numpy(), t.column("b").to_numpy()], 1) if t.num_rows else np.zeros((0, 2), np.int64)
    return (pairs.astype(np.int64), t.column("jaccard").to_numpy(), t.column("intersection").to_numpy(),
            t.column("union").to_numpy())


# ------------------------------------------------------------------------------------------ step: duplicates


def duplicates_dir_name(cfg: dict[str, Any]) -> str:
    """doc_duplicates_t70 for pair_threshold 0.7."""
    return f"doc_duplicates_{tag(cfg['pair_threshold'])}"


def _step_duplicates(ctx: _Ctx) -> dict[str, Any]:
    docs = _load_docs(ctx)
    groups = _groups(ctx)
    pairs, jac, inter, union = _load_pairs(ctx)
    ids = docs.column("id").combine_chunks()
    rows = n_exact = n_near = parts = 0
    with atomic_dir(ctx.out / duplicates_dir_name(ctx.cfg)) as tmp:
        for i, table in enumerate(doc_duplicate_tables(ids, groups, pairs, jac, ctx.cfg["rows_per_group"], inter, union)):
            write_parquet(table, tmp / f"part-{i:05d}.parquet", ANALYSIS_PARQUET, row_groups=[0, table.num_rows])
            rows += table.num_rows
            n_exact += int(pc.sum(pc.greater(table.column("n_exact"), 0)).as_py() or 0)
            n_near += int(pc.sum(pc.greater(table.column("n_near"), 0)).as_py() or 0)
            parts += 1
        if parts == 0:
            write_parquet(DUPLICATES_SCHEMA.empty_table(), tmp / "part-00000.parquet", ANALYSIS_PARQUET, row_groups=[0, 0])
    return {"rows": rows, "docs_with_exact": n_exact, "docs_with_near": n_near, "near_pairs": len(pairs)}


# -------------------------------------------------------------------------------------------- step: clusters


def _step_clusters(ctx: _Ctx) -> dict[str, Any]:
    cfg = ctx.cfg
    docs = _load_docs(ctx)
    groups = _groups(ctx)
    pairs, jac, _, _ = _load_pairs(ctx)
    ids = docs.column("id").combine_chunks()
    words = docs.column("n_words").to_numpy()
    has_shingles = words >= cfg["shingle_size"]
    views = [exact_view(groups)]
    stats: dict[str, Any] = {}
    for t in cfg["cluster_thresholds"]:
        cs = complete_linkage(pairs, jac, t, groups.sizes, has_shingles)
        with atomic_path(ctx.out / f"near_dup_clusters_{tag(t)}.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as fh:
            for k, reps in enumerate(cs.reps):
                rows = np.sort(np.concatenate([groups.members[groups.starts[r] : groups.starts[r] + groups.sizes[r]]
                                               for r in reps.tolist()]))
                line = {
                    "component": k,
                    "size": int(cs.docs[k]),
                    "doc_ids": ids.take(pa.array(rows)).to_pylist(),
                    "min_jaccard": round(float(cs.min_jaccard[k]), 6),
                    "mean_jaccard": round(float(cs.mean_jaccard[k]), 6),
                }
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        views.append(threshold_view(groups, has_shingles, pairs, jac, cs))
        stats[f"clusters_{tag(t)}"] = len(cs.reps)
        stats[f"largest_cluster_{tag(t)}"] = int(cs.docs.max()) if len(cs.docs) else 0
    src = docs.column("source_id").combine_chunks().dictionary_encode()
    names = src.dictionary.to_pylist()
    table = views_table(views, src.indices.to_numpy(zero_copy_only=False), names, has_shingles)
    _write_parquet(table, ctx.out / f"{VIEWS_FILE}.parquet")
    _write_json(ctx.out / f"{VIEWS_FILE}.json", table.to_pylist())
    _write_parquet(rate_by_length(words, views, cfg["length_bins"]), ctx.out / RATES_FILE)
    stats["overall"] = {r["view"]: {"affected_pct": r["affected_pct"], "removable_pct": r["removable_pct"]}
                        for r in table.to_pylist() if r["scope"] == "overall"}
    return stats


# --------------------------------------------------------------------------------------------- step: lengths


def _reused_counts(paths: Sequence[Path]) -> dict[str, pl.DataFrame]:
    """Token streams' counts per tokenizer name, as text tokens (their BOS/EOD framing subtracted)."""
    out: dict[str, list[pl.DataFrame]] = {}
    for path in paths:
        manifest = Path(path).parent / "_TOKENS.json"
        if not manifest.is_file():
            raise AnalysisError(f"{path}: no _TOKENS.json beside it, so its BOS/EOD framing is unknown")
        special = json.loads(manifest.read_text(encoding="utf-8"))["tokenizer"]["special_tokens"]
        framing = 1 + (special.get("bos") is not None)
        df = pl.read_parquet(path, columns=["id", "n_tokens", "tokenizer"])
        for (name,), part in df.group_by(["tokenizer"], maintain_order=True):
            out.setdefault(name, []).append(
                part.select("id", (pl.col("n_tokens").cast(pl.Int64) - framing).alias("n"))
            )
    return {k: pl.concat(v) for k, v in out.items()}


def _step_lengths(ctx: _Ctx) -> dict[str, Any]:
    cfg = ctx.cfg
    toks = load_tokenizers(cfg["tokenizers"])
    reuse = _reused_counts(ctx.token_counts)
    seen: dict[bytes, int] = {}
    ids_p, src_p, split_p, first_p = [], [], [], []
    counts: dict[str, list[np.ndarray]] = {t.name: [] for t in toks}
    tokenized = dict.fromkeys(counts, 0)
    reused = dict.fromkeys(counts, 0)
    pos = 0
    for file_no, path, pf, has, _ in _file_jobs(ctx.lengths):
        width = max(5, len(str(max(pf.metadata.num_rows - 1, 0))))
        row0 = 0
        cols = ["text"] + [c for c in ("id", "source_id", "split") if has[c]]
        for rg in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(rg, columns=cols)
            n = t.num_rows
            ids = (t.column("id").combine_chunks().cast(pa.string()) if has["id"]
                   else pa.array([f"{path.stem}_{row0 + i:0{width}d}" for i in range(n)], pa.string()))
            fixed = ctx.lengths.source_ids[file_no]
            src = (pa.array([fixed or ctx.lengths.default_source] * n, pa.string()) if fixed or not has["source_id"]
                   else pc.fill_null(t.column("source_id").combine_chunks().cast(pa.string()), ctx.lengths.default_source))
            split = (pc.fill_null(t.column("split").combine_chunks().cast(pa.string()), "all") if has["split"]
                     else pa.array(["all"] * n, pa.string()))
            texts = t.column("text").combine_chunks().to_pylist()
            first = np.empty(n, dtype=np.int64)
            new = []
            for i, text in enumerate(texts):
                d = hashlib.sha256((text or "").encode("utf-8")).digest()
                j = seen.setdefault(d, pos + i)
                first[i] = j
                if j == pos + i:
                    new.append(i)
            for tok in toks:
                c = np.full(n, -1, dtype=np.int64)
                if tok.name in reuse:
                    hit = (pl.DataFrame({"id": ids}).with_row_index("r")
                           .join(reuse[tok.name], on="id", how="inner"))
                    c[hit["r"].to_numpy()] = hit["n"].to_numpy()
                    reused[tok.name] += hit.height
                need = [i for i in new if c[i] < 0]
                if need:
                    c[need] = tok.count([texts[i] or "" for i in need])
                    tokenized[tok.name] += len(need)
                counts[tok.name].append(c)
            ids_p.append(ids)
            src_p.append(src)
            split_p.append(split)
            first_p.append(first)
            pos += n
            row0 += n
    first = np.concatenate(first_p) if first_p else np.zeros(0, np.int64)
    src = pa.concat_arrays(src_p).dictionary_encode() if src_p else pa.array([], pa.string()).dictionary_encode()
    split = pa.concat_arrays(split_p).dictionary_encode() if split_p else pa.array([], pa.string()).dictionary_encode()
    ids = pa.concat_arrays(ids_p) if ids_p else pa.array([], pa.string())
    order = pc.sort_indices(ids).to_numpy()
    summaries, hists, doc_tables = [], [], []
    for tok in toks:
        c = np.concatenate(counts[tok.name]) if counts[tok.name] else np.zeros(0, np.int64)
        c = np.where(c >= 0, c, c[first])  # duplicates of a text take its first occurrence's count
        s, h = length_tables(
            tok.name, c, src.indices.to_numpy(zero_copy_only=False), src.dictionary.to_pylist(),
            split.indices.to_numpy(zero_copy_only=False), split.dictionary.to_pylist(), cfg["histogram_bins"],
        )
        summaries.append(s)
        hists.append(h)
        doc_tables.append(pa.table({
            "id": ids.take(pa.array(order)),
            "source_id": src.dictionary_decode().take(pa.array(order)),
            "split": split.dictionary_decode().take(pa.array(order)),
            "tokenizer": pa.array([tok.name] * len(order), pa.string()),
            "n_tokens": pa.array(c[order], pa.int64()),
        }))
    summary, hist = pa.concat_tables(summaries), pa.concat_tables(hists)
    _write_parquet(pa.concat_tables(doc_tables), ctx.out / DOC_COUNTS_FILE, row_group=1 << 20)
    _write_parquet(hist, ctx.out / HISTOGRAM_FILE)
    _write_parquet(summary, ctx.out / f"{LENGTHS_FILE}.parquet")
    _write_json(ctx.out / f"{LENGTHS_FILE}.json", {"summary": summary.to_pylist(), "histogram": hist.to_pylist()})
    return {
        "docs": len(ids),
        "tokenizers": [t.name for t in toks],
        "tokenized_docs": tokenized,
        "reused_counts": reused,
        "unique_texts": len(seen),
        "total_tokens": {r["tokenizer"]: r["total"] for r in summary.to_pylist() if r["scope"] == "overall"},
    }


# --------------------------------------------------------------------------------------- figures and report


def _figure_names(cfg: dict[str, Any], tokenizer_names: list[str]) -> list[str]:
    names = [f"token_length_hist_{n}" for n in tokenizer_names]
    return names + ["duplicate_rate_vs_length", "affected_vs_removable", "source_mix"]


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _step_figures(ctx: _Ctx) -> dict[str, Any]:
    from corpus_dagster.analysis import figures  # matplotlib (0.5 CPU s to import): only where it draws

    dpi = ctx.cfg["figure_dpi"]
    hist = pq.read_table(ctx.out / HISTOGRAM_FILE)
    summary = pq.read_table(ctx.out / f"{LENGTHS_FILE}.parquet").to_pylist()
    views = pq.read_table(ctx.out / f"{VIEWS_FILE}.parquet")
    tok_names = list(dict.fromkeys(r["tokenizer"] for r in summary))
    rendered: dict[str, dict[str, bytes]] = {}
    for name in tok_names:
        rendered[f"token_length_hist_{_safe(name)}"] = figures.length_histogram(hist, name, dpi)
    rendered["duplicate_rate_vs_length"] = figures.rate_vs_length(pq.read_table(ctx.out / RATES_FILE), dpi)
    rendered["affected_vs_removable"] = figures.affected_vs_removable(views, dpi)
    by_src = [r for r in summary if r["scope"] == "source" and r["tokenizer"] == tok_names[0]]
    rendered["source_mix"] = figures.source_mix(
        [r["key"] for r in by_src], [r["docs"] for r in by_src], [r["total"] for r in by_src], tok_names[0], dpi
    )
    with atomic_dir(ctx.out / FIGURES_DIR) as tmp:
        for name, formats in rendered.items():
            for fmt, data in formats.items():
                (tmp / f"{name}.{fmt}").write_bytes(data)
    return {"figures": sorted(rendered)}


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link (no second copy on disk), else a copy (a file system without links)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _write_near_dup(ctx: _Ctx) -> dict[str, Any]:
    """near_dup/: the duplicate table, the cluster files and the exact groups under their own names, with
    a README.md card naming one `datasets` config per table. The tables beside it stay where they are."""
    dups = duplicates_dir_name(ctx.cfg)
    clusters = [(f"near_dup_clusters_{tag(t)}.jsonl", t) for t in ctx.cfg["cluster_thresholds"]]
    parts = sorted((ctx.out / dups).glob("*.parquet"))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    with atomic_dir(ctx.out / NEAR_DUP_DIR) as tmp:
        (tmp / dups).mkdir()
        for p in parts:
            _link_or_copy(p, tmp / dups / p.name)
        for name in [c for c, _ in clusters] + [GROUPS_FILE]:
            _link_or_copy(ctx.out / name, tmp / name)
        card = dataset_card(duplicates_dir=dups, clusters=[(c, t, _lines(ctx.out / c)) for c, t in clusters],
                            groups_file=GROUPS_FILE, duplicate_rows=rows, groups=_lines(ctx.out / GROUPS_FILE),
                            pair_threshold=ctx.cfg["pair_threshold"], shingle_size=ctx.cfg["shingle_size"])
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return {"near_dup": NEAR_DUP_DIR, "near_dup_rows": rows}


def _step_report(ctx: _Ctx) -> dict[str, Any]:
    records = {s: json.loads((ctx.state / f"{s}.json").read_text(encoding="utf-8"))["stats"] for s in STEPS[:-1]}
    figs = sorted(p.name for p in (ctx.out / FIGURES_DIR).glob("*.png"))
    text = render_report(
        cfg=ctx.cfg,
        views=pq.read_table(ctx.out / f"{VIEWS_FILE}.parquet").to_pylist(),
        lengths=pq.read_table(ctx.out / f"{LENGTHS_FILE}.parquet").to_pylist(),
        stats=records,
        figures=[f"{FIGURES_DIR}/{f}" for f in figs],
        duplicates_dir=duplicates_dir_name(ctx.cfg),
    )
    with atomic_path(ctx.out / REPORT_FILE) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return {"report": REPORT_FILE, **_write_near_dup(ctx)}


# ------------------------------------------------------------------------------------------------- runner

_STEP_FUNCS: dict[str, Callable[[_Ctx], dict[str, Any]]] = {
    "scan": _step_scan,
    "exact": _step_exact,
    "candidates": _step_candidates,
    "jaccard": _step_jaccard,
    "duplicates": _step_duplicates,
    "clusters": _step_clusters,
    "lengths": _step_lengths,
    "figures": _step_figures,
    "report": _step_report,
}


def step_outputs(step: str, cfg: dict[str, Any]) -> list[str]:
    """Paths (relative to the out dir) a finished step has written; a record without them is not trusted."""
    return {
        "scan": ["_work/docs.parquet", "_work/bands.u64"],
        "exact": ["_work/rep.npy", GROUPS_FILE],
        "candidates": ["_work/candidates.npy"],
        "jaccard": ["_work/pairs.parquet"],
        "duplicates": [duplicates_dir_name(cfg)],
        "clusters": [f"near_dup_clusters_{tag(t)}.jsonl" for t in cfg["cluster_thresholds"]]
        + [f"{VIEWS_FILE}.parquet", f"{VIEWS_FILE}.json", RATES_FILE],
        "lengths": [DOC_COUNTS_FILE, HISTOGRAM_FILE, f"{LENGTHS_FILE}.parquet", f"{LENGTHS_FILE}.json"],
        "figures": [FIGURES_DIR],
        "report": [REPORT_FILE, NEAR_DUP_DIR],
    }[step]


def _make_ctx(documents, out_dir, cfg, length_documents, signature_files, token_counts, workers) -> _Ctx:
    _check_cfg(cfg)
    lengths = length_documents or documents
    inputs = {
        "documents": [_fingerprint(documents.files), documents.source_ids, documents.default_source],
        "lengths": [_fingerprint(lengths.files), lengths.source_ids, lengths.default_source],
        "signatures": _fingerprint(signature_files),
        "token_counts": _fingerprint(token_counts),
    }
    return _Ctx(documents, lengths, Path(out_dir), cfg, [Path(p) for p in signature_files],
                [Path(p) for p in token_counts], max(1, workers), _run_key(inputs, cfg))


def _input_list(corpus: CorpusFiles, out: Path, old: dict[str, Any] | None) -> dict[str, Any]:
    """The folder (relative to the out dir, so the tree moves as one) and, in read order, the name,
    bytes and sha256 of each file: content only, so the same corpus gives the same list wherever its
    stage folders are keyed. A hash in `old` (same run key) for the same name and size is reused."""
    prior = (old or {}).get("files", [])
    entries = []
    for i, f in enumerate(corpus.files):
        size = Path(f).stat().st_size
        same = prior[i] if i < len(prior) and prior[i].get("name") == Path(f).name and prior[i].get("bytes") == size else None
        entries.append({"name": Path(f).name, "bytes": size, "sha256": same["sha256"] if same else sha256_file(Path(f))})
    root = corpus.root
    if root is None:  # files handed over without a folder: the deepest folder holding them all
        root = Path(os.path.commonpath([str(Path(f).resolve().parent) for f in corpus.files]))
    return {"corpus_dir": Path(os.path.relpath(Path(root).resolve(), out.resolve())).as_posix(), "files": entries}


def _write_inputs(ctx: _Ctx) -> None:
    """`_INPUTS.json`: the files this analysis read and the thresholds its tables were cut at, so a check
    given only the out dir verifies against exactly them. Rehashed only when the run key changed."""
    old = read_inputs(ctx.out)
    same_key = old is not None and old.get("key") == ctx.key
    value = {
        "key": ctx.key,
        "documents": _input_list(ctx.documents, ctx.out, old.get("documents") if same_key else None),
        "lengths": _input_list(ctx.lengths, ctx.out, old.get("lengths") if same_key else None),
        "settings": {"pair_threshold": ctx.cfg["pair_threshold"], "cluster_thresholds": ctx.cfg["cluster_thresholds"],
                     "shingle_size": ctx.cfg["shingle_size"],
                     "duplicates": duplicates_dir_name(ctx.cfg), "groups": GROUPS_FILE,
                     "clusters": {tag(t): f"near_dup_clusters_{tag(t)}.jsonl" for t in ctx.cfg["cluster_thresholds"]}},
    }
    if value != old:
        _write_json(ctx.out / INPUTS_FILE, value)


def _is_done(ctx: _Ctx, step: str) -> bool:
    rec = ctx.state / f"{step}.json"
    if not rec.is_file():
        return False
    try:
        key = json.loads(rec.read_text(encoding="utf-8")).get("key")
    except json.JSONDecodeError:
        return False
    return key == ctx.key and all((ctx.out / p).exists() for p in step_outputs(step, ctx.cfg))


def run_analysis(
    documents: CorpusFiles,
    out_dir: str | Path,
    cfg: dict[str, Any],
    *,
    length_documents: CorpusFiles | None = None,
    signature_files: Sequence[Path] = (),
    token_counts: Sequence[Path] = (),
    steps: Sequence[str] | None = None,
    force: bool = False,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the analysis steps (all, or `steps` plus the unfinished steps before them); return stats.

    documents: the corpus measured for duplication; length_documents: the corpus measured for token
    lengths (default: the same); signature_files: dedup signature files to reuse instead of computing
    MinHash; token_counts: token streams' token_counts.parquet files to reuse per tokenizer name.
    cfg is the resolved `analysis` config section. force reruns the requested steps even when finished.
    """
    ctx = _make_ctx(documents, out_dir, cfg, length_documents, signature_files, token_counts, workers)
    for unknown in set(steps or ()) - set(STEPS):
        raise AnalysisError(f"unknown step {unknown!r}; steps are {list(STEPS)}")
    last = max((STEPS.index(s) for s in steps), default=len(STEPS) - 1) if steps else len(STEPS) - 1
    ctx.out.mkdir(parents=True, exist_ok=True)
    for folder in (ctx.out, ctx.work, ctx.state):
        remove_stale_temps(folder)
    _write_inputs(ctx)
    result: dict[str, Any] = {
        "out_dir": str(ctx.out), "key": ctx.key, "ran": [], "skipped": [], "steps": {}, "seconds": {}, "peak_rss_mb": {}
    }
    rerun_rest = False
    for step in STEPS[: last + 1]:
        wanted_force = force and (steps is None or step in steps)
        if not rerun_rest and not wanted_force and _is_done(ctx, step):
            result["skipped"].append(step)
            result["steps"][step] = json.loads((ctx.state / f"{step}.json").read_text(encoding="utf-8"))["stats"]
            continue
        rerun_rest = True
        (ctx.state / f"{step}.json").unlink(missing_ok=True)
        for later in STEPS[STEPS.index(step) + 1 :]:
            (ctx.state / f"{later}.json").unlink(missing_ok=True)
        if log:
            log(f"analysis: {step} ...")
        reset_peak_rss()
        t0 = time.monotonic()
        stats = _STEP_FUNCS[step](ctx)
        seconds = round(time.monotonic() - t0, 3)
        ctx.state.mkdir(parents=True, exist_ok=True)
        _write_json(ctx.state / f"{step}.json", {"step": step, "key": ctx.key, "stats": stats})
        result["ran"].append(step)
        result["steps"][step] = stats
        result["seconds"][step] = seconds
        result["peak_rss_mb"][step] = peak_rss_mb()
        if log:
            log(f"analysis: {step} done in {seconds:.1f} s")
    result["outputs"] = {s: step_outputs(s, cfg) for s in STEPS[: last + 1]}
    if (ctx.out / REPORT_FILE).is_file() and last == len(STEPS) - 1:
        result["report_path"] = str(ctx.out / REPORT_FILE)
        result["report_markdown"] = (ctx.out / REPORT_FILE).read_text(encoding="utf-8")
        result["figures"] = sorted(str(p) for p in (ctx.out / FIGURES_DIR).glob("*.png"))
    return result


def plan_analysis(
    documents: CorpusFiles,
    cfg: dict[str, Any],
    *,
    length_documents: CorpusFiles | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Dry run: per step, estimated seconds, disk and peak memory from metadata counts (nothing is read
    but Parquet footers)."""
    _check_cfg(cfg)
    docs, text_bytes = corpus_size(documents)
    l_docs, l_bytes = corpus_size(length_documents) if length_documents else (docs, text_bytes)
    steps = []
    for step in STEPS:
        d, b = (l_docs, l_bytes) if step == "lengths" else (docs, text_bytes)
        steps.append({"step": step, **costs.estimate(step, d, b, len(cfg["tokenizers"]), workers)})
    return {
        "docs": docs,
        "text_bytes": text_bytes,
        "length_docs": l_docs,
        "length_text_bytes": l_bytes,
        "steps": steps,
        "total_seconds": round(sum(s["seconds"] for s in steps), 1),
        "total_disk_bytes": sum(s["disk_bytes"] for s in steps),
        "peak_rss_bytes": max(s["peak_rss_bytes"] for s in steps),
    }


def clear_work(out_dir: str | Path) -> None:
    """Delete the intermediate `_work/` and `_state/` folders (the next run starts from scratch)."""
    for name in ("_work", "_state"):
        shutil.rmtree(Path(out_dir) / name, ignore_errors=True)


# --- The stage as the Dagster layer runs it: a stage record keyed by content, checks from verify/ ------------

STAGE = "analysis"
CODE_VERSION = "4"  # 2: near_duplicates carry intersection/union, jaccard rounded up; 3: _INPUTS.json; 4: near_dup/
INTERNAL = ("_state", "_work")  # step records and intermediate arrays of the resumable CLI run


def _graph_inputs(layout: Layout, source_ids: list[str]) -> tuple[CorpusFiles, CorpusFiles, list[Path], list[Path], dict[str, Any]]:
    """(clean documents, published shards, signature files, token counts, key inputs) of the graph's analysis."""

    documents = corpus_from_sources({sid: clean_doc_files(layout, sid) for sid in sorted(source_ids)},
                                    root=layout.stage("clean"))
    verified_shards(layout)  # the shards corpus_from_dir reads, checked against the publish record
    lengths = corpus_from_dir(layout.shards)
    signatures = []
    for sid in sorted(source_ids):
        try:
            signatures.append(signature_file(layout, sid))
        except CorpusError:
            pass  # no signatures yet for this source: the analysis computes its own
    try:
        counts = [token_counts_file(layout)]
    except CorpusError:
        counts = []
    inputs = {
        "clean": [[sid, clean_record(layout, sid).key] for sid in sorted(source_ids)],
        "shards": [[e["name"], e["sha256"]] for e in read_manifest(layout)["shards"]],
        "token_counts": [sha256_file(p) for p in counts if p.exists()],
    }
    return documents, lengths, signatures, [p for p in counts if p.exists()], inputs


@records.locked(lambda a: "analysis")
def run_analysis_stage(layout: Layout, resolved: dict[str, Any], source_ids: list[str], log: Callable | None = None) -> dict[str, Any]:
    """Analyse the clean (pre-dedup) documents of `source_ids` and the published shards into analysis/<ds>/<ver>/.

    Cached under a key of the clean keys, the shard hashes, the token counts and the `analysis` settings.
    """

    documents, lengths, signatures, counts, inputs = _graph_inputs(layout, source_ids)
    settings = output_settings(resolved, STAGE)
    key = stage_key(STAGE, CODE_VERSION, inputs, settings)
    folder = layout.stage(STAGE)
    done = records.cached(folder, key)
    if done is not None:
        return {**done.stats, "cached": True, "key": key}
    records.begin(folder)
    out = layout.analysis
    result = run_analysis(documents, out, resolved[STAGE], length_documents=lengths, signature_files=signatures,
                          token_counts=counts, workers=resolved["workers"], log=log)
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.relative_to(out).parts[0] not in INTERNAL)
    stats = {k: result[k] for k in ("steps", "report_path", "figures", "outputs") if k in result}
    stats = json.loads(json.dumps(stats, default=str))
    records.commit(folder, StageRecord(
        stage=STAGE, key=key, code_version=CODE_VERSION, inputs=inputs, settings=settings,
        output_dir=os.path.relpath(out, folder), outputs=records.describe_outputs(out, names), files={"analysis": names},
        stats={**stats, "sources": sorted(source_ids)},
    ))
    return {**stats, "sources": sorted(source_ids), "cached": False, "key": key, "ran": result.get("ran", [])}


def analysis_record(layout: Layout) -> Any:
    """The record of the last analysis (UpstreamMissing when it never ran)."""

    return records.require_record(layout.stage(STAGE), "corpus_analysis")


def _verify_module(name: str) -> Any:
    """A module of the independent verification scripts (top-level verify/, shipped in the wheel as
    corpus_dagster.verify): they share no code with the pipeline."""
    try:
        return importlib.import_module(f"corpus_dagster.verify.{name}")
    except ImportError as exc:
        raise AnalysisError(f"the independent verification scripts (verify/{name}.py) are not importable: {exc}") from exc


def verify_analysis(layout: Layout, resolved: dict[str, Any], which: str) -> Any:
    """Run one independent verification of the last analysis: `clusters`, `exact_groups` or `duplicates_sample`.

    The samples (clusters recomputed within `verify_cluster_bytes`, records re-scored) are seeded by
    `verify_seed` and the analysis key, so each new build checks others."""

    record = analysis_record(layout)
    files = [p for sid in record.stats["sources"] for p in clean_doc_files(layout, sid)]
    cfg = resolved[STAGE]
    out = layout.analysis
    seed = f"{cfg['verify_seed']}:{record.key}"  # each new build draws other samples
    reports = []
    if which == "clusters":
        mod = _verify_module("cluster_jaccard")
        thresholds = cfg["cluster_thresholds"]
        results = mod.check_cluster_files(files, [(out / f"near_dup_clusters_{tag(t)}.jsonl", t) for t in thresholds],
                                          max_pairs=cfg["verify_cluster_pairs"], seed=seed,
                                          max_bytes=cfg["verify_cluster_bytes"])
        reports += [(f"t{tag(t)[1:]}", r) for t, r in zip(thresholds, results, strict=True)]
    elif which == "exact_groups":
        reports.append(("exact", _verify_module("exact_groups").check_exact_groups(files, out / GROUPS_FILE)))
    elif which == "duplicates_sample":
        mod = _verify_module("rescore_sample")
        reports.append(("sample", mod.check_duplicates_sample(files, out / duplicates_dir_name(cfg), cfg["pair_threshold"],
                                                               cfg["verify_sample"], seed)))
    else:
        raise AnalysisError(f"unknown verification {which!r}")
    report = CheckReport()
    for name, r in reports:
        for failure in r.get("failures", []):
            report.fail(f"{name}: {failure}")
        report.metadata.update({f"{name}_{k}": v for k, v in r.items() if isinstance(v, int | float | str) and k != "passed"})
    return report
