"""The clean stage's per-part driver: raw part -> ids -> clean logic -> docs and rejects tables."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_dagster.atomic import atomic_write_bytes
from corpus_dagster.clean.pipeline import clean_texts
from corpus_dagster.ingest.fetch import raw_part_paths
from corpus_dagster.ingest.raw_parts import read_raw_part
from corpus_dagster.layout import Layout
from corpus_dagster.parallel import ordered_map
from corpus_dagster.stages.cache import cache_key, write_current
from corpus_dagster.store import CLEAN_DOC_SCHEMA, REJECT_SCHEMA, write_table


def clean_part(raw_path: Path, first_k: int, source_id: str, clean_cfg: dict[str, Any], out_dir: Path, index: int) -> dict:
    """Clean one raw part into docs-<i>.parquet and rejects-<i>.parquet; returns the part's stats."""
    docs_path = out_dir / f"docs-{index:05d}.parquet"
    rejects_path = out_dir / f"rejects-{index:05d}.parquet"
    stats_path = out_dir / f"stats-{index:05d}.json"
    if docs_path.exists() and rejects_path.exists() and stats_path.exists():
        return json.loads(stats_path.read_text())  # resumed: this part completed in an earlier run
    start = time.monotonic()
    records = list(read_raw_part(raw_path))
    outcome = clean_texts([r["text"] for r in records], clean_cfg, source_id)
    kept_idx = [i for i, reason in enumerate(outcome.reason) if reason is None]
    drop_idx = [i for i, reason in enumerate(outcome.reason) if reason is not None]

    def ids(idx: list[int]) -> list[str]:
        return [f"{source_id}:{first_k + i}" for i in idx]

    texts = [outcome.text[i] for i in kept_idx]
    docs = pa.table(
        {
            "id": ids(kept_idx),
            "text": texts,
            "source_id": [source_id] * len(kept_idx),
            "url": [records[i]["url"] for i in kept_idx],
            "license_spdx": [records[i]["license_spdx"] for i in kept_idx],
            "lang": [outcome.lang[i] for i in kept_idx],
            "n_chars": pa.array([len(t) for t in texts], pa.int32()),
            "sha256": pa.array([hashlib.sha256(t.encode("utf-8")).digest() for t in texts], pa.binary(32)),
            "repairs": pa.array([outcome.repairs[i] for i in kept_idx], pa.list_(pa.string())),
        },
        schema=CLEAN_DOC_SCHEMA,
    )
    rejects = pa.table(
        {
            "id": ids(drop_idx),
            "url": [records[i]["url"] for i in drop_idx],
            "reason": [outcome.reason[i] for i in drop_idx],
            "value": pa.array([outcome.value[i] for i in drop_idx], pa.float64()),
            "text": [outcome.text[i] for i in drop_idx],
        },
        schema=REJECT_SCHEMA,
    )
    write_table(docs, docs_path)
    write_table(rejects, rejects_path)
    stats = {
        "docs_in": len(records),
        "kept": docs.num_rows,
        "rejected": rejects.num_rows,
        "reasons": dict(sorted(Counter(r for r in outcome.reason if r is not None).items())),
        "repairs": dict(sorted(Counter(k for rs in outcome.repairs for k in rs).items())),
        "langs": dict(sorted(Counter(outcome.lang).items())),
        "bytes_in": sum(len(r["text"].encode("utf-8", errors="surrogatepass")) for r in records),
        "seconds": round(time.monotonic() - start, 3),
    }
    atomic_write_bytes(stats_path, json.dumps(stats, sort_keys=True).encode())
    return stats


def run_clean_source(layout: Layout, source_id: str, resolved: dict[str, Any], log: Any = None) -> dict[str, Any]:
    """Clean every raw part of a source (in parallel over parts), resuming parts that already completed."""
    parts, part_docs, record = raw_part_paths(layout, source_id)
    clean_cfg = resolved["clean"]
    key = cache_key(record["date"], record["files"], record["parts"], clean_cfg)
    folder = layout.stage("clean", source_id)
    out_dir = folder / key
    out_dir.mkdir(parents=True, exist_ok=True)
    offsets = [sum(part_docs[:i]) for i in range(len(part_docs))]
    jobs = [(p, offsets[i], source_id, clean_cfg, out_dir, i) for i, p in enumerate(parts)]
    per_part = []
    for i, stats in enumerate(ordered_map(clean_part, jobs, resolved["workers"])):
        per_part.append(stats)
        if log:
            log.info(f"{source_id}: part {i + 1}/{len(jobs)} cleaned ({stats['kept']} kept, {stats['rejected']} rejected)")
    total = summarize(per_part)
    write_current(folder, {  # also drops outputs of older configs / fetches
        "key": key,
        "docs": [f"{key}/docs-{i:05d}.parquet" for i in range(len(parts))],
        "rejects": [f"{key}/rejects-{i:05d}.parquet" for i in range(len(parts))],
        "stats": total,
    })
    return total


def summarize(per_part: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up part stats; dict keys sorted so the record is stable."""
    reasons: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    langs: Counter[str] = Counter()
    for s in per_part:
        reasons.update(s["reasons"])
        repairs.update(s["repairs"])
        langs.update(s.get("langs", {}))
    return {
        "parts": len(per_part),
        "docs_in": sum(s["docs_in"] for s in per_part),
        "kept": sum(s["kept"] for s in per_part),
        "rejected": sum(s["rejected"] for s in per_part),
        "bytes_in": sum(s["bytes_in"] for s in per_part),
        "reasons": dict(sorted(reasons.items())),
        "repairs": dict(sorted(repairs.items())),
        "langs": dict(sorted(langs.items())),
        "seconds": round(sum(s["seconds"] for s in per_part), 3),
    }
