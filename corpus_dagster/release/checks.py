"""The release's blocking checks, each a CheckReport: pure checks over what is read back from the part
files, and the one reader they share (`read_release`). `check_release` computes only the checks it is asked
for, so each asset check pays for its own check alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from corpus_dagster.core.checks import CheckReport, report_of
from corpus_dagster.core.errors import ReleaseError
from corpus_dagster.core.settings import ReleaseSettings
from corpus_dagster.release import card as card_mod
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.build import STATS_NAME
from corpus_dagster.release.plan import source_cap
from corpus_dagster.release.stats import data_stats

CARD_DIFF_LINES = 5  # differing card lines named in the card check's problem

ROW_SCHEMA = {"file": pl.String, "bucket": pl.Int32, "source_id": pl.String, "n_tokens": pl.Int64, "segmented": pl.Boolean}


def check_bucket_bounds(rows: pl.DataFrame, buckets: Buckets, foreign: Sequence[str] = ()) -> CheckReport:
    """Every row's token count lies in its bucket (`rows`: file, bucket, n_tokens); `foreign` names part
    files in folders that are no bucket of the settings."""
    edges = pl.DataFrame(
        {
            "bucket": list(range(buckets.count)),
            "low": [buckets.low(k) for k in range(buckets.count)],
            "high": [buckets.high(k) for k in range(buckets.count)],
        },
        schema={"bucket": rows.schema.get("bucket", pl.Int32), "low": pl.Int64, "high": pl.Int64},
    )
    r = rows.join(edges, on="bucket", how="left", maintain_order="left")
    bad = r.filter((pl.col("n_tokens") < pl.col("low")) | (pl.col("n_tokens") > pl.col("high")))
    problems = [f"{f}: folder is not a bucket of the configured settings" for f in foreign]
    problems += [
        f"{f}: a row of {int(n)} tokens is outside its bucket {lo}-{hi}"
        for f, n, lo, hi in bad.select("file", "n_tokens", "low", "high").iter_rows()
    ]
    return report_of(problems, rows=rows.height)


def check_source_caps(rows: pl.DataFrame, settings: ReleaseSettings) -> CheckReport:
    """No source has more rows than its cap in any bucket (`rows`: bucket, source_id)."""
    g = rows.group_by("bucket", "source_id").len().sort("bucket", "source_id")
    problems = [
        f"bucket {int(b)}: source {sid!r} has {int(n)} documents, over its cap {source_cap(sid, settings)}"
        for b, sid, n in g.iter_rows()
        if n > source_cap(sid, settings)
    ]
    largest = int(g["len"].max()) if g.height else 0
    return report_of(problems, groups=g.height, largest_group=largest)


def check_unique_ids(ids: Sequence[str]) -> CheckReport:
    """Release ids are unique."""
    s = pl.Series("id", list(ids), dtype=pl.String)
    dup = s.filter(s.is_duplicated()).unique().sort().to_list()
    return report_of([f"{d}: duplicate id" for d in dup], rows=len(s))


def check_card(actual: str, expected: str, recorded: Mapping[str, Any], recomputed: Mapping[str, Any]) -> CheckReport:
    """The card equals the card rendered from statistics recomputed from the files, and the recorded
    statistics equal the recomputed ones."""
    problems = [
        f"statistic {key}: recorded value differs from the files"
        for key in ("docs", "tokens", "segments", "n_sources", "min_tokens_seen", "max_tokens_seen",
                    "docs_per_bucket_min", "docs_per_bucket_max", "buckets", "sources")
        if recorded.get(key) != recomputed.get(key)
    ]
    if actual != expected:
        a, e = actual.splitlines(), expected.splitlines()
        diff = [f"line {i + 1}: card {x!r}, from the files {y!r}"
                for i, (x, y) in enumerate(zip(a, e, strict=False)) if x != y]
        problems.append("README.md differs from the card rendered from the files"
                        + "".join(f"; {d}" for d in diff[:CARD_DIFF_LINES]))
    return report_of(problems, docs=recomputed.get("docs", 0), tokens=recomputed.get("tokens", 0))


def check_identical(first: Mapping[str, str], second: Mapping[str, str]) -> CheckReport:
    """Two builds have the same files with the same SHA-256 (relative path -> digest)."""
    problems = [
        f"{p}: " + ("missing in rebuild" if p not in second else "missing in release" if p not in first
                    else "bytes differ")
        for p in sorted(set(first) | set(second))
        if first.get(p) != second.get(p)
    ]
    return report_of(problems, files=len(first))


def check_metadata(rows: pl.DataFrame, expected: pl.DataFrame, kept_dates: pl.DataFrame | None = None, *,
                   fallback: datetime | None = None) -> CheckReport:
    """Every release row's created_at, cleaned and kept fields equal its document's in the per-document
    ingest and clean tables. `rows`: file, doc_id, created_at, content_sha256, metadata (dict); `expected`:
    doc_id, created_at (the date a new content takes), cleaned (list), kept (dict of non-null kept fields),
    one row per document.

    `kept_dates` (content_sha256, created_at: release.created) are the dates earlier builds gave contents: a
    row may carry its content's kept date instead of its own, when that date is earlier than its own and is
    not the fallback while its own is known (so a lost fetch time can never pass as a kept date)."""
    want = {d: (c, cl, k) for d, c, cl, k in expected.select("doc_id", "created_at", "cleaned", "kept").iter_rows()}
    first = dict(kept_dates.select("content_sha256", "created_at").iter_rows()) if kept_dates is not None else {}
    problems = []
    for file, doc_id, created, digest, meta in rows.select(
            "file", "doc_id", "created_at", "content_sha256", "metadata").iter_rows():
        if doc_id not in want:
            problems.append(f"{file}: row of document {doc_id!r}, which no ingest table describes")
            continue
        w_created, w_cleaned, w_kept = want[doc_id]
        earlier = first.get(digest)
        kept_ok = (earlier is not None and created == earlier and earlier < w_created
                   and (fallback is None or earlier != fallback or w_created == fallback))
        if created != w_created and not kept_ok:
            problems.append(f"{file}: document {doc_id!r} has created_at {created}, its fetch says {w_created}"
                            + (f" and earlier builds {earlier}" if earlier is not None else ""))
        if list(meta.get("cleaned") or []) != list(w_cleaned or []):
            problems.append(f"{file}: document {doc_id!r} has cleaned {meta.get('cleaned')}, clean says {w_cleaned}")
        for name, value in (w_kept or {}).items():
            if meta.get(name) != value:
                problems.append(f"{file}: document {doc_id!r} has {name}={meta.get(name)!r}, the source's is {value!r}")
    return report_of(problems, rows=rows.height, documents=expected.height)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)


def release_texts(folder: Path) -> Iterable[tuple[str, str]]:
    """(file, text) of everything a release folder publishes except document contents: text files whole,
    the part files' string columns but `content` (a document may quote any path), PNG figures skipped."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if path.suffix == ".parquet":
            pf = pq.ParquetFile(path)
            columns = [c for c in pf.schema_arrow.names if c != "content"]
            for col in pf.read(columns=columns).itercolumns():
                for value in col.to_pylist():
                    for text in _strings(value):
                        yield name, text
            for key, value in (pf.schema_arrow.metadata or {}).items():
                yield name, key.decode("utf-8", "replace") + value.decode("utf-8", "replace")
        elif path.suffix != ".png":
            yield name, path.read_bytes().decode("utf-8", "replace")


