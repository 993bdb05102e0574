"""The files of one global dedup key's work folder: their names, the unit names, and reading and writing
the arrays the plan leaves for the units and the finish (ids and numbers as .npy, never text).

    plan.json             the plan, written last: sources, bands, contamination details, scan jobs
    ids.arrow             document ids in gid order
    status.npy, matched.npy, gid_of_scan.npy
    source_of_gid.npy, node_of_gid.npy   each document's source number and graph node (`dedup.blocks`)
    rank_of_gid.npy, rep_of_gid.npy   each document's stable key rank and the kept copy of its text
    band_hashes.npy       (bands, participants) uint64, one row per LSH unit; band_gids.npy their gids;
                          band_dirty.npy whether each is of a source with a block to compute
    graph_signatures.bin  their signatures (raw, num_perm values per row), for the candidates' agreement filter
    local_pairs.npy       the merged LSH pairs of the blocks to compute, between different texts (gids)
    graph_candidates.npy  the same as node pairs, packed, unique; agree.npy whether each is scored
    candidates.npy        those node pairs whose signatures agree enough to score; pair_nodes.npy the same
                          as store node numbers
    shingles.u64, store_offset.npy, store_length.npy   the shingle store of the pairs' documents
    verify.json           the verification plan, written last: pairs, chunk size, unit count
    units/lsh-band-NNN.pairs.npy      an LSH unit's pairs (every pair of each bucket), packed (gid_a << 32 | gid_b)
    units/verify-NNNNN.counts.npy     a verification unit's (2, pairs) shingle intersections and unions
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.dedup.corpus_dedup import GRAPH_SIGNATURES, Prepared, StepTimer
from corpus_dagster.lib.jaccard import ShingleStore
from corpus_dagster.lib.near_graph import GraphSpec

VERIFY = "verify"  # the verification plan (`WorkFolder.write_plan(..., name=VERIFY)`)
IDS = "ids.arrow"
BAND_HASHES = "band_hashes.npy"  # (bands, participants) uint64, band-major
BAND_GIDS = "band_gids.npy"
CANDIDATES = "candidates.npy"
PAIR_NODES = "pair_nodes.npy"
SHINGLES = "shingles.u64"
SOURCE_OF_GID = "source_of_gid.npy"
NODE_OF_GID = "node_of_gid.npy"
RANK_OF_GID = "rank_of_gid.npy"
REP_OF_GID = "rep_of_gid.npy"
BAND_DIRTY = "band_dirty.npy"
LOCAL_PAIRS = "local_pairs.npy"
GRAPH_CANDIDATES = "graph_candidates.npy"
AGREE = "agree.npy"
PREPARED_FILES = (IDS, "status.npy", "matched.npy", "gid_of_scan.npy", SOURCE_OF_GID, NODE_OF_GID, RANK_OF_GID, REP_OF_GID, BAND_HASHES,
                  BAND_GIDS, BAND_DIRTY, GRAPH_SIGNATURES)
LSH_UNIT = "lsh-band-"
VERIFY_UNIT = "verify-"
PAIRS = "pairs.npy"  # an LSH unit's output
COUNTS = "counts.npy"  # a verification unit's output: (2, pairs) intersections and unions


class DedupWorkError(CorpusError):
    """A dedup unit or step ran without the work-folder files an earlier step writes; names the path."""


def lsh_unit(band: int) -> str:
    """Name of the LSH unit of one band."""
    return f"{LSH_UNIT}{band:03d}"


def verify_unit(chunk: int) -> str:
    """Name of the verification unit of one chunk of candidate pairs."""
    return f"{VERIFY_UNIT}{chunk:05d}"


def unit_number(unit: str, prefix: str, count: int) -> int:
    """The band or chunk number of a unit name; DedupWorkError for one the plan does not have."""
    tail = unit[len(prefix):]
    if not tail.isdigit() or int(tail) >= count:
        raise DedupWorkError(f"unknown dedup unit {unit!r}: this plan has {count} {prefix}NNN unit(s)")
    return int(tail)


def verify_files(units: int) -> list[str]:
    """The files a complete verification plan wrote (the shingle store only when there is something to verify)."""
    return [LOCAL_PAIRS, GRAPH_CANDIDATES, AGREE, CANDIDATES, PAIR_NODES] + ([SHINGLES, "store_offset.npy", "store_length.npy"] if units else [])


def save_array(path: Path, array: np.ndarray) -> None:
    """One array as .npy, atomically."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)


