"""Small published-shard folders (schema and manifest of the shards stage) for the release tests."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.config import fill_defaults, load_schema
from corpus_dagster.core.documents import SHARD_SCHEMA, shard_name
from corpus_dagster.core.settings import ReleaseSettings, TokenizeSettings

WORDS = (
    "river mountain library signal garden engine harbor silver winter market theory pattern lantern orbit "
    "meadow copper canyon bridge forest planet violin compass island thunder marble velvet crystal falcon"
).split()

SOURCES = [
    {"source_id": "alpha", "urls": ["file:///a.jsonl"], "format": "jsonl", "license_spdx": "CC-BY-4.0",
     "url_field": "link", "hub_dataset": "org/alpha-web", "category": "web"},
    {"source_id": "beta", "urls": ["file:///b.jsonl"], "format": "jsonl", "license_spdx": "CC-BY-4.0",
     "url_field": None, "category": "books"},
    {"source_id": "gamma", "urls": ["file:///g.jsonl"], "format": "jsonl", "license_spdx": "CC-BY-4.0",
     "url_field": "link"},
]


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
        for _ in range(sentences)
    )


def document(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(paragraph(rng, rng.randint(2, 5)) for _ in range(paragraphs))


def make_docs(seed: int = 0, per_source: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Documents of 1 to ~40 paragraphs (about 40 to 2,500 cl100k tokens), ids in byte order."""
    rng = random.Random(seed)
    per_source = per_source or {"alpha": 60, "beta": 40, "gamma": 30}
    docs = []
    for sid, n in per_source.items():
        for k in range(n):
            paras = rng.choice([1, 2, 3, 4, 6, 8, 10, 14, 20, 40])
            text = document(rng, paras)
            url = f"https://{sid}.example/{k}" if sid != "beta" else f"file:///data/beta-{k % 2}.jsonl#{k}"
            docs.append({"id": f"{sid}:{k}", "text": text, "source_id": sid, "url": url})
    return sorted(docs, key=lambda d: d["id"].encode())


def write_shards(folder: Path, docs: list[dict[str, Any]], shard_rows: int = 40, dataset: str = "demo",
                 version: str = "v1", row_group_rows: int | None = None) -> Path:
    """corpus/<dataset>/<version>/ with shards and a _MANIFEST.json; returns the folder. `row_group_rows`:
    rows per row group of a shard (default: one row group)."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = [docs[i:i + shard_rows] for i in range(0, len(docs), shard_rows)]
    entries = []
    for i, chunk in enumerate(chunks):
        t = pa.table(
            {
                "id": [d["id"] for d in chunk],
                "text": [d["text"] for d in chunk],
                "source_id": [d["source_id"] for d in chunk],
                "url": [d["url"] for d in chunk],
                "license_spdx": ["CC-BY-4.0"] * len(chunk),
                "lang": ["en"] * len(chunk),
                "n_chars": [len(d["text"]) for d in chunk],
                "sha256": [hashlib.sha256(d["text"].encode()).digest() for d in chunk],
                "minhash_cluster": list(range(len(chunk))),
                "pii_redactions": [0] * len(chunk),
                "split": ["train"] * len(chunk),
            },
            schema=SHARD_SCHEMA,
        )
        name = shard_name(i, len(chunks))
        pq.write_table(t, folder / name, row_group_size=row_group_rows)
        entries.append({"name": name, "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest(), "rows": len(chunk)})
    manifest = {
        "dataset": dataset, "version": version, "n_docs": len(docs), "n_shards": len(chunks), "shards": entries,
        "filters": {"lang": 3, "gopher": 5, "repetition": 1, "ppl": 0},
        "repairs": {"nul": 0, "control": 2, "mojibake": 1},
        "dedup": {"exact_dropped": 4, "near_dropped": 2, "decontaminated": 0, "jaccard_threshold": 0.8,
                  "num_perm": 128, "bands": 16, "ngram": 13},
        "pii": {"emails": 0, "phones": 0, "cards": 0, "ips": 0, "keys": 0},
        "ledger_ref": "corpus/LEDGER.jsonl", "ledger_sha256": "0" * 64, "config_sha256": "0" * 64,
    }
    (folder / "_MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def settings(**overrides: Any) -> ReleaseSettings:
    """The resolved release section with small buckets (64-token width from 64 to 512)."""
    full = fill_defaults({}, load_schema("corpus-config.schema.json"))
    s = full["release"] | {"bucket_width": 64, "min_tokens": 64, "max_tokens": 512, "max_segments": 3,
                           "per_bucket_cap": 12, "part_tokens": 3000}
    return ReleaseSettings.from_dict(s | overrides)


def tokenize_cfg() -> TokenizeSettings:
    return TokenizeSettings.from_dict(fill_defaults({}, load_schema("corpus-config.schema.json"))["tokenize"])


def build_kwargs(root: Path, docs: list[dict[str, Any]] | None = None, row_group_rows: int | None = None,
                 **overrides: Any) -> dict[str, Any]:
    """Arguments of build_release for a generated corpus under root (shards cut into row groups of
    `row_group_rows`, default one per shard)."""
    shards = write_shards(root / "corpus" / "demo" / "v1", docs if docs is not None else make_docs(),
                          row_group_rows=row_group_rows)
    kwargs: dict[str, Any] = {
        "shards_dir": shards,
        "out_dir": root / "release" / "demo" / "v1",
        "settings": settings(),
        "tokenize_cfg": tokenize_cfg(),
        "sources": SOURCES,
        "workers": 1,
    }
    return kwargs | overrides
