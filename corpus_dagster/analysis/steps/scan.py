"""Step `scan`: one pass over the documents for ids, digests, sizes, word counts and (unless the minhash
stage's signature files are reused) LSH band keys; the document table sorted by id, ids checked unique.

With signature files, the byte and word counts are theirs (the minhash stage counted them with the same
rules): the texts are not tokenized a second time. When the documents also carry the clean stage's
`sha256` column (the SHA-256 of the UTF-8 text, as the signature files' documents do), the texts are not
read at all."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.analysis.inputs import input_files
from corpus_dagster.analysis.outputs import write_table
from corpus_dagster.analysis.steps.context import BANDS_FILE, DOCS_TABLE, StepContext
from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import row_group_starts
from corpus_dagster.core.settings import AnalysisSettings, NearDupSettings
from corpus_dagster.lib.lsh import band_hashes
from corpus_dagster.lib.minhash import batch_signatures, permutations
from corpus_dagster.lib.near_graph import GraphSpec
from corpus_dagster.lib.shingle_hashing import text_word_hashes
from corpus_dagster.lib.text import byte_batches


def _scan_task(path: str, rg: int, row0: int, stem: str, width: int, has: dict[str, bool], cfg: AnalysisSettings,
               near: NearDupSettings, spec: GraphSpec | None, count_words: bool, read_text: bool,
               text_column: str = "text") -> dict[str, Any]:
    """Ids, digests, sizes, word counts (when `count_words`; band keys with a `spec`) of one row group (runs
    in a worker). Without `read_text`, the digests come from the `sha256` column and the sizes are left
    to the signature files (zeros here)."""
    cols = ([text_column] if read_text else ["sha256"]) + [c for c in ("id", "source_id", "split") if has[c]]
    table = pq.ParquetFile(path).read_row_group(rg, columns=cols)
    n = table.num_rows
    if has["id"]:
        ids = table.column("id").combine_chunks().cast(pa.string())
    else:
        ids = pa.array([f"{stem}_{row0 + i:0{width}d}" for i in range(n)], pa.string())
    if not read_text:
        return {"ids": ids, "source": _optional(table, "source_id", has), "split": _optional(table, "split", has),
                "digests": _digest_column(table.column("sha256"), path, rg), "n_bytes": np.zeros(n, np.int64),
                "n_words": np.zeros(n, np.int64), "bands": np.zeros((0, 0), np.uint64)}
    texts = table.column(text_column).combine_chunks()
    raw = texts.cast(pa.large_binary())
    digests = np.frombuffer(_digests(raw), dtype=np.uint8).reshape(n, 32)
    n_bytes = pc.fill_null(pc.binary_length(raw), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    words, bands = [], []
    a = b = None
    if spec is not None:  # the signatures dedup's minhash stage computes, banded as the graph is
        a, b = permutations(near.num_perm, near.seed, near.scheme)
    for start, stop in byte_batches(texts, cfg.batch_bytes) if count_words or spec is not None else ():
        batch = texts.slice(start, stop - start)
        if spec is not None:
            sig, n_words, _ = batch_signatures(batch, near.shingle_size, a, b, near.scheme)
            bands.append(band_hashes(np.ascontiguousarray(sig[:, : spec.width]), spec.bands))
        else:
            n_words = np.diff(text_word_hashes(batch)[1])
        words.append(n_words)
    out = {
        "ids": ids,
        "source": _optional(table, "source_id", has),
        "split": _optional(table, "split", has),
        "digests": digests,
        "n_bytes": n_bytes,
        "n_words": np.concatenate(words) if words else np.zeros(n if not count_words else 0, np.int64),
        "bands": np.concatenate(bands) if bands else np.zeros((0, spec.bands if spec else 0), np.uint64),
    }
    return out



def _optional(table: pa.Table, column: str, has: dict[str, bool]) -> pa.Array | None:
    return table.column(column).combine_chunks().cast(pa.string()) if has[column] else None


def _digests(raw: pa.Array) -> bytes:
    """Concatenated SHA-256 digests of every value (null as empty text)."""
    return b"".join(hashlib.sha256(v or b"").digest() for v in raw.to_pylist())


def _digest_column(column: pa.ChunkedArray, path: str, rg: int) -> np.ndarray:
    """(n, 32) uint8 of a `sha256` column; AnalysisError unless every value is 32 bytes."""
    values = column.combine_chunks()
    if not pa.types.is_fixed_size_binary(values.type):
        values = values.cast(pa.binary())
        lengths = pc.binary_length(values)
        if values.null_count or not pc.all(pc.equal(lengths, 32)).as_py():
            raise AnalysisError(f"{path}: row group {rg}: the sha256 column holds a value that is not 32 bytes")
        values = values.cast(pa.binary(32))
    elif values.type.byte_width != 32 or values.null_count:
        raise AnalysisError(f"{path}: row group {rg}: the sha256 column is not 32-byte digests without nulls")
    data = np.frombuffer(values.buffers()[1], dtype=np.uint8)[values.offset * 32 : (values.offset + len(values)) * 32]
    return data.reshape(len(values), 32)



def _signature_counts(ctx: StepContext, table: pa.Table, columns: list[str]) -> dict[str, pa.Array]:
    """Counts of every document of `table` (id order) from the signature files: `columns` of n_words,
    n_bytes."""
    counts = pl.concat([pl.from_arrow(pq.read_table(p, columns=["id", *columns])) for p in ctx.signature_files])
    joined = (pl.DataFrame({"id": table.column("id")}).with_row_index("pos")
              .join(counts, on="id", how="left").sort("pos"))
    missing = joined.filter(pl.col(columns[0]).is_null())
    if missing.height:
        raise AnalysisError(f"document {missing['id'][0]!r} has no row in the given signature files; "
                            "pass them all or none")
    return {c: pa.array(joined[c].to_numpy().astype(np.int64)) for c in columns}


def step_scan(ctx: StepContext) -> dict[str, Any]:
    cfg = ctx.cfg
    spec = ctx.spec if not ctx.signature_files and ctx.graph is None else None
    count_words = not ctx.signature_files
    files = input_files(ctx.documents)
    read_text = count_words or not all(has["sha256"] for _, _, _, has, _ in files)
    jobs, meta = [], []
    for i, path, pf, has, rows in files:
        starts = row_group_starts(pf)
        width = max(5, len(str(max(rows - 1, 0))))
        for rg in range(pf.metadata.num_row_groups):
            jobs.append((str(path), rg, int(starts[rg]), path.stem, width, has, cfg, ctx.near, spec, count_words,
                         read_text, ctx.documents.text_column))
            meta.append((i, int(starts[rg]), pf.metadata.row_group(rg).num_rows))
    ctx.work.mkdir(parents=True, exist_ok=True)
    parts: dict[str, list] = {k: [] for k in ("id", "source_id", "split", "file_no", "row", "n_bytes", "n_words")}
    digests = []
    bands_path = ctx.out / BANDS_FILE
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
    if not count_words:
        counts = _signature_counts(ctx, table, ["n_words"] if read_text else ["n_words", "n_bytes"])
        for name, values in counts.items():
            table = table.set_column(table.schema.get_field_index(name), name, values)
    ids = table.column("id").combine_chunks()
    same = pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy(zero_copy_only=False)
    if same.any():
        k = int(np.flatnonzero(same)[0])
        f1 = ctx.documents.files[table.column("file_no")[k].as_py()]
        f2 = ctx.documents.files[table.column("file_no")[k + 1].as_py()]
        raise AnalysisError(f"document id {ids[k].as_py()!r} occurs twice ({f1}, {f2}); ids must be unique")
    write_table(table, ctx.out / DOCS_TABLE, row_group=1 << 20)
    words = table.column("n_words").to_numpy()
    return {
        "docs": n_total,
        "text_bytes": int(pc.sum(table.column("n_bytes")).as_py()),
        "files": len(ctx.documents.files),
        "no_shingle_docs": int((words < ctx.near.shingle_size).sum()),
        "signatures": ("read from the near-duplicate graph" if ctx.graph is not None else
                       "computed" if spec is not None else "reused from dedup signature files"),
        "texts_read": read_text,
    }
