"""Reading the release's outputs: the only way explain and other readers see a built release (its folder
name and its rows), without loading the release build."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings

__all__ = ["STAGE", "release_name", "release_rows_of"]

STAGE = "release"


def release_name(settings: Settings) -> str:
    """The release's folder name: `release.name`, else the dataset name."""
    return settings.release.name or settings.dataset


def release_rows_of(layout: Layout, settings: Settings, *, release_id: str | None = None,
                    doc_id: str | None = None) -> list[dict[str, Any]]:
    """The rows of the built release with that id (a document's or a segment's UUID, or the parent id of a
    document's segments) or of that corpus document
    (`doc_id`, every segment of it), each with its part file (relative), bucket folder, row, token count and,
    for a segment, its number, character span and parent id. UpstreamMissing when no release was built."""
    folder = layout.release(release_name(settings))
    stats = folder / "_RELEASE.json"
    if not stats.is_file():
        raise UpstreamMissing(f"{stats}: no release built yet; materialize release")
    length_col = json.loads(stats.read_text(encoding="utf-8"))["info"]["length_column"]
    out = []
    for path in sorted((folder / "data").glob("*/*.parquet")):
        frame = pl.read_parquet(path, columns=["id", "metadata", length_col]).with_row_index("_row")
        if release_id is not None:  # a row's own id, or the parent id its segments share
            frame = frame.filter((pl.col("id") == release_id)
                                 | pl.col("metadata").str.contains(f'"parent_id":"{release_id}"', literal=True))
        if doc_id is not None:
            frame = frame.filter(pl.col("metadata").str.contains(f'"doc_id":{json.dumps(doc_id)}', literal=True))
        for row in frame.iter_rows(named=True):
            meta = json.loads(row["metadata"])
            if doc_id is not None and meta.get("doc_id") != doc_id:
                continue
            out.append({"release_id": row["id"], "doc_id": meta.get("doc_id"), "file": path.relative_to(folder).as_posix(),
                        "bucket": path.parent.name, "row": int(row["_row"]), "n_tokens": int(row[length_col]),
                        "segment": meta.get("segment"), "char_span": meta.get("char_span"),
                        "parent_id": meta.get("parent_id")})
    return out
