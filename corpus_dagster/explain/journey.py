"""A document's journey, read only from stage outputs through each stage's read face (`<stage>.outputs`); nothing reruns.

`explain(layout, settings, "alpha:7")` (or a url) returns what each stage did to the document, in pipeline
order, and stops at the stage where the document left the pipeline (`left_at`): ingest names the document's
own source file and its line (JSON Lines) or row (Parquet); clean says kept, or the rule that rejected it with
the measured value, the comparison and the configured threshold; dedup says kept (with its near-duplicate
cluster), removed as an exact or near duplicate of the kept id (with the Jaccard), or decontaminated; then the
PII redactions by type, shard and row, token stream split and offsets. Every step carries a `summary` line.

An id that names no document (malformed, unknown source, a position no raw part holds) raises
DocumentNotFound with one line naming the id and what exists.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from corpus_dagster.clean import outputs as clean
from corpus_dagster.clean.outputs import reason_threshold
from corpus_dagster.core.errors import CorpusError, UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.settings import CleanSettings, Settings
from corpus_dagster.dedup import outputs as dedup
from corpus_dagster.ingest import outputs as ingest
from corpus_dagster.ingest.outputs import Doc, Selection, cache_name, iter_file, read_raw_part
from corpus_dagster.publish import outputs as publish
from corpus_dagster.release import outputs as release
from corpus_dagster.scrub import outputs as scrub
from corpus_dagster.tokenize import outputs as tokens

PLACEHOLDER = re.compile(r"<([A-Z_]+)>")
DOC_ID = re.compile(r"^(?P<source>[a-z0-9][a-z0-9._-]*):(?P<k>[0-9]+)$")
RELEASE_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
STAGES = ("ingest", "clean", "dedup", "scrub", "shards", "tokens", "release")


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


def shown_path(layout: Layout, path: str | Path) -> str:
    """A path as explain prints it: normalized, relative to the artifacts root when it lies inside it."""
    full = Path(os.path.normpath(Path(path).resolve()))
    root = Path(os.path.normpath(layout.root.resolve()))
    try:
        return full.relative_to(root).as_posix()
    except ValueError:
        return full.as_posix()


def _num(x: float | int | None) -> str:
    """A measured value or threshold as people read it: 37, 0.9123, 1234.57."""
    if x is None:
        return "None"
    x = float(x)
    return str(int(x)) if x.is_integer() else format(round(x, 4), "g")


def resolve_id(layout: Layout, query: str) -> str:
    """The document id of an id or a url (a url is looked up in every source's clean documents and rejects).

    An id must name a ledger source and a position its raw parts hold; otherwise DocumentNotFound says which
    sources or positions exist."""
    sources = [s.source_id for s in load_ledger(layout.ledger)]
    m = DOC_ID.match(query)
    if m:
        sid, k = m["source"], int(m["k"])
        if sid not in sources:
            raise DocumentNotFound(f"no document {query!r}: unknown source {sid!r}; the ledger's sources are "
                                   f"{', '.join(sources) or '(none)'}")
        try:
            _parts, part_docs, _record = ingest.raw_parts(layout, sid)
        except UpstreamMissing as exc:
            raise DocumentNotFound(f"no document {query!r}: source {sid!r} has no raw parts yet "
                                   f"({str(exc).splitlines()[0]})") from exc
        n = sum(part_docs)
        if k >= n:
            held = f"positions 0..{n - 1}" if n else "no documents"
            raise DocumentNotFound(f"no document {query!r}: source {sid!r} holds {held}")
        return f"{sid}:{k}"
    for sid in sources:
        try:
            files = clean.clean_doc_files(layout, sid) + clean.reject_files(layout, sid)
        except UpstreamMissing:
            continue
        hits = _rows(files, "url", query, ["id", "url"])
        if hits:
            return hits[0][2]["id"]
    if "/" not in query:
        raise DocumentNotFound(f"malformed document id {query!r}: ids look like <source_id>:<k> (k the 0-based "
                               f"position in the source), sources: {', '.join(sources) or '(none)'}; or give a url")
    raise DocumentNotFound(f"no document with url {query!r} in the clean outputs of {', '.join(sources)}")


def explain(layout: Layout, settings: Settings, query: str) -> dict[str, Any]:
    """Every stage's answer for one document, up to the stage where it left the pipeline (`left_at`).

    A stage that has not run says so ("not built") instead of failing, and the stages after it are not read."""
    asked_row = None
    if RELEASE_ID.match(query.lower()):  # the id a dataset user has: a release row's (or its segments' parent)
        rows = release.release_rows_of(layout, settings, release_id=query.lower())
        if not rows:
            raise DocumentNotFound(f"no release row {query!r}: the release {release.release_name(settings)!r} holds no "
                                   f"row or segmented document with that id")
        asked_row, doc_id = query.lower(), rows[0]["doc_id"]
    else:
        doc_id = resolve_id(layout, query)
    sid, k = doc_id.rsplit(":", 1)
    out: dict[str, Any] = {"id": doc_id, "source_id": sid}
    if asked_row is not None:
        out["release_id"] = asked_row
    steps: dict[str, Any] = {}
    left_at = None
    for name in STAGES:
        try:
            step = (_release(layout, settings, doc_id, asked_row) if name == "release"
                    else _STEPS[name](layout, settings, doc_id, sid, int(k)))
        except UpstreamMissing as exc:
            step = {"status": "not built", "summary": f"not built: {str(exc).splitlines()[0]}"}
        steps[name] = step
        if step["status"] == "not built":
            break
        if step.pop("left", False):
            left_at = name
            break
    out["steps"] = steps
    out["left_at"] = left_at
    out["not_reached"] = [s for s in STAGES if s not in steps]
    return out


def _source_file(layout: Layout, settings: Settings, sid: str, k: int, raw_url: str) -> dict[str, Any]:
    """The source file a document was read from and its line (JSON Lines) or 0-based row (Parquet)."""
    source = next(s for s in load_ledger(layout.ledger) if s.source_id == sid)
    fetch = ingest.load_record(layout.fetch_record(sid)) or {}
    file_urls = [f["url"] for f in fetch.get("files", [])]
    where = "row" if source.format == "parquet" else "line"
    for url in file_urls:  # a document without a url field is named `<file url>#<line or row>`
        if raw_url == url:
            return {"file": url}
        if raw_url.startswith(url + "#") and raw_url[len(url) + 1:].isdigit():
            return {"file": url, where: int(raw_url[len(url) + 1:])}
    # The url is the document's own (url_field): count the documents of the source files in order.
    selection = Selection.for_source(source)
    max_bytes = settings.ingest.max_doc_bytes
    seen = 0
    for url in file_urls:
        local = url[len("file://"):] if url.startswith("file://") else str(layout.downloads(sid) / cache_name(url))
        if not os.path.exists(local):
            return {"file": None, "detail": f"source file {url} is not on this machine"}
        docs = [d for d in iter_file(local, source, url, max_bytes, selection) if isinstance(d, Doc)]
        if selection is not None:
            docs = [d for d, keep in zip(docs, selection.select([d.fields or {} for d in docs]), strict=True) if keep]
        if k < seen + len(docs):
            doc = docs[k - seen]
            return {"file": url, where: doc.line} if source.format != "text" else {"file": url}
        seen += len(docs)
    return {"file": None, "detail": "the source files hold fewer documents than the raw parts (refetched since?)"}


def _shown_file(layout: Layout, url: str | None) -> str | None:
    if url is None:
        return None
    return shown_path(layout, url[len("file://"):]) if url.startswith("file://") else url


def _ingest(layout, settings, _doc_id, sid, k):
    parts, part_docs, record = ingest.raw_parts(layout, sid)
    first = 0
    for path, n in zip(parts, part_docs, strict=True):
        if k < first + n:
            raw = next(itertools.islice(read_raw_part(path), k - first, None))
            src = _source_file(layout, settings, sid, k, raw["url"])
            file = _shown_file(layout, src.get("file"))
            pos = next((f" {w} {src[w]}" for w in ("line", "row") if w in src), "")
            summary = (f"fetched from {file}{pos}" if file else f"fetched ({src.get('detail')})")
            summary += f"; raw part {shown_path(layout, path)} line {k - first + 1}, fetched_at {record.stats.get('fetched_at')}"
            step = {"status": "fetched", "file": file, **{w: src[w] for w in ("line", "row") if w in src},
                    "url": raw["url"], "raw_part": shown_path(layout, path), "raw_line": k - first + 1,
                    "fetched_at": record.stats.get("fetched_at"), "summary": summary}
            return step
        first += n
    raise DocumentNotFound(f"no document {sid}:{k}: source {sid!r} holds positions 0..{first - 1}")


def rejection(reason: str, value: float | None, clean_cfg: CleanSettings) -> dict[str, Any]:
    """What a clean reject broke: the rule, the measured value, the comparison, the threshold and its key."""
    threshold = reason_threshold(reason, clean_cfg)
    if threshold is None:
        return {"rule": reason, "value": value, "summary": f"rejected by {reason}: {_num(value)}"}
    out: dict[str, Any] = {"rule": reason, "value": value}
    if reason == "lang":
        allowed = list(clean_cfg.lang.allowed or [])
        min_score = clean_cfg.lang.min_score
        out |= {"threshold": min_score, "config": f"clean.lang.min_score, clean.lang.allowed={allowed}"}
        if value is not None and min_score is not None and value < min_score:  # undetermined: no evidence
            out["summary"] = f"rejected by lang: undetermined language (score {_num(value)}), allowed {allowed}"
        else:
            out["summary"] = (f"rejected by lang: score {_num(value)} >= {_num(min_score)} (clean.lang.min_score) "
                              f"for a language outside allowed {allowed}")
        return out
    bound = threshold.broken(value)  # a code with several limits names the first one its value breaks
    if bound is not None:
        out |= {"op": bound.op, "threshold": bound.limit, "config": bound.config}
        out["summary"] = f"rejected by {reason}: {_num(value)} {bound.op} {_num(bound.limit)} ({bound.config})"
    else:
        out["summary"] = f"rejected by {reason}: {_num(value)}"
    return out


def _clean(layout, settings, doc_id, sid, _k):
    hits = _rows(clean.reject_files(layout, sid), "id", doc_id, ["id", "reason", "value"])
    if hits:
        rec = hits[0][2]
        return {"status": "rejected", **rejection(rec["reason"], rec["value"], settings.clean), "left": True}
    hits = _rows(clean.clean_doc_files(layout, sid), "id", doc_id, ["id", "lang", "n_chars"])
    if hits:
        lang, n_chars = hits[0][2]["lang"], hits[0][2]["n_chars"]
        return {"status": "kept", "lang": lang, "n_chars": n_chars, "summary": f"kept: lang {lang}, {n_chars} characters"}
    return {"status": "missing", "summary": "in neither the clean documents nor the rejects (clean outputs stale?)",
            "left": True}


def _dedup(layout, _settings, doc_id, _sid, _k):
    tables = dedup.dedup_tables(layout)
    dropped = _rows([tables["dropped"]], "id", doc_id)
    if dropped:
        rec = dropped[0][2]
        if rec["reason"] == "decontaminated":
            return {"status": "removed", "reason": "decontaminated", "hit": rec["detail"], "left": True,
                    "summary": f"removed by decontamination: overlaps a protected evaluation set ({rec['detail']})"}
        kind = "an exact" if rec["reason"] == "exact" else "a near"
        jac = f" (jaccard {_num(rec['jaccard'])})" if rec["jaccard"] is not None else ""
        return {"status": "removed", "reason": rec["reason"], "kept_id": rec["matched_id"], "jaccard": rec["jaccard"],
                "left": True, "summary": f"removed by dedup as {kind} duplicate of {rec['matched_id']}{jac}"}
    members = dedup.clusters(layout)
    mine = members.filter(pl.col("id") == doc_id)
    if mine.height:
        cluster = mine["cluster_min_id"][0]
        size = members.filter(pl.col("cluster_min_id") == cluster).height
        return {"status": "kept", "cluster_min_id": cluster, "cluster_size": size,
                "summary": f"kept: the kept copy of a near-duplicate cluster of {size} documents (cluster {cluster})"}
    return {"status": "kept", "cluster_min_id": None, "summary": "kept: no exact or near duplicate, no decontamination hit"}


def _scrub(layout, _settings, doc_id, sid, _k):
    hits = _rows(scrub.scrubbed_files(layout, sid), "id", doc_id, ["id", "text", "pii_redactions"])
    if not hits:
        return {"status": "missing", "summary": "not in the scrubbed documents (scrub outputs stale?)", "left": True}
    rec = hits[0][2]
    types: dict[str, int] = {}
    for t in PLACEHOLDER.findall(rec["text"]):
        types[t] = types.get(t, 0) + 1
    what = ", ".join(f"{t} {n}" for t, n in sorted(types.items()))
    n = rec["pii_redactions"]
    summary = f"scrubbed: {n} redaction{'s' if n != 1 else ''} ({what})" if n else "scrubbed: no PII found"
    return {"status": "scrubbed", "redactions": rec["pii_redactions"], "by_type": types, "summary": summary}


def _shards(layout, _settings, doc_id, _sid, _k):
    files = publish.published_shards(layout)
    if not files:
        raise UpstreamMissing("no published shards yet; materialize shards")
    hits = _rows(files, "id", doc_id, ["id", "split"])
    if not hits:
        return {"status": "missing", "summary": "not in the published shards (shards stale?)", "left": True}
    i, row, rec = hits[0]
    shard = shown_path(layout, files[i])
    return {"status": "published", "shard": shard, "row": row, "split": rec["split"],
            "summary": f"published in {shard} row {row}, split {rec['split']}"}


def _tokens(layout, _settings, doc_id, _sid, _k):
    path = tokens.token_counts_file(layout)
    counts = pq.read_table(path, columns=["id", "n_tokens", "split"])
    frame = pl.from_arrow(counts).with_row_index("_row")
    mine = frame.filter(pl.col("id") == doc_id)
    if not mine.height:
        return {"status": "missing", "summary": "not in the token counts (token streams stale?)", "left": True}
    split, row = mine["split"][0], int(mine["_row"][0])
    before = frame.filter((pl.col("split") == split) & (pl.col("_row") < row))
    offset, n = int(before["n_tokens"].sum() or 0), int(mine["n_tokens"][0])
    counts_file = shown_path(layout, path)
    return {"status": "tokenized", "split": split, "doc_index": before.height, "token_offset": offset, "n_tokens": n,
            "counts_file": counts_file,
            "summary": f"tokenized: {split} stream document {before.height}, tokens {offset}..{offset + n} ({n}), "
                       f"counts {counts_file}"}


def _release(layout: Layout, settings: Settings, doc_id: str, asked: str | None) -> dict[str, Any]:
    """The release rows of the document: bucket, part file and row, and for a segment its number and character
    span in the published text; the row asked for (`asked`, a release id) first."""
    if not settings.release.enabled:
        return {"status": "not built", "summary": "not built: release.enabled is false"}
    rows = release.release_rows_of(layout, settings, doc_id=doc_id)
    if not rows:
        return {"status": "missing", "left": True,
                "summary": "not in the release (under min_tokens, over its bucket's or source's cap, or past max_segments)"}
    rows.sort(key=lambda r: (r["release_id"] != asked, r["segment"] if r["segment"] is not None else -1))
    parts = []
    for r in rows:
        where = f"{r['bucket']} ({r['file']} row {r['row']}, {r['n_tokens']} tokens)"
        if r["segment"] is not None:
            start, end = r["char_span"]
            parts.append(f"segment {r['segment']} chars {start}..{end} in {where}, id {r['release_id']}")
        else:
            parts.append(f"whole in {where}, id {r['release_id']}")
    return {"status": "released", "rows": rows, "summary": "released: " + "; ".join(parts)}


def first_published_id(layout: Layout) -> str:
    """The id of the first document of the first published shard (what the UI job explains by default)."""
    files = publish.published_shards(layout)
    if not files:
        raise DocumentNotFound("no published shards yet, so no default document: materialize shards, or name a document")
    first = pq.ParquetFile(files[0]).read_row_group(0, columns=["id"])["id"]
    if not len(first):
        raise DocumentNotFound(f"the first shard {shown_path(layout, files[0])} holds no document: name a document")
    return str(first[0])


_STEPS = {"ingest": _ingest, "clean": _clean, "dedup": _dedup, "scrub": _scrub, "shards": _shards, "tokens": _tokens}


def render(answer: dict[str, Any]) -> str:
    """The journey as indented text lines: one per stage reached, then where the document left."""
    lines = [f"document {answer['id']} (source {answer['source_id']})"]
    for name, step in answer["steps"].items():
        lines.append(f"  {name:<7} {step['summary']}")
    if answer.get("not_reached"):
        rest = ", ".join(answer["not_reached"])
        if answer["left_at"]:
            lines.append(f"  (left the pipeline at {answer['left_at']}; not reached: {rest})")
        else:
            lines.append(f"  (later stages not read: {rest})")
    return "\n".join(lines)

