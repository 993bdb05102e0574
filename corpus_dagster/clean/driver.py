"""The clean stage's driver: all of its reading and writing.

Raw parts of one source -> ids -> clean logic -> per-part docs and rejects tables under
`stages/clean/<source_id>/<key>/`, cached under a key of the raw parts' content hashes and the `clean`
settings. Other stages read clean outputs and the filter declarations (`clean.filters`: run order, reason
codes, manifest keys, thresholds) only through `clean.outputs`, which imports this driver only to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.documents import DOCUMENT_FIELDS
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import INTERMEDIATE, write_parquet
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import CleanSettings, Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.ingest.outputs import raw_parts, read_raw_part

STAGE = "clean"  # the stage folder, as `clean.outputs` reads it (the read face never imports this driver eagerly)
CODE_VERSION = "4"  # bump when a change to the clean logic changes its output bytes

# Per-part document files, in document-id k order within a source. Later per-source stages keep these
# columns and this order.
# `lang_score` and `lang_sample_chars` say what decided `lang` (the detector's score and how many prose
# characters it read), so a language decision can be audited; `lang_label` is lid.176's own label (`lang`
# is its ISO 639-1 code, `und` for a language without one).
CLEAN_DOC_SCHEMA = pa.schema(
    [*DOCUMENT_FIELDS, ("repairs", pa.list_(pa.string())), ("lang_score", pa.float32()), ("lang_sample_chars", pa.int32()),
     ("lang_label", pa.string())]
)
# Every document a clean filter dropped, with the rule that fired first and the value it measured.
REJECT_SCHEMA = pa.schema(
    [("id", pa.string()), ("url", pa.string()), ("reason", pa.string()), ("value", pa.float64()), ("text", pa.string())]
)


def clean_part(raw_path: Path, first_k: int, source_id: str, clean_cfg: CleanSettings, out_dir: Path, index: int) -> dict:
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
            "lang_score": pa.array([outcome.lang_score[i] for i in kept_idx], pa.float32()),
            "lang_sample_chars": pa.array([outcome.lang_sample_chars[i] for i in kept_idx], pa.int32()),
            "lang_label": [outcome.lang_label[i] for i in kept_idx],
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
    write_parquet(docs, docs_path, INTERMEDIATE)
    write_parquet(rejects, rejects_path, INTERMEDIATE)
    stats = {
        "docs_in": len(records),
        "kept": docs.num_rows,
        "rejected": rejects.num_rows,
        "reasons": dict(sorted(Counter(r for r in outcome.reason if r is not None).items())),
        "repairs": dict(sorted(Counter(k for rs in outcome.repairs for k in rs).items())),
        "langs": dict(sorted(Counter(outcome.lang_label).items())),  # by lid.176 label, the finer count
        "bytes_in": sum(len(r["text"].encode("utf-8", errors="surrogatepass")) for r in records),
        "seconds": round(time.monotonic() - start, 3),
    }
    atomic_write_bytes(stats_path, json.dumps(stats, sort_keys=True).encode())
    return stats


CLEAN = Stage(STAGE, CODE_VERSION)


def clean_key(layout: Layout, source_id: str, settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, key inputs) of a source's clean output: raw part content hashes, clean settings, code version."""
    _paths, _docs, raw = raw_parts(layout, source_id)
    inputs = {"raw_parts": [[name, raw.outputs[name]["sha256"]] for name in raw.files["parts"]]}
    return CLEAN.key(inputs, output_settings(settings.resolved, "clean")), inputs


@records.locked(lambda a: f"clean.{a['source_id']}")
def run_clean_source(layout: Layout, settings: Settings, source_id: str, log: Log | None = None) -> dict[str, Any]:
    """Clean every raw part of a source (in parallel over parts), resuming parts that already completed.

    Returns the stage stats plus `cached` (True when the key was unchanged and nothing ran) and `key`.
    """
    parts, part_docs, _raw = raw_parts(layout, source_id)
    key, inputs = clean_key(layout, source_id, settings)
    folder = layout.stage(STAGE, source_id)

    def compute(key: str) -> Outputs:
        out_dir = folder / key
        offsets = [sum(part_docs[:i]) for i in range(len(part_docs))]
        jobs = [(p, offsets[i], source_id, settings.clean, out_dir, i) for i, p in enumerate(parts)]
        per_part = []
        for i, stats in enumerate(ordered_map(clean_part, jobs, settings.workers)):
            per_part.append(stats)
            if log:
                log(f"{source_id}: part {i + 1}/{len(jobs)} cleaned "
                         f"({stats['kept']} kept, {stats['rejected']} rejected)")
        docs = [f"{key}/docs-{i:05d}.parquet" for i in range(len(parts))]
        rejects = [f"{key}/rejects-{i:05d}.parquet" for i in range(len(parts))]
        return Outputs(docs + rejects, {"docs": docs, "rejects": rejects}, summarize(per_part))

    # committing also drops the outputs of older configs and fetches
    return run_cached(folder, CLEAN, inputs, output_settings(settings.resolved, "clean"), compute, key=key,
                      clear=[folder / key]).summary()


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
