"""The global dedup's key: the stage, its code version, its tables, and what its key hashes (every source's
clean and signature keys, the protected sets' content, the `dedup` and `near_dup` settings)."""


from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

from corpus_dagster.clean.outputs import clean_doc_files, clean_record
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_file, sha256_hex
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, load_ledger
from corpus_dagster.core.settings import DedupSettings, Settings
from corpus_dagster.core.stage import Stage
from corpus_dagster.dedup.protected import protected_set_specs
from corpus_dagster.minhash.outputs import SIGNATURE_SETTINGS, signature_key

DEDUP = "dedup"
DEDUP_CODE_VERSION = "4"  # 4: keepers by stable key (core.doc_keys), not by id
TABLES = ("dropped.parquet", "clusters.parquet", "pairs.parquet")

DEDUP_STAGE = Stage(DEDUP, DEDUP_CODE_VERSION)


def protected_hashes(dedup_cfg: DedupSettings) -> list[list[str]]:
    """[name, path, sha256] of every protected-set file: their content, not their mtime, enters the key."""
    out = []
    for spec in protected_set_specs(dedup_cfg):
        pattern = spec["path"]
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        out.extend([spec["name"], p, sha256_file(p) if Path(p).is_file() else "missing"] for p in paths)
    return out


def dedup_key(layout: Layout, settings: Settings, source_ids: list[str]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the global dedup over `source_ids`."""
    inputs = {
        "sources": [
            [sid, clean_record(layout, sid).key, signature_key(layout, sid, settings)[0]] for sid in sorted(source_ids)
        ],
        "protected": protected_hashes(settings.dedup),
        # what the stable keys are read from beyond the clean documents (keepers follow them)
        "keys": [[s.source_id, s.id_field, list(s.urls)] for s in key_sources(layout, source_ids)],
    }
    return DEDUP_STAGE.key(inputs, key_settings(settings)), inputs


def key_sources(layout: Layout, source_ids: list[str]) -> list[Source]:
    """The ledger rows of `source_ids` (sorted), whose id_field and URLs decide the documents' stable keys;
    a source no longer in the ledger keys by its ids (Source with no id_field)."""
    ledger = {s.source_id: s for s in load_ledger(layout.ledger)} if layout.ledger.is_file() else {}
    return [ledger.get(sid) or Source(sid, (), "jsonl", "") for sid in sorted(source_ids)]


def key_settings(settings: Settings) -> dict[str, Any]:
    """The settings that decide the dedup outputs: dedup's policy and the near-duplicate graph's shape."""
    return {"dedup": output_settings(settings.resolved, "dedup"), "near_dup": output_settings(settings.resolved, "near_dup")}


def block_source(layout: Layout, settings: Settings, source_id: str) -> tuple[str, str]:
    """(source id, content key) of one source for the near-duplicate graph's blocks: the sha256 of each of
    its clean document files (ids and texts) and the signature settings. Content only, unlike the stage
    keys, which hash upstream keys (a refetch of the same bytes at another time keeps its blocks)."""
    record = clean_record(layout, source_id)
    content = {
        "docs": [record.outputs[name]["sha256"] for name in record.files.get("docs", [])],
        "signature": output_settings(settings.resolved, "near_dup", SIGNATURE_SETTINGS),
    }
    return source_id, sha256_hex(json.dumps(content, sort_keys=True).encode())


def clean_bytes(layout: Layout, source_ids: list[str]) -> int:
    """Bytes of the clean Parquet files the dedup reads (for the progress lines)."""
    return sum(p.stat().st_size for sid in source_ids for p in clean_doc_files(layout, sid))