def write_prepared(path: Path, prep: Prepared, dirty: np.ndarray) -> None:
    """The arrays of a prepared corpus the units and the finish read (PREPARED_FILES), each atomically;
    `dirty`: per band row, whether its pairs are generated."""
    save_array(path / BAND_DIRTY, dirty)
    save_array(path / SOURCE_OF_GID, prep.source_of_gid)
    save_array(path / NODE_OF_GID, prep.node_of_gid)
    save_array(path / RANK_OF_GID, prep.rank_of_gid)
    save_array(path / REP_OF_GID, prep.rep_of_gid)
    save_array(path / "status.npy", prep.status)
    save_array(path / "matched.npy", prep.matched)
    save_array(path / "gid_of_scan.npy", prep.gid_of_scan)
    save_array(path / BAND_HASHES, np.ascontiguousarray(prep.band_keys.T))  # band-major: one row per unit
    save_array(path / BAND_GIDS, prep.band_gids)
    with atomic_path(path / IDS) as tmp, pa.ipc.new_file(str(tmp), pa.schema([("id", pa.string())])) as writer:
        writer.write_table(pa.table({"id": prep.ids}))


def read_prepared(path: Path, meta: dict[str, Any], spec: GraphSpec) -> Prepared:
    """The prepared corpus the finish needs back from the work folder and its plan (`meta`): ids, status,
    exact matches, contamination details, the band gids; not the band hashes or scan jobs the units used."""
    with pa.ipc.open_file(str(path / IDS)) as reader:
        ids = reader.read_all().column("id").combine_chunks()
    return Prepared(
        ids=ids,
        status=np.load(path / "status.npy"),
        matched=np.load(path / "matched.npy"),
        spec=spec,
        detail={int(gid): text for gid, text in meta["detail"]},
        by_set={name: n for name, n in meta["by_set"]},
        band_keys=np.zeros((0, meta["bands"]), np.uint64),
        band_gids=np.load(path / BAND_GIDS, mmap_mode="r"),
        source_of_gid=np.load(path / SOURCE_OF_GID),
        rank_of_gid=np.load(path / RANK_OF_GID),
        rep_of_gid=np.load(path / REP_OF_GID),
        node_of_gid=np.load(path / NODE_OF_GID),
        signatures=path / GRAPH_SIGNATURES,
        no_signature=meta["no_signature"],
        jobs=[],
        gid_of_scan=np.zeros(0, np.int64),
    )


def open_store(work: WorkFolder) -> ShingleStore:
    """The shingle store the verification plan built."""
    offset = np.load(work.path / "store_offset.npy")
    length = np.load(work.path / "store_length.npy")
    return ShingleStore.open(work.path / SHINGLES, offset, length)


def steps_timer(meta: dict[str, Any], plan: dict[str, Any], band_markers: list[dict[str, Any]],
                verified: list[dict[str, Any]]) -> StepTimer:
    """A timer holding every step timed before the finish: the plan's and the verification plan's steps,
    then each LSH (`band_markers`) and verification unit (`verified`) by its done-marker."""
    timer = StepTimer()
    for step_seconds, step_rss in ((meta["seconds"], meta["peak_rss_mb"]), (plan["seconds"], plan["peak_rss_mb"])):
        for name, seconds in step_seconds.items():
            timer.add(name, seconds, step_rss[name])
    for step, markers in (("lsh", band_markers), ("verify", verified)):
        for marker in markers:
            if "seconds" in marker:
                timer.add(step, marker["seconds"], marker["peak_rss_mb"])
    return timer


def relative(root: Path, path: str) -> str:
    """A clean file's path relative to the artifacts root when it lies under it (another machine may mount
    the root elsewhere), else absolute."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def absolute(root: Path, path: str) -> str:
    """A path `relative` stored, back under this machine's artifacts root."""
    return str(root / path) if not Path(path).is_absolute() else path


def jsonable(value: Any) -> Any:
    """Stats as plain JSON values (numpy scalars become Python numbers)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value
