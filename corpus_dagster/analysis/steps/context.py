"""What every analysis step is handed, and the intermediate arrays steps pass on through `_work/`.

A step reads only its context and the files earlier steps wrote, so the runner may skip any step whose
record is intact and run the next one in a new process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.analysis.exact import group_members
from corpus_dagster.analysis.inputs import CorpusFiles
from corpus_dagster.analysis.views import Groups
from corpus_dagster.core.settings import AnalysisSettings, NearDupSettings
from corpus_dagster.lib.near_graph import GraphSpec

WORK_DIR = "_work"  # intermediate arrays (kept so a rerun can resume)
DOCS_TABLE = f"{WORK_DIR}/docs.parquet"  # one row per document, sorted by id
BANDS_FILE = f"{WORK_DIR}/bands.u64"  # LSH band keys in scan order
REPS_FILE = f"{WORK_DIR}/rep.npy"  # exact-duplicate representative per document
CANDIDATES_FILE = f"{WORK_DIR}/candidates.npy"  # packed candidate pairs
GRAPH_COUNTS_FILE = f"{WORK_DIR}/graph_counts.npy"  # (2, pairs) shingle counts of the candidates, read from a graph
PAIRS_TABLE = f"{WORK_DIR}/pairs.parquet"  # verified pairs with their Jaccard


@dataclass
class StepContext:
    """The inputs, settings and folders of one analysis run.

    recorded_stats: given a step, the stats the records of every step before it hold (the report cites
    them all)
    near, spec: the near-duplicate graph's settings and shape (threshold, banding, shingling)
    graph: the verified pairs of a graph already computed over exactly these documents (dedup's
    pairs.parquet), read instead of computing candidates and their Jaccard again; None computes them
    """

    documents: CorpusFiles
    lengths: CorpusFiles
    out: Path
    cfg: AnalysisSettings
    signature_files: list[Path]
    token_counts: list[Path]
    workers: int
    key: str
    recorded_stats: Callable[[str], dict[str, dict[str, Any]]]
    near: NearDupSettings
    spec: GraphSpec
    graph: Path | None = None

    @property
    def work(self) -> Path:
        return self.out / WORK_DIR


def load_docs(ctx: StepContext) -> pa.Table:
    """The scan's document table (id order)."""
    return pq.read_table(ctx.out / DOCS_TABLE)


def digest_matrix(table: pa.Table) -> np.ndarray:
    """The documents' SHA-256 digests as an (n, 32) uint8 matrix, without copying."""
    col = table.column("sha256").combine_chunks()
    return np.frombuffer(col.buffers()[1], dtype=np.uint8)[col.offset * 32 : (col.offset + len(col)) * 32].reshape(
        len(col), 32
    )


def load_groups(ctx: StepContext) -> Groups:
    """The exact-duplicate groups the exact step found."""
    rep = np.load(ctx.out / REPS_FILE)
    starts, sizes, members = group_members(rep)
    return Groups(rep, starts, sizes, members)


def load_pairs(ctx: StepContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pairs, float64 Jaccard, intersection, union) of the verified pairs."""
    t = pq.read_table(ctx.out / PAIRS_TABLE)
    pairs = np.stack([t.column("a").to_numpy(), t.column("b").to_numpy()], 1) if t.num_rows else np.zeros((0, 2), np.int64)
    return (pairs.astype(np.int64), t.column("jaccard").to_numpy(), t.column("intersection").to_numpy(),
            t.column("union").to_numpy())
