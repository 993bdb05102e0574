"""The clean stage's driver: all of its reading and writing.

Raw parts of one source -> ids -> clean logic -> per-part docs and rejects tables under
`stages/clean/<source_id>/<key>/`, cached under a key of the raw parts' content hashes and the `clean`
settings. Other stages read clean outputs only through the functions at the bottom of this module, and the
filter declarations (`clean.filters`: run order, reason codes, manifest keys, thresholds) through the names
this module imports from there.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.cleaner import REPAIR_KINDS, clean_texts
from corpus_dagster.clean.filters import (  # noqa: F401 - the filter declarations, read through this driver
    BASE_FILTER_KEYS,
    FILTER_KEYS,
    FILTERS,
    REASON_CODES,
    Filter,
    Limit,
    Reason,
    Threshold,
    filter_key,
    find_reason,
    reason_threshold,
    threshold_text,
)
from corpus_dagster.clean.outputs import (  # noqa: F401 - read through this driver too
    STAGE,
    clean_doc_files,
    clean_record,
    reject_files,
)
from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.documents import DOCUMENT_FIELDS
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import INTERMEDIATE, head_rows, write_parquet
from corpus_dagster.core.progress import Log
from corpus_dagster.core.settings import CleanSettings, Settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.ingest.driver import raw_parts, read_raw_part

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


def filter_and_repair_counts(
    layout: Layout, source_ids: list[str], clean_cfg: CleanSettings
) -> tuple[dict[str, int], dict[str, int]]:
    """Manifest `filters` and `repairs`, summed over the sources' clean records.

    `filters` holds the BASE_FILTER_KEYS always, plus every further filter that is enabled (or that dropped
    something), in the fixed FILTER_KEYS order.
    """
    filters: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    for sid in source_ids:
        stats = clean_record(layout, sid).stats
        for reason, n in stats.get("reasons", {}).items():
            filters[filter_key(reason)] += n
        repairs.update(stats.get("repairs", {}))
    keys = [k for k in FILTER_KEYS
            if k in BASE_FILTER_KEYS or getattr(getattr(clean_cfg, k, None), "enabled", False) or filters[k]]
    return {k: filters[k] for k in keys}, {k: repairs[k] for k in REPAIR_KINDS}


def corpus_clean_counts(layout: Layout, source_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Per source with a clean record (of `source_ids`, default every ledger source): documents in, kept,
    rejected and the reject reasons (largest first), read from the stage records; the sources not cleaned
    yet are left out."""
    out = []
    for sid in source_ids if source_ids is not None else [s.source_id for s in load_ledger(layout.ledger)]:
        record = records.read_record(layout.stage(STAGE, sid))
        if record is None:
            continue
        st = record.stats
        reasons = {str(k): int(v) for k, v in (st.get("reasons") or {}).items() if int(v) > 0}
        out.append({"source_id": sid, "docs_in": int(st.get("docs_in", 0)), "kept": int(st.get("kept", 0)),
                    "rejected": int(st.get("rejected", 0)),
                    "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))})
    return out


# --- What the Dagster metadata shows of a source's outputs: a few rows, read without decoding the rest -------

EXAMPLES_PER_REASON = 3
REJECT_SCAN_ROWS = 256  # rows decoded at a time while looking for examples


def kept_head(layout: Layout, source_id: str, rows: int) -> list[dict[str, Any]]:
    """`id`, `lang`, `n_chars`, `text` of the first kept documents of a source (its first file's start)."""
    files = clean_doc_files(layout, source_id)
    return head_rows(files[0], ["id", "lang", "n_chars", "text"], rows) if files else []


def first_id(files: list[Path]) -> str | None:
    """The id of the first row of these clean files (docs or rejects), None when there is none."""
    head = head_rows(files[0], ["id"], 1) if files else []
    return head[0]["id"] if head else None


def texts_at(path: Path, rows: list[int]) -> list[str | None]:
    """The `text` of the given rows (ascending) of a Parquet file, reading only the row groups that hold them."""
    pf = pq.ParquetFile(path)
    out: list[str | None] = []
    start = 0
    for rg in range(pf.metadata.num_row_groups):
        stop = start + pf.metadata.row_group(rg).num_rows
        local = [i - start for i in rows if start <= i < stop]
        if local:
            out += pf.read_row_group(rg, columns=["text"], use_threads=False).column("text").take(local).to_pylist()
        start = stop
    return out


def reject_examples(layout: Layout, source_id: str, reasons: dict[str, int] | None = None,
                    per_reason: int = EXAMPLES_PER_REASON) -> list[dict[str, Any]]:
    """The first `per_reason` rejected documents of each reason (`id`, `reason`, `value`, `text`), in file order.

    `reasons` (rejected documents per reason, from the stage's stats) lets the scan stop once every reason
    has its examples: the rejects of a source can be most of its text, and a preview needs a few rows."""
    seen: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    wanted = None if reasons is None else {k: min(v, per_reason) for k, v in reasons.items() if v > 0}

    def complete() -> bool:
        return wanted is not None and all(seen.get(k, 0) >= v for k, v in wanted.items())

    for path in reject_files(layout, source_id):
        if complete():
            break
        # the small columns pick the examples; only the picked rows' texts are read into Python strings
        picked: list[tuple[int, dict]] = []
        offset = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=REJECT_SCAN_ROWS, columns=["id", "reason", "value"],
                                                       use_threads=False):
            for j, r in enumerate(batch.to_pylist()):
                if seen.get(r["reason"], 0) < per_reason:
                    seen[r["reason"]] = seen.get(r["reason"], 0) + 1
                    picked.append((offset + j, r))
            offset += batch.num_rows
            if complete():
                break
        texts = texts_at(path, [i for i, _ in picked])
        out += [{**r, "text": text} for (_, r), text in zip(picked, texts, strict=True)]
    return out