def check_no_machine_paths(folder: Path, machine_paths: Sequence[str]) -> CheckReport:
    """No file of the release folder names a `file://` URL or one of the build machine's folders
    (`machine_paths`: the artifacts root, the ledger's and the local sources' folders, the home folder)."""
    needles = ["file://", *sorted({p.rstrip("/") for p in machine_paths if p and p.rstrip("/").count("/") >= 1
                                   and len(p.rstrip("/")) > 1})]
    problems, seen = [], set()
    files = 0
    last = None
    for name, text in release_texts(folder):
        if name != last:
            files, last = files + 1, name
        for needle in needles:
            if needle in text and (name, needle) not in seen:
                seen.add((name, needle))
                what = "a file:// URL" if needle == "file://" else f"the local path {needle}"
                problems.append(f"{name}: holds {what}")
    return report_of(problems, files=files, paths_checked=len(needles))


# --- reading a written release back ------------------------------------------------------------------------


@dataclass
class ReleaseContents:
    """What the checks read back from a written release: its statistics record, one row per part-file row
    (file, bucket, source_id, n_tokens, segmented), the release ids, and part files outside any bucket."""

    folder: Path
    settings: ReleaseSettings
    buckets: Buckets
    record: dict[str, Any]
    rows: pl.DataFrame
    ids: list[str]
    foreign: list[str]


