"""The release row schema and the builder of one part's table from its plan rows and contents."""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl
import pyarrow as pa

# Plan columns that become fixed metadata keys (anything else in the plan's `keep` list is a kept field).
FIXED_KEYS = ("url", "title", "license", "source_file", "cleaned", "source_id", "doc_id")


def length_column(tokenizer_name: str) -> str:
    """`length_tokens_<tokenizer>` with the name reduced to [a-z0-9_]."""
    return "length_tokens_" + re.sub(r"[^a-z0-9_]+", "_", tokenizer_name.lower()).strip("_")


def release_schema(tokenizer_name: str) -> pa.Schema:
    """One row per document, columns in the release contract's order."""
    return pa.schema(
        [
            ("id", pa.string()),
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("source_type", pa.string()),
            ("metadata", pa.string()),
            ("content", pa.string()),
            (length_column(tokenizer_name), pa.int32()),
            ("tags", pa.list_(pa.string())),
        ]
    )


def metadata_json(row: dict[str, Any]) -> str:
    """The metadata JSON of one plan row: fixed keys first (url only for a source with a `url_field`, title
    only when known), then the kept source fields (`kept`, a JSON object; a field named like a fixed key
    is the fixed key's value already), then the segment keys."""
    meta: dict[str, Any] = {}
    if row.get("url") is not None:
        meta["url"] = row["url"]
    if row.get("title") is not None:
        meta["title"] = row["title"]
    meta["license"] = row.get("license_spdx")
    meta["source_file"] = row.get("source_file")
    meta["cleaned"] = list(row.get("cleaned") or [])
    meta["source_id"] = row["source_id"]
    meta["doc_id"] = row["doc_id"]
    for name, value in json.loads(row["kept"]).items() if row.get("kept") else ():
        meta.setdefault(name, value)
    if row["segment"] >= 0:
        meta["parent_id"] = row["parent_id"]
        meta["segment"] = int(row["segment"])
        meta["char_span"] = [int(row["char_start"]), int(row["char_end"])]
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), default=str)


def part_table(plan_rows: pl.DataFrame, contents: list[str], tokenizer_name: str) -> pa.Table:
    """The part's Arrow table; `plan_rows` sorted by row, `contents` aligned with it."""
    metas = [metadata_json(r) for r in plan_rows.iter_rows(named=True)]
    schema = release_schema(tokenizer_name)
    return pa.table(
        [
            pa.array(plan_rows["id"].to_list(), pa.string()),
            plan_rows["created_at"].to_arrow().cast(pa.timestamp("us", tz="UTC")),
            pa.array(plan_rows["source_type"].to_list(), pa.string()),
            pa.array(metas, pa.string()),
            pa.array(contents, pa.string()),
            pa.array(plan_rows["n_tokens"].to_numpy(), pa.int32()),
            pa.array([[] for _ in range(plan_rows.height)], pa.list_(pa.string())),
        ],
        schema=schema,
    )
