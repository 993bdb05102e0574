"""The rebuild check's comparison: the published folder against a rebuild of (a sample of) its planned units.

The plan is recomputed in full by the caller (which documents each shard holds is then checked for every
shard); here the same unit function a build runs writes the sampled shards again, through a pool of another
worker count, and their bytes are compared with the published ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus_dagster.core.checks import sample_units
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.units import run_units
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.publish.checks import MAX_PROBLEMS, compare_folders, shard_paths
from corpus_dagster.publish.manifest import manifest_bytes
from corpus_dagster.publish.units import SHARD, shard_entries, write_planned_unit

MANIFEST = "_MANIFEST.json"


def rebuild_problems(published: Path, root: Path, plan: dict[str, Any], work: WorkFolder, sample: int, seed: str,
                     workers: int, manifest_of: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> list[str]:
    """Differences between the `published` folder and a rebuild of (a sample of) the units of `plan` in `work`.

    `sample` > 0 rewrites a seeded sample of that many shards and compares each; 0 rewrites every shard and
    the manifest (`manifest_of(shard entries)`) and compares the folders byte for byte.
    """
    units = plan["units"]
    on_disk = sorted(p.name for p in shard_paths(published))
    planned = [u["shard"] for u in units]
    if on_disk != planned:
        return [f"published shards {on_disk[:3]}... != planned {planned[:3]}... ({len(on_disk)} vs {len(planned)})"]
    picks = sample_units(len(units), sample if sample > 0 else len(units), seed)
    run_units(write_planned_unit, (root, work), [units[i]["unit"] for i in picks], workers)
    if sample == 0:  # every shard and the manifest, byte for byte, in a folder named as the published one
        shards = shard_entries(work.require_done([u["unit"] for u in units], verify=False))
        rebuilt = work.path.parent / "rebuilt"
        rebuilt.mkdir()
        for u, s in zip(units, shards, strict=True):
            os.replace(work.unit_path(u["unit"], SHARD), rebuilt / s["name"])
        (rebuilt / MANIFEST).write_bytes(manifest_bytes(manifest_of(shards)))
        return compare_folders(published, rebuilt)
    problems = []
    for i in picks:
        name = units[i]["shard"]
        if sha256_file(published / name) != sha256_file(work.unit_path(units[i]["unit"], SHARD)):
            problems.append(f"{name} (shard {i}): bytes differ from a rebuild with workers={workers}")
    return problems[:MAX_PROBLEMS]
