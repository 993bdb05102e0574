"""The `_TOKENS.json` manifest of a token-stream build: assemble, validate against its schema, read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_dagster.core.config import load_schema, schema_violations
from corpus_dagster.core.errors import TokenStreamError
from corpus_dagster.lib.tokenizers import TokenizerInfo
from corpus_dagster.tokenize.indexed import PartInfo

MANIFEST_NAME = "_TOKENS.json"
COUNTS_NAME = "token_counts.parquet"
SCHEMA_NAME = "tokens-manifest.schema.json"
FORMAT = "megatron-indexed-dataset-v1"



def build_manifest(
    *,
    dataset: str,
    version: str,
    tokenizer: TokenizerInfo,
    vocab_sha256: str,
    dtype: str,
    max_file_bytes: int,
    splits: dict[str, list[PartInfo]],
    counts: dict[str, Any],
    source: dict[str, Any],
) -> dict[str, Any]:
    """The manifest dict, keys in a fixed order (the file is part of the byte-identical output)."""
    split_entries = {}
    for split, parts in splits.items():
        split_entries[split] = {
            "n_docs": sum(p.n_docs for p in parts),
            "n_tokens": sum(p.n_tokens for p in parts),
            "files": [
                {
                    "prefix": p.prefix,
                    "n_docs": p.n_docs,
                    "n_tokens": p.n_tokens,
                    "bin": {"name": f"{p.prefix}.bin", "sha256": p.bin_sha256, "bytes": p.bin_bytes},
                    "idx": {"name": f"{p.prefix}.idx", "sha256": p.idx_sha256, "bytes": p.idx_bytes},
                }
                for p in parts
            ],
        }
    return {
        "dataset": dataset,
        "version": version,
        "format": FORMAT,
        "tokenizer": {
            "kind": tokenizer.kind,
            "name": tokenizer.name,
            "vocab_size": tokenizer.vocab_size,
            "vocab_sha256": vocab_sha256,
            "special_tokens": {
                "eod": {"token": tokenizer.eod_token, "id": tokenizer.eod_id},
                "bos": None
                if tokenizer.bos_id is None
                else {"token": tokenizer.bos_token, "id": tokenizer.bos_id},
            },
        },
        "dtype": dtype,
        "max_file_bytes": max_file_bytes,
        "n_docs": sum(e["n_docs"] for e in split_entries.values()),
        "n_tokens": sum(e["n_tokens"] for e in split_entries.values()),
        "splits": split_entries,
        "counts": counts,
        "source": source,
    }


def manifest_violations(manifest: Any) -> list[str]:
    """Every schema violation of a manifest (empty when valid)."""
    return schema_violations(manifest, load_schema(SCHEMA_NAME))


def dump_manifest(manifest: dict[str, Any]) -> bytes:
    """The manifest file bytes: indented JSON in key order, UTF-8, newline at the end."""
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_manifest(tokens_dir: str | Path) -> dict[str, Any]:
    """Read and schema-validate `_TOKENS.json`; TokenStreamError naming the file when missing or invalid."""
    path = Path(tokens_dir) / MANIFEST_NAME
    if not path.is_file():
        raise TokenStreamError(f"{path}: no token manifest (materialize token_streams first)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TokenStreamError(f"{path}: not valid JSON: {exc}") from exc
    violations = manifest_violations(manifest)
    if violations:
        raise TokenStreamError(f"{path}: breaks {SCHEMA_NAME}:\n" + "\n".join(f"  - {v}" for v in violations))
    return manifest
