"""The publish units inside a work folder: their names, their job files, writing one planned shard.

A unit is one shard. The plan stores each unit's rows as a job file (`jobs/<unit>.npy`: file index, row
index in that file, minhash_cluster) and plan.json names the input files; a unit reads only its job and the
row groups of its own rows, so any process that mounts the artifacts root can write it.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.publish.shards import write_shard

JOBS = "jobs"  # the plan's job file of each unit
SHARD = "parquet"  # a unit's output (`WorkFolder.unit_path(unit, SHARD)`)


class PublishUnitError(CorpusError):
    """A publish unit or the finish step cannot run: its plan or a unit's output is missing or damaged."""


def unit_names(count: int) -> list[str]:
    """`shard-00000`, ...: one unit per shard, names that sort in shard order."""
    width = max(5, len(str(max(count - 1, 0))))
    return [f"shard-{i:0{width}d}" for i in range(count)]


def write_jobs(work: WorkFolder, jobs: list[tuple]) -> list[dict[str, Any]]:
    """Write the job file of every shard job (`shard_jobs`) into `work`; returns the plan's unit entries
    (unit, shard name, rows) in shard order."""
    planned = []
    for unit, (_, file_idx, row_idx, mc, out_path, *_) in zip(unit_names(len(jobs)), jobs, strict=True):
        with atomic_path(work.path / JOBS / f"{unit}.npy") as tmp:  # a full disk names the file
            np.save(tmp, np.stack([file_idx.astype(np.int64), row_idx.astype(np.int64), mc.astype(np.int64)]))
        planned.append({"unit": unit, "shard": out_path.name, "rows": len(file_idx)})
    return planned


def job_files(planned: list[dict[str, Any]]) -> list[str]:
    """The job files of the planned units, relative to the work folder (what plan.json sizes)."""
    return [f"{JOBS}/{u['unit']}.npy" for u in planned]


def stored_path(root: Path, path: Path) -> str:
    """A path as plan.json stores it: relative to the artifacts root (so any machine mounting it can read
    it, wherever it is mounted) when inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def planned_unit(plan: dict[str, Any], unit: str, work: WorkFolder) -> dict[str, Any]:
    """The plan's entry of one unit (its shard name and rows); PublishUnitError for a unit it does not plan."""
    for entry in plan["units"]:
        if entry["unit"] == unit:
            return entry
    raise PublishUnitError(f"{work.plan_path()} plans no unit {unit!r} (units: {[u['unit'] for u in plan['units']][:3]}...)")


def write_planned_unit(root: Path, work: WorkFolder, unit: str) -> None:
    """Write one planned shard and then its done-marker (its manifest entry) into `work`, each atomically;
    nothing when done.

    Memory ~ one shard: the unit reads only its job and the row groups of its own rows.
    """
    plan = work.read_plan()
    entry = planned_unit(plan, unit, work)
    if work.done(unit) is not None:
        return
    start = time.monotonic()
    job_path = work.path / JOBS / f"{unit}.npy"
    try:
        job = np.load(job_path)
    except (OSError, ValueError) as exc:
        raise PublishUnitError(f"cannot read the job of unit {unit!r} at {job_path} ({exc}); run shards_plan again") from exc
    files = [Path(root) / f for f in plan["files"]]
    result = write_shard(files, job[0].astype(np.int32), job[1], job[2], work.unit_path(unit, SHARD),
                         plan["val_permille"], plan["row_group_max_bytes"], plan["zstd_level"])
    work.mark_done(unit, [SHARD], name=entry["shard"], sha256=result["sha256"], rows=result["rows"],
                   seconds=round(time.monotonic() - start, 3))


def shard_entries(markers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's shard entries (name, sha256, rows) from the units' done-markers, in shard order."""
    return [{"name": m["name"], "sha256": m["sha256"], "rows": m["rows"]} for m in markers]


def link_or_move(src: Path, dst: Path) -> None:
    """Hard-link src at dst (the work folder keeps its copy until the swap succeeded); move where links fail."""
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        os.replace(src, dst)
