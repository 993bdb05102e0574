"""A document's journey, read only from stage outputs through the drivers' reader functions; nothing reruns.

`explain(layout, resolved, "alpha:00000007")` (or a url) returns the steps: source and raw part line, the clean
verdict (kept, or reason, measured value and threshold), dedup (exact twin, near-duplicate cluster with the kept
id and Jaccard, decontamination), PII redactions by type, shard and row, token stream split and offsets.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from corpus_dagster.clean import driver as clean
from corpus_dagster.core.errors import CorpusError, UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.dedup import driver as dedup
from corpus_dagster.ingest import driver as ingest
from corpus_dagster.publish import driver as publish
from corpus_dagster.scrub import driver as scrub
from corpus_dagster.tokenize import driver as tokens

PLACEHOLDER = re.compile(r"<([A-Z_]+)>")


class DocumentNotFound(CorpusError):
    """No stage output holds the document asked for."""


def _rows(paths, column: str, value: str, columns: list[str] | None = None) -> list[tuple[int, int, dict]]:
    """(file index, row, record) of every row whose `column` equals value, scanning the files in order."""
    out = []
    for i, path in enumerate(paths):
        frame = pl.read_parquet(path, columns=columns).with_row_index("_row")
        for rec in frame.filter(pl.col(column) == value).to_dicts():
            out.append((i, int(rec.pop("_row")), rec))
    return out


def resolve_id(layout: Layout, query: str) -> str:
    """The document id of an id or a url (a url is looked up in every source's clean documents and rejects)."""
    sources = [s.source_id for s in load_ledger(layout.ledger)]
    if ":" in query and query.rsplit(":", 1)[0] in sources and "/" not in query:
        return query
    for sid in sources:
        try:
            files = clean.clean_doc_files(layout, sid) + clean.reject_files(layout, sid)
        except UpstreamMissing:
            continue
        hits = _rows(files, "url", query, ["id", "url"])
        if hits:
            return hits[0][2]["id"]
    raise DocumentNotFound(f"no document with id or url {query!r} in the clean outputs of {', '.join(sources)}; "
                           "ids look like <source_id>:<k>")


def explain(layout: Layout, resolved: dict[str, Any], query: str) -> dict[str, Any]:
    """Every stage's answer for one document; a stage that has not run says so instead of failing."""
    doc_id = resolve_id(layout, query)
    sid, k = doc_id.rsplit(":", 1)
    out: dict[str, Any] = {"id": doc_id, "source_id": sid}
    steps: dict[str, Any] = {}
    for name, step in (("ingest", _ingest), ("clean", _clean), ("dedup", _dedup), ("scrub", _scrub),
                       ("shards", _shards), ("tokens", _tokens)):
        try:
            steps[name] = step(layout, resolved, doc_id, sid, int(k))
        except UpstreamMissing as exc:
            steps[name] = {"status": "not built", "detail": str(exc)}
    out["steps"] = steps
    return out


def _ingest(layout, _resolved, _doc_id, sid, k):
    row = next((s for s in load_ledger(layout.ledger) if s.source_id == sid), None)
    parts, part_docs, record = ingest.raw_parts(layout, sid)
    first = 0
    for path, n in zip(parts, part_docs, strict=True):
        if k < first + n:
            return {"status": "fetched", "urls": list(row.urls) if row else [], "raw_part": str(path), "line": k - first + 1,
                    "fetched_at": record.stats.get("fetched_at")}
        first += n
    return {"status": "not in raw parts", "raw_parts": [str(p) for p in parts]}


def _clean(layout, resolved, doc_id, sid, _k):
    from corpus_dagster.defs.clean import reason_threshold

    hits = _rows(clean.reject_files(layout, sid), "id", doc_id, ["id", "reason", "value"])
    if hits:
        rec = hits[0][2]
        return {"status": "rejected", "reason": rec["reason"], "value": rec["value"],
                "threshold": reason_threshold(rec["reason"], resolved["clean"])}
    hits = _rows(clean.clean_doc_files(layout, sid), "id", doc_id, ["id", "lang", "n_chars"])
    if hits:
        return {"status": "kept", "lang": hits[0][2]["lang"], "n_chars": hits[0][2]["n_chars"]}
    return {"status": "not in the clean outputs (quarantined at ingest?)"}


def _dedup(layout, _resolved, doc_id, _sid, _k):
    tables = dedup.dedup_tables(layout)
    dropped = _rows([tables["dropped"]], "id", doc_id)
    if dropped:
        rec = dropped[0][2]
        if rec["reason"] == "decontaminated":
            return {"status": "dropped", "reason": "decontaminated", "hit": rec["detail"]}
        return {"status": "dropped", "reason": rec["reason"], "kept_id": rec["matched_id"], "jaccard": rec["jaccard"]}
    members = dedup.clusters(layout)
    mine = members.filter(pl.col("id") == doc_id)
    if mine.height:
        cluster = mine["cluster_min_id"][0]
        size = members.filter(pl.col("cluster_min_id") == cluster).height
        return {"status": "kept", "cluster_min_id": cluster, "cluster_size": size, "decontamination": "no hit"}
    return {"status": "kept", "cluster": None, "decontamination": "no hit"}


def _scrub(layout, _resolved, doc_id, sid, _k):
    hits = _rows(scrub.scrubbed_files(layout, sid), "id", doc_id, ["id", "text", "pii_redactions"])
    if not hits:
        return {"status": "not scrubbed (dropped earlier)"}
    rec = hits[0][2]
    types: dict[str, int] = {}
    for t in PLACEHOLDER.findall(rec["text"]):
        types[t] = types.get(t, 0) + 1
    return {"status": "scrubbed", "redactions": rec["pii_redactions"], "by_type": types}


def _shards(layout, _resolved, doc_id, _sid, _k):
    files = publish.published_shards(layout)
    hits = _rows(files, "id", doc_id, ["id", "split"])
    if not hits:
        return {"status": "not published"}
    i, row, rec = hits[0]
    return {"status": "published", "shard": files[i].name, "row": row, "split": rec["split"]}


def _tokens(layout, _resolved, doc_id, _sid, _k):
    counts = pq.read_table(tokens.token_counts_file(layout), columns=["id", "n_tokens", "split"])
    frame = pl.from_arrow(counts).with_row_index("_row")
    mine = frame.filter(pl.col("id") == doc_id)
    if not mine.height:
        return {"status": "not tokenized"}
    split, row = mine["split"][0], int(mine["_row"][0])
    before = frame.filter((pl.col("split") == split) & (pl.col("_row") < row))
    return {"status": "tokenized", "split": split, "doc_index": before.height,
            "token_offset": int(before["n_tokens"].sum() or 0), "n_tokens": int(mine["n_tokens"][0]),
            "counts_file": str(tokens.token_counts_file(layout))}


def render(answer: dict[str, Any]) -> str:
    """The journey as indented text lines."""
    lines = [f"document {answer['id']} (source {answer['source_id']})"]
    for name, step in answer["steps"].items():
        rest = ", ".join(f"{k}={v}" for k, v in step.items() if k != "status")
        lines.append(f"  {name:<7} {step['status']}" + (f": {rest}" if rest else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from corpus_dagster.cli.explain import main

    sys.exit(main())
