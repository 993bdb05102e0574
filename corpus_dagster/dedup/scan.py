"""First pass of the global step: every document's id and SHA-256, and decontamination, per row group.

Documents are then numbered by id in byte order (the gid): "smallest id" is "smallest gid", and every
output sorted by gid is sorted by id, whatever the order of sources, files or worker results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.dedup.decontam import find_contaminated
from corpus_dagster.dedup.protected import ProtectedIndex
from corpus_dagster.lib.text import byte_batches


@dataclass
class Job:
    """One row group of one clean document file: the unit of parallel reading."""

    source: int
    path: str
    row_group: int
    scan_start: int = 0
    rows: int = 0


@dataclass
class Corpus:
    """Every document of the run. Scan order = sources, files, row groups as given; gid = id rank."""

    ids: pa.Array  # in gid order
    ids_scan: pa.Array  # in scan order
    gid_of_scan: np.ndarray
    sha256: np.ndarray  # (n, 32) uint8 in gid order
    jobs: list[Job]
    source_start: np.ndarray  # scan position of each source's first document; last = n
    contaminated: list[tuple[int, str, str]] = field(default_factory=list)  # (gid, set name, n-gram)

    @property
    def n(self) -> int:
        """Documents in the run."""
        return len(self.ids)


_INDEX_CACHE: dict[str, ProtectedIndex] = {}


def _load_index(path: str) -> ProtectedIndex:
    if path not in _INDEX_CACHE:
        _INDEX_CACHE.clear()
        _INDEX_CACHE[path] = ProtectedIndex.load(Path(path))
    return _INDEX_CACHE[path]


def _scan_task(
    path: str, row_group: int, index_path: str | None, batch_bytes: int
) -> tuple[pa.Array, pa.Array, list]:
    """ids, sha256 and contaminations (row, set name, n-gram) of one row group (runs in a worker)."""
    columns = ["id", "sha256"] + (["text"] if index_path else [])
    table = pq.ParquetFile(path).read_row_group(row_group, columns=columns)
    found = []
    if index_path:
        index = _load_index(index_path)
        texts = table.column("text").combine_chunks()
        for start, stop in byte_batches(texts, batch_bytes):
            for c in find_contaminated(texts.slice(start, stop - start), index):
                found.append((start + c.row, c.set_name, c.ngram))
    return table.column("id").combine_chunks(), table.column("sha256").combine_chunks(), found


def list_jobs(doc_files: list[tuple[str, list[Path]]]) -> list[Job]:
    """One job per row group of every (source_id, clean files) entry, in the given order."""
    jobs = []
    for si, (source_id, files) in enumerate(doc_files):
        for path in files:
            if not Path(path).exists():
                raise DedupInputError(f"source {source_id!r}: clean document file {path} does not exist")
            pf = pq.ParquetFile(path)
            missing = {"id", "sha256", "text"} - set(pf.schema_arrow.names)
            if missing:
                raise DedupInputError(f"source {source_id!r}: {path} lacks column(s) {sorted(missing)}")
            jobs.extend(Job(si, str(path), rg) for rg in range(pf.num_row_groups))
    return jobs


def scan_corpus(
    doc_files: list[tuple[str, list[Path]]], index_path: str | None, batch_bytes: int, workers: int
) -> Corpus:
    """Read ids and digests of every document (and decontaminate when index_path is given)."""
    jobs = list_jobs(doc_files)
    id_parts, sha_parts, found_scan = [], [], []
    scan = 0
    results = ordered_map(_scan_task, [(j.path, j.row_group, index_path, batch_bytes) for j in jobs], workers)
    for job, (ids, sha, found) in zip(jobs, results, strict=True):
        if sha.null_count:
            raise DedupInputError(f"{job.path}: row group {job.row_group} has null sha256 values")
        job.scan_start, job.rows = scan, len(ids)
        id_parts.append(ids.cast(pa.string()))
        sha_parts.append(sha)
        found_scan.extend((scan + row, name, ngram) for row, name, ngram in found)
        scan += len(ids)
    n = scan
    rows = np.zeros(len(doc_files) + 1, dtype=np.int64)
    for job in jobs:
        rows[job.source + 1] += job.rows
    ids_scan = pa.concat_arrays(id_parts) if id_parts else pa.array([], pa.string())
    sha_scan = pa.concat_arrays(sha_parts) if sha_parts else pa.array([], pa.binary(32))
    scan_of_gid = pc.sort_indices(ids_scan.cast(pa.binary())).to_numpy().astype(np.int64)
    gid_of_scan = np.empty(n, dtype=np.int64)
    gid_of_scan[scan_of_gid] = np.arange(n, dtype=np.int64)
    ids = ids_scan.take(pa.array(scan_of_gid))
    if n > 1:
        same = pc.equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        if same.any():
            raise DedupInputError(f"document id {ids[int(np.flatnonzero(same)[0])].as_py()!r} occurs twice")
    digests = np.frombuffer(sha_scan.buffers()[1], dtype=np.uint8)[
        sha_scan.offset * 32 : (sha_scan.offset + n) * 32
    ]
    return Corpus(
        ids=ids,
        ids_scan=ids_scan,
        gid_of_scan=gid_of_scan,
        sha256=digests.reshape(n, 32)[scan_of_gid],
        jobs=jobs,
        source_start=np.cumsum(rows),
        contaminated=[(int(gid_of_scan[s]), name, ngram) for s, name, ngram in found_scan],
    )
