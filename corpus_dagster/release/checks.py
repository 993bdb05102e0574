"""Pure checks on a release: each returns a report {passed, problems, metadata} for a blocking asset check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.plan import source_cap

MAX_PROBLEMS = 20  # problems listed per report (the count is always complete)


def _report(problems: list[Any], **metadata: Any) -> dict[str, Any]:
    return {"passed": not problems, "problems": problems[:MAX_PROBLEMS], "metadata": {"problems": len(problems), **metadata}}


def check_bucket_bounds(rows: pl.DataFrame, buckets: Buckets) -> dict[str, Any]:
    """Every row's token count lies in its bucket (`rows`: file, bucket, n_tokens)."""
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
    problems = [
        {"file": f, "n_tokens": int(n), "bucket": f"{lo}-{hi}"}
        for f, n, lo, hi in bad.select("file", "n_tokens", "low", "high").iter_rows()
    ]
    return _report(problems, rows=rows.height)


def check_source_caps(rows: pl.DataFrame, settings: Mapping[str, Any]) -> dict[str, Any]:
    """No source has more rows than its cap in any bucket (`rows`: bucket, source_id)."""
    g = rows.group_by("bucket", "source_id").len().sort("bucket", "source_id")
    problems = [
        {"bucket": int(b), "source_id": sid, "docs": int(n), "cap": source_cap(sid, settings)}
        for b, sid, n in g.iter_rows()
        if n > source_cap(sid, settings)
    ]
    largest = int(g["len"].max()) if g.height else 0
    return _report(problems, groups=g.height, largest_group=largest)


def check_unique_ids(ids: Sequence[str]) -> dict[str, Any]:
    """Release ids are unique."""
    s = pl.Series("id", list(ids), dtype=pl.String)
    dup = s.filter(s.is_duplicated()).unique().sort().to_list()
    return _report([{"id": d, "problem": "duplicate id"} for d in dup], rows=len(s))


def check_card(actual: str, expected: str, recorded: Mapping[str, Any], recomputed: Mapping[str, Any]) -> dict[str, Any]:
    """The card equals the card rendered from statistics recomputed from the files, and the recorded
    statistics equal the recomputed ones."""
    problems: list[Any] = []
    for key in ("docs", "tokens", "segments", "n_sources", "min_tokens_seen", "max_tokens_seen",
                "docs_per_bucket_min", "docs_per_bucket_max", "buckets", "sources"):
        if recorded.get(key) != recomputed.get(key):
            problems.append({"statistic": key, "problem": "recorded value differs from the files"})
    if actual != expected:
        a, e = actual.splitlines(), expected.splitlines()
        diff = [
            {"line": i + 1, "card": x, "from_files": y}
            for i, (x, y) in enumerate(zip(a, e, strict=False)) if x != y
        ]
        problems.append({"problem": "README.md differs from the card rendered from the files", "lines": diff[:5]})
    return _report(problems, docs=recomputed.get("docs", 0), tokens=recomputed.get("tokens", 0))


def rebuild_report(problems: list[Any], **metadata: Any) -> dict[str, Any]:
    """The report of a (sampled) rebuild: problems are {file, problem}."""
    return _report(problems, **metadata)


def check_identical(first: Mapping[str, str], second: Mapping[str, str]) -> dict[str, Any]:
    """Two builds have the same files with the same SHA-256 (relative path -> digest)."""
    problems = [
        {"file": p, "problem": "missing in rebuild" if p not in second else "missing in release" if p not in first
         else "bytes differ"}
        for p in sorted(set(first) | set(second))
        if first.get(p) != second.get(p)
    ]
    return _report(problems, files=len(first))
