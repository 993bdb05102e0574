"""The manifest: keys in the order of docs/formats.md, counts from the stage records, canonical bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_dagster.clean.outputs import BASE_FILTER_KEYS
from corpus_dagster.core.config import config_sha256, load_schema, schema_violations
from corpus_dagster.core.settings import Settings
from corpus_dagster.lib.near_graph import graph_spec

PII_KEYS = ("emails", "phones", "cards", "ips", "keys")
DEDUP_COUNT_KEYS = ("exact_dropped", "near_dropped", "decontaminated")


def build_manifest(
    settings: Settings,
    shards: list[dict[str, Any]],
    filters: dict[str, int],
    repairs: dict[str, int] | None,
    dedup_counts: dict[str, int],
    pii_counts: dict[str, int],
    ledger_ref: str,
    ledger_sha256: str,
) -> dict[str, Any]:
    """Assemble the manifest dict in the contract's key order; missing stage counts are zero."""
    dedup_cfg = settings.dedup
    manifest: dict[str, Any] = {
        "dataset": settings.dataset,
        "version": settings.version,
        "n_docs": sum(s["rows"] for s in shards),
        "n_shards": len(shards),
        "shards": [{"name": s["name"], "sha256": s["sha256"], "rows": s["rows"]} for s in shards],
        "filters": {k: int(filters.get(k, 0)) for k in BASE_FILTER_KEYS}
        | {k: int(v) for k, v in filters.items() if k not in BASE_FILTER_KEYS},
    }
    if repairs is not None:
        manifest["repairs"] = {k: int(v) for k, v in repairs.items()}
    manifest["dedup"] = {k: int(dedup_counts.get(k, 0)) for k in DEDUP_COUNT_KEYS} | {
        "jaccard_threshold": dedup_cfg.jaccard_threshold,
        "num_perm": settings.near_dup.num_perm,
        "bands": graph_spec(settings.near_dup, dedup_cfg.jaccard_threshold).bands,  # what the engine used
        "ngram": dedup_cfg.ngram,
    }
    manifest["pii"] = {k: int(pii_counts.get(k, 0)) for k in PII_KEYS}
    manifest["ledger_ref"] = ledger_ref
    manifest["ledger_sha256"] = ledger_sha256
    manifest["config_sha256"] = config_sha256(settings.resolved)
    return manifest


def ledger_ref_of(ledger: Path, root: Path) -> str:
    """The manifest's `ledger_ref`: the ledger's path relative to the artifacts root (`corpus/LEDGER.jsonl`
    by default), so the manifest names the same file on any host; the absolute path when config
    `paths.ledger` puts the ledger outside the root (there is no host-free name for it then). POSIX form."""
    ledger, root = Path(ledger).resolve(), Path(root).resolve()
    try:
        return ledger.relative_to(root).as_posix()
    except ValueError:
        return ledger.as_posix()


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """Canonical bytes: 2-space indent, key order as built, UTF-8, trailing newline."""
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def manifest_violations(manifest: Any) -> list[str]:
    """Every violation of schemas/corpus-manifest.schema.json."""
    return schema_violations(manifest, load_schema("corpus-manifest.schema.json"))
