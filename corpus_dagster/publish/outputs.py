"""Reading the publish stage's outputs: the only way the tokenize, analysis and release stages, explain and
the Dagster layer see the published shards and their manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_dagster.core import records
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout

__all__ = ["STAGE", "published_shards", "read_manifest", "verified_shards"]

STAGE = "publish"


def read_manifest(layout: Layout) -> dict[str, Any]:
    """The published manifest (UpstreamMissing when nothing was published yet)."""
    if not layout.manifest.exists():
        raise UpstreamMissing(f"no published manifest at {layout.manifest}; materialize shards")
    return json.loads(layout.manifest.read_text(encoding="utf-8"))


def published_shards(layout: Layout) -> list[Path]:
    """The published shard files in order, as they are on disk (what the checks inspect)."""
    from corpus_dagster.publish.checks import shard_paths  # the checks' module loads numba kernels

    return shard_paths(layout.shards)


def verified_shards(layout: Layout) -> list[Path]:
    """The published shard files in order, each checked against the size and sha256 the publish record holds
    (what a later stage reads): StageOutputDamaged names a damaged one and says to rematerialize shards."""
    folder = layout.stage(STAGE)
    return records.record_files(folder, records.require_record(folder, "shards"), "shards")
