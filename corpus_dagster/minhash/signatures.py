"""Per-source MinHash signature files: read clean documents, hash them in batches, write one Parquet.

Beside each signature: the text's UTF-8 bytes, words and shingles, so that later steps that need those
counts (the corpus analysis) read them here instead of reading and tokenizing the texts again.

Cached per source (the `minhash_signatures[source_id]` partition): only this source is read.
The file records the settings it was computed with, so the global step refuses a stale one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.settings import NearDupSettings
from corpus_dagster.lib.minhash import batch_signatures, permutations, signature_dtype
from corpus_dagster.lib.text import byte_batches

SIGNATURE_META_KEY = b"corpus_dagster.dedup.signature"
SIGNATURE_FORMAT = 2
# Settings that change a signature value; a signature file written with others is stale.
SIGNATURE_SETTINGS = ("num_perm", "seed", "scheme", "shingle_size")


def signature_schema(cfg: NearDupSettings) -> pa.Schema:
    """Arrow schema of a signature file for the `near_dup` section (settings in its metadata)."""
    value_type = pa.uint32() if signature_dtype(cfg.scheme) == np.uint32 else pa.uint64()
    meta = {k: getattr(cfg, k) for k in SIGNATURE_SETTINGS} | {"format": SIGNATURE_FORMAT}
    return pa.schema(
        [
            ("id", pa.string()),
            ("n_bytes", pa.int64()),
            ("n_words", pa.int32()),
            ("n_shingles", pa.int32()),
            ("signature", pa.list_(value_type, cfg.num_perm)),
        ],
        metadata={SIGNATURE_META_KEY: json.dumps(meta, sort_keys=True).encode()},
    )


def signature_settings(path: Path) -> dict[str, Any]:
    """The settings recorded in a signature file (raises DedupInputError naming it when absent)."""
    meta = pq.read_schema(path).metadata or {}
    if SIGNATURE_META_KEY not in meta:
        raise DedupInputError(
            f"{path}: not a dedup signature file (no {SIGNATURE_META_KEY.decode()} metadata)"
        )
    return json.loads(meta[SIGNATURE_META_KEY])


def _open_docs(path: Path) -> pq.ParquetFile:
    if not Path(path).exists():
        raise DedupInputError(f"{path}: clean document file does not exist")
    pf = pq.ParquetFile(path)
    missing = {"id", "text"} - set(pf.schema_arrow.names)
    if missing:
        raise DedupInputError(f"{path}: clean document file lacks column(s) {sorted(missing)}")
    return pf




def _signature_task(path: str, row_group: int, cfg: NearDupSettings) -> pa.Table:
    """Signatures of one row group of one clean document file (runs in a worker process)."""
    table = pq.ParquetFile(path).read_row_group(row_group, columns=["id", "text"])
    texts = table.column("text").combine_chunks()
    a, b = permutations(cfg.num_perm, cfg.seed, cfg.scheme)
    sigs, words, shingles = [], [], []
    for start, stop in byte_batches(texts, cfg.batch_bytes):
        sig, n_words, n_shingles = batch_signatures(
            texts.slice(start, stop - start), cfg.shingle_size, a, b, cfg.scheme
        )
        sigs.append(sig)
        words.append(n_words)
        shingles.append(n_shingles)
    schema = signature_schema(cfg)
    if not sigs:
        return schema.empty_table()
    sig = np.concatenate(sigs)
    n_shingles = np.concatenate(shingles)
    values = pa.array(sig.reshape(-1), type=schema.field("signature").type.value_type)
    signature = pa.FixedSizeListArray.from_arrays(values, cfg.num_perm, mask=pa.array(n_shingles == 0))
    return pa.table(
        {
            "id": table.column("id").combine_chunks(),
            "n_bytes": pc.fill_null(pc.binary_length(texts.cast(pa.large_binary())), 0),
            "n_words": pa.array(np.concatenate(words).astype(np.int32)),
            "n_shingles": pa.array(n_shingles.astype(np.int32)),
            "signature": signature,
        },
        schema=schema,
    )


def compute_signatures(
    doc_files: list[Path], out_path: Path, cfg: NearDupSettings, workers: int = 1
) -> dict[str, Any]:
    """Write the MinHash signature file of one source's clean documents, in document order; return stats.

    cfg is the `near_dup` section. A document with fewer words than shingle_size gets a null
    signature (it can only be caught as an exact duplicate). The output is written atomically and is
    byte-identical for any `workers` value: the unit of work is one input row group, written in order.
    """
    start = time.monotonic()
    jobs = []
    for path in doc_files:
        pf = _open_docs(Path(path))
        jobs.extend((str(path), rg, cfg) for rg in range(pf.num_row_groups))
    schema = signature_schema(cfg)
    docs = no_sig = words = shingles = 0
    with atomic_path(out_path) as tmp:
        with pq.ParquetWriter(
            tmp, schema, compression="zstd", compression_level=1, use_dictionary=False
        ) as writer:
            for table in ordered_map(_signature_task, jobs, workers):
                if table.num_rows == 0:
                    continue
                writer.write_table(table)
                n_shingles = table.column("n_shingles").to_numpy()
                docs += table.num_rows
                no_sig += int((n_shingles == 0).sum())
                words += int(pc.sum(table.column("n_words")).as_py() or 0)
                shingles += int(n_shingles.sum())
    seconds = time.monotonic() - start
    return {
        "docs": docs,
        "no_signature": no_sig,
        "words": words,
        "shingles": shingles,
        "files": len(doc_files),
        "seconds": round(seconds, 3),
        "docs_per_s": round(docs / seconds, 1) if seconds > 0 else None,
    }