def read_release(release_dir: str | Path, settings: ReleaseSettings) -> ReleaseContents:
    """Read the record and every part file's ids, metadata and length column, once for any checks."""
    release_dir = Path(release_dir)
    stats_path = release_dir / STATS_NAME
    if not stats_path.is_file():
        raise ReleaseError(f"{stats_path}: not found; build the release first")
    record = json.loads(stats_path.read_text(encoding="utf-8"))
    buckets = Buckets.from_settings(settings)
    length_col = record["info"]["length_column"]
    frames, ids, foreign = [], [], []
    folders = {buckets.folder(k): k for k in range(buckets.count)}
    for path in sorted((release_dir / "data").glob("*/*.parquet")):
        k = folders.get(path.parent.name)
        if k is None:
            foreign.append(str(path))
            continue
        t = pq.read_table(path, columns=["id", "metadata", length_col])
        metas = [json.loads(m) for m in t["metadata"].to_pylist()]
        ids += t["id"].to_pylist()
        frames.append(
            pl.DataFrame({
                "file": [str(path.relative_to(release_dir))] * t.num_rows,
                "bucket": [k] * t.num_rows,
                "source_id": [m["source_id"] for m in metas],
                "n_tokens": t[length_col].to_numpy().astype(np.int64),
                "segmented": ["segment" in m for m in metas],
            }, schema=ROW_SCHEMA)
        )
    rows = pl.concat(frames) if frames else pl.DataFrame(schema=ROW_SCHEMA)
    return ReleaseContents(release_dir, settings, buckets, record, rows, ids, foreign)


def _bucket_bounds(c: ReleaseContents) -> CheckReport:
    return check_bucket_bounds(c.rows, c.buckets, c.foreign)


def _source_caps(c: ReleaseContents) -> CheckReport:
    return check_source_caps(c.rows.drop("file"), c.settings)


def _unique_ids(c: ReleaseContents) -> CheckReport:
    return check_unique_ids(c.ids)


def _card_matches_data(c: ReleaseContents) -> CheckReport:
    facts = {s["source_id"]: {"hub_dataset": s["hub_dataset"], "category": s["category"], "license_spdx": s["license"]}
             for s in c.record["data"]["sources"]}
    data = data_stats(c.rows.drop("file"), c.buckets, facts)
    expected = card_mod.render_card(c.record["info"], data, c.record["cleaning"])
    actual = (c.folder / "README.md").read_text(encoding="utf-8")
    return check_card(actual, expected, c.record["data"], data)


# The blocking checks of a written release by name (the asset check of each is release_<name>)
RELEASE_CHECKS: dict[str, Callable[[ReleaseContents], CheckReport]] = {
    "bucket_bounds": _bucket_bounds,
    "source_caps": _source_caps,
    "unique_ids": _unique_ids,
    "card_matches_data": _card_matches_data,
}


def check_release(release_dir: str | Path, settings: ReleaseSettings,
                  names: Iterable[str] = tuple(RELEASE_CHECKS)) -> dict[str, CheckReport]:
    """The named blocking checks (default: all) of a written release, computed from one read of its files."""
    names = list(names)
    unknown = [n for n in names if n not in RELEASE_CHECKS]
    if unknown:
        raise ValueError(f"unknown release checks {unknown}; known: {sorted(RELEASE_CHECKS)}")
    contents = read_release(release_dir, settings)
    return {name: RELEASE_CHECKS[name](contents) for name in names}
