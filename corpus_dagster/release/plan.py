"""Plan a release from ids and lengths only: buckets, exact-duplicate removal, per-source caps, shuffle, parts.

Every choice is a function of (seed, row id), never of reading order or worker count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from corpus_dagster.core.settings import ReleaseSettings
from corpus_dagster.release.buckets import BELOW, Buckets
from corpus_dagster.release.ids import release_ids, seeded_keys

# Columns of a candidate row (a whole document or a segment of one).
CANDIDATE_COLUMNS = ("doc_id", "source_id", "segment", "char_start", "char_end", "n_tokens", "content_sha256")


def source_cap(source_id: str, settings: ReleaseSettings) -> int:
    """Per-bucket cap of a source: its per_source_cap override, else per_bucket_cap."""
    return int(settings.per_source_cap.get(source_id, settings.per_bucket_cap))


def part_rows(buckets: Buckets, k: int, settings: ReleaseSettings) -> int:
    """Rows per part file of bucket k: part_tokens divided by the bucket's upper edge, at least one."""
    return max(1, int(settings.part_tokens) // buckets.high(k))


def room_by_source(docs: pl.DataFrame, buckets: Buckets, settings: ReleaseSettings) -> dict[str, list[bool]]:
    """Per source, whether each bucket still needs documents from it (whole documents below its cap).

    Segments are aimed at these buckets. The snapshot is taken from whole documents only, so every long
    document can be segmented independently (in any worker, in any order) with the same result.
    """
    k = buckets.index(docs["n_tokens"].to_numpy())
    counts = (
        pl.DataFrame({"source_id": docs["source_id"], "bucket": k})
        .filter(pl.col("bucket") >= 0)
        .group_by("source_id", "bucket")
        .len()
    )
    have: dict[tuple[str, int], int] = {
        (s, b): n for s, b, n in counts.select("source_id", "bucket", "len").iter_rows()
    }
    out = {}
    for sid in sorted(set(docs["source_id"].to_list())):
        cap = source_cap(sid, settings)
        out[sid] = [have.get((sid, b), 0) < cap for b in range(buckets.count)]
    return out


def plan_release(
    candidates: pl.DataFrame, buckets: Buckets, settings: ReleaseSettings
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Select and order the release rows; returns (plan, counts).

    `candidates` has CANDIDATE_COLUMNS (segment -1 for a whole document) plus any other columns, which
    are carried along. The plan adds `id` (UUIDv5), `bucket`, `part`, `row` (position in the part) and is
    sorted by (bucket, part, row). Counts: rows below min_tokens, exact duplicates removed, rows over a
    source's cap, per source.
    """
    seed = int(settings.seed)
    c = candidates.with_columns(pl.Series("bucket", buckets.index(candidates["n_tokens"].to_numpy())))
    below = c.filter(pl.col("bucket") == BELOW)
    c = c.filter(pl.col("bucket") >= 0)
    in_range = c.height
    # exact duplicates: keep the first in (document id, segment) order
    c = c.sort("doc_id", "segment").filter(pl.col("content_sha256").is_first_distinct())
    n_dupes = in_range - c.height
    ids = release_ids(  # named by the source row (`row_id`, see ids.row_ids) where the caller gives it
        (c["row_id"] if "row_id" in c.columns else c["doc_id"]).to_list(),
        c["char_start"].to_list(),
        c["char_end"].to_list(),
        (c["segment"] >= 0).to_list(),
    )
    c = c.with_columns(
        pl.Series("id", ids, dtype=pl.String),
        pl.Series("cap_key", seeded_keys(seed, "cap", ids)),
        pl.Series("shuffle_key", seeded_keys(seed, "shuffle", ids)),
    )
    caps = {sid: source_cap(sid, settings) for sid in c["source_id"].unique().to_list()}
    # a join, not replace_strict: polars returns the string column unchanged when the mapping is empty
    cap_frame = pl.DataFrame({"source_id": list(caps), "cap": list(caps.values())},
                             schema={"source_id": pl.String, "cap": pl.Int64})
    c = c.join(cap_frame, on="source_id", how="left")
    c = c.sort("source_id", "bucket", "cap_key", "id").with_columns(
        pl.int_range(pl.len()).over("source_id", "bucket").alias("cap_rank")
    )
    over = c.filter(pl.col("cap_rank") >= pl.col("cap"))
    c = c.filter(pl.col("cap_rank") < pl.col("cap"))
    rows_per_part = {k: part_rows(buckets, k, settings) for k in range(buckets.count)}
    c = (
        c.sort("bucket", "shuffle_key", "id")
        .with_columns(
            pl.int_range(pl.len()).over("bucket").alias("pos"),
            pl.col("bucket").replace_strict(rows_per_part, return_dtype=pl.Int64).alias("per_part"),
        )
        .with_columns((pl.col("pos") // pl.col("per_part")).alias("part"), (pl.col("pos") % pl.col("per_part")).alias("row"))
        .drop("cap_key", "shuffle_key", "cap", "cap_rank", "pos", "per_part")
    )
    counts = {
        "below_min_tokens": _per_source(below),
        "exact_duplicates": int(n_dupes),
        "over_cap": _per_source(over),
    }
    return c, counts


def _per_source(frame: pl.DataFrame) -> dict[str, int]:
    if frame.height == 0:
        return {}
    g = frame.group_by("source_id").len().sort("source_id")
    return dict(zip(g["source_id"].to_list(), g["len"].to_list(), strict=True))


def parts_of(plan: pl.DataFrame) -> list[tuple[int, int, int]]:
    """(bucket, part, rows) of every part file, in bucket then part order."""
    g = plan.group_by("bucket", "part").len().sort("bucket", "part")
    return [(int(b), int(p), int(n)) for b, p, n in g.iter_rows()]


def summary_frame(bucket: np.ndarray, source_id: list[str] | pl.Series, n_tokens: np.ndarray, segmented: np.ndarray) -> pl.DataFrame:
    """The four columns the statistics are computed from (built from the plan or read back from files)."""
    return pl.DataFrame(
        {
            "bucket": np.asarray(bucket, dtype=np.int32),
            "source_id": source_id,
            "n_tokens": np.asarray(n_tokens, dtype=np.int64),
            "segmented": np.asarray(segmented, dtype=bool),
        }
    )
