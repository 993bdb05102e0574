"""Write small published-shard folders (shards + _MANIFEST.json, per the file contract in docs/formats.md) from texts.

For tests and benchmarks of the token streams, so they do not depend on the full ingest-to-publish
pipeline. The rows follow the contract: ids `<source_id>:<k>`, sorted by id in byte order, `split`
from the sha256 rule, zstd Parquet with the contract's columns in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.documents import SHARD_SCHEMA


def split_of(digest: bytes, val_permille: int) -> str:
    """The contract's split rule: `val` when the first 8 digest bytes (big-endian) mod 1000 < val_permille."""
    return "val" if int.from_bytes(digest[:8], "big") % 1000 < val_permille else "train"


def write_sample_shards(
    texts: Sequence[str],
    out_dir: str | Path,
    *,
    dataset: str = "sample",
    version: str = "v0",
    source_id: str = "sample",
    shard_rows: int = 100,
    val_permille: int = 100,
    row_group_rows: int | None = None,
) -> dict[str, Any]:
    """Write `texts` as documents `<source_id>:<k>` into shards under `out_dir` (row groups of at most
    `row_group_rows` rows, default one per shard); returns the manifest."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k, text in enumerate(texts):
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        rows.append((f"{source_id}:{k}", text, digest))
    rows.sort(key=lambda r: r[0].encode("utf-8"))
    n_shards = max(1, -(-len(rows) // shard_rows))
    entries = []
    for i in range(n_shards):
        chunk = rows[i * shard_rows : (i + 1) * shard_rows]
        base = i * shard_rows
        table = pa.table(
            [
                [r[0] for r in chunk],
                [r[1] for r in chunk],
                [source_id] * len(chunk),
                [f"file:///sample/{source_id}.jsonl#{r[0].split(':')[1]}" for r in chunk],
                ["CC0-1.0"] * len(chunk),
                ["en"] * len(chunk),
                [len(r[1]) for r in chunk],
                [r[2] for r in chunk],
                [base + j for j in range(len(chunk))],
                [0] * len(chunk),
                [split_of(r[2], val_permille) for r in chunk],
            ],
            schema=SHARD_SCHEMA,
        )
        name = f"shard-{i:05d}-of-{n_shards:05d}.parquet"
        pq.write_table(table, out / name, compression="zstd", compression_level=3, row_group_size=row_group_rows)
        entries.append(
            {
                "name": name,
                "sha256": hashlib.sha256((out / name).read_bytes()).hexdigest(),
                "rows": len(chunk),
            }
        )
    manifest = {
        "dataset": dataset,
        "version": version,
        "n_docs": len(rows),
        "n_shards": n_shards,
        "shards": entries,
        "filters": {"lang": 0, "gopher": 0, "repetition": 0, "ppl": 0},
        "dedup": {
            "exact_dropped": 0,
            "near_dropped": 0,
            "decontaminated": 0,
            "jaccard_threshold": 0.8,
            "num_perm": 128,
            "bands": 16,
            "ngram": 13,
        },
        "pii": {"emails": 0, "phones": 0, "cards": 0, "ips": 0, "keys": 0},
        "ledger_ref": "sample",
        "config_sha256": hashlib.sha256(b"sample").hexdigest(),
    }
    (out / "_MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def sample_texts(limit: int | None = None) -> list[str]:
    """Real English documents shipped with Python (pydoc topic pages), in a fixed order."""
    from pydoc_data.topics import topics

    texts = [topics[k] for k in sorted(topics)]
    return texts[:limit] if limit is not None else texts


def train_sample_bpe(
    texts: Sequence[str],
    out_path: str | Path,
    *,
    vocab_size: int = 2000,
    special_tokens: Sequence[str] = ("<|endoftext|>", "<s>"),
) -> Path:
    """Train a small byte-level BPE with `tokenizers` on `texts` and save it as a tokenizer.json.

    Stands in for a real model's tokenizer file (Llama, Qwen, ...) in tests and benchmarks; byte-level, so
    every text decodes back exactly.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    return out
