"""The near-duplicate graph in blocks, one per pair of sources, reusable across builds.

A block holds the LSH candidate pairs between the documents of two sources (or within one), each between
two different texts: its ids, whether the pair's signatures agreed enough to be scored, and the shingle
intersection and union of the scored ones. Its documents are the smallest id of each distinct text within
its source, so a block depends on its two sources' texts and the graph's shape only: it is keyed by the two
sources' content (the sha256 of their clean document files, and the signature settings) and the graph spec.

When one source is added or changes, every block between unchanged sources is read back instead of
recomputed, and only the pairs with a document of a changed source are generated and scored. The global
graph is the union of the blocks with each document mapped to the smallest id of its text across the
corpus: signatures and shingles are functions of the text, so that union is the graph a build from scratch
finds, pair for pair and count for count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.hashing import sha256_hex
from corpus_dagster.lib.lsh import pack_pairs, unpack_pairs
from corpus_dagster.lib.near_graph import GraphSpec

BLOCKS = "_graph-blocks"  # under the dedup stage folder; "_" keeps it from being pruned as an old key
BLOCK_CODE_VERSION = "1"
BLOCK_SCHEMA = pa.schema([
    ("row_a", pa.int64()),
    ("row_b", pa.int64()),
    ("id_a", pa.string()),
    ("id_b", pa.string()),
    ("scored", pa.bool_()),
    ("intersection", pa.int64()),
    ("union", pa.int64()),
])
READ_COLUMNS = ["row_a", "row_b", "scored", "intersection", "union"]  # a reused block is read by position


@dataclass(frozen=True)
class SourceRows:
    """Where each document of a build sits in its source: its row (position in the source's clean files, in
    their order), which the source's content fixes, so a block can name documents by row across builds."""

    gid_of_scan: np.ndarray  # the scan reads sources, files and row groups in order
    source_start: np.ndarray  # scan position of each source's first document; last = documents

    def rows(self, gids: np.ndarray) -> np.ndarray:
        """The row of each gid within its own source."""
        scan_of_gid = np.empty(len(self.gid_of_scan), dtype=np.int64)
        scan_of_gid[self.gid_of_scan] = np.arange(len(self.gid_of_scan), dtype=np.int64)
        scan = scan_of_gid[gids]
        return scan - self.source_start[np.searchsorted(self.source_start, scan, side="right") - 1]

    def gids(self, source: int, rows: np.ndarray, where: Path) -> np.ndarray:
        """The gids of rows of source number `source`; DedupInputError for a row the source does not have."""
        start, stop = int(self.source_start[source]), int(self.source_start[source + 1])
        if len(rows) and (rows.min() < 0 or rows.max() >= stop - start):
            raise DedupInputError(
                f"reused near-duplicate block {where} names row {int(rows.max())} of a source with {stop - start} "
                f"documents; delete {where.parent} to rebuild the blocks"
            )
        return self.gid_of_scan[start + rows]


@dataclass(frozen=True)
class Block:
    """The candidate pairs between sources number `a` and `b` (a <= b, in sorted source order)."""

    a: int
    b: int
    key: str
    reused: bool  # read back from an earlier build instead of computed

    @property
    def name(self) -> str:
        """Its file, relative to the dedup stage folder."""
        return f"{BLOCKS}/{self.key}.parquet"

    def as_list(self) -> list[object]:
        return [self.a, self.b, self.key, self.reused]


def block_key(source_a: tuple[str, str], source_b: tuple[str, str], spec: GraphSpec) -> str:
    """Content key of a block: (source id, content key) of both sources and the graph's shape."""
    text = json.dumps({"code": BLOCK_CODE_VERSION, "a": list(source_a), "b": list(source_b), "graph": spec.as_dict()},
                      sort_keys=True)
    return sha256_hex(text.encode())[:32]


def plan_blocks(sources: list[tuple[str, str]], spec: GraphSpec, reusable: Iterable[str]) -> list[Block]:
    """Every block of the sorted (source id, content key) list: reused when its key is in `reusable`."""
    have = set(reusable)
    out = []
    for a in range(len(sources)):
        for b in range(a, len(sources)):
            key = block_key(sources[a], sources[b], spec)
            out.append(Block(a, b, key, key in have))
    return out


def source_count(blocks: list[Block]) -> int:
    """How many sources the blocks pair: every source has blocks, with or without documents (one whose every
    document was rejected has none, so the largest source number among the documents can fall short)."""
    return max((b.b for b in blocks), default=-1) + 1


def block_numbers(pairs: np.ndarray, source_of_gid: np.ndarray, n_sources: int) -> np.ndarray:
    """The block number (a * n_sources + b, a <= b) of each (m, 2) pair of gids."""
    src = np.sort(np.asarray(source_of_gid, dtype=np.int64)[pairs], axis=1).reshape(-1, 2)
    return src[:, 0] * n_sources + src[:, 1]


def dirty_documents(blocks: list[Block], source_of_gid: np.ndarray) -> np.ndarray:
    """Per gid: whether its pairs are generated. Every pair of a block to compute must have a dirty side, and
    the fewer dirty documents the fewer pairs: the sources whose own block is computed (a source added or
    changed), then one side of any block to compute that neither covers (a lost or damaged block)."""
    dirty = np.zeros(max(source_count(blocks), 1), dtype=bool)
    for block in blocks:
        if not block.reused and block.a == block.b:
            dirty[block.a] = True
    for block in blocks:
        if not block.reused and not (dirty[block.a] or dirty[block.b]):
            dirty[block.a] = True
    return dirty[source_of_gid]


def in_computed_blocks(pairs: np.ndarray, blocks: list[Block], source_of_gid: np.ndarray, n_sources: int) -> np.ndarray:
    """Per pair of gids: whether its block is one this build computes."""
    computed = np.array([b.a * n_sources + b.b for b in blocks if not b.reused], dtype=np.int64)
    return np.isin(block_numbers(pairs, source_of_gid, n_sources), computed)


def graph_pairs(pairs: np.ndarray, node_of_gid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each (m, 2) pair of gids as a pair of graph nodes (the smallest id of each side's text across the
    corpus), packed; and whether its two texts differ (two copies of one text are one node, not a pair)."""
    if not len(pairs):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
    nodes = np.asarray(node_of_gid, dtype=np.int64)[pairs]
    return pack_pairs(nodes[:, 0], nodes[:, 1]), nodes[:, 0] != nodes[:, 1]


def write_block(path: Path, ids: pa.Array, pairs: np.ndarray, rows: np.ndarray, scored: np.ndarray,
                intersection: np.ndarray, union: np.ndarray) -> None:
    """One block's pairs (gids, the block's first source in column 0; `rows` their rows in their sources),
    atomically, as Parquet with the documents' ids for a reader."""
    table = pa.table({
        "row_a": pa.array(rows[:, 0], pa.int64()),
        "row_b": pa.array(rows[:, 1], pa.int64()),
        "id_a": ids.take(pa.array(pairs[:, 0])) if len(pairs) else pa.array([], pa.string()),
        "id_b": ids.take(pa.array(pairs[:, 1])) if len(pairs) else pa.array([], pa.string()),
        "scored": pa.array(scored, pa.bool_()),
        "intersection": pa.array(intersection, pa.int64()),
        "union": pa.array(union, pa.int64()),
    }, schema=BLOCK_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)


@dataclass
class BlockPairs:
    """Pairs of blocks in gids of this build: what scoring found, or what a reused block holds."""

    pairs: np.ndarray  # (m, 2) int64
    scored: np.ndarray
    intersection: np.ndarray
    union: np.ndarray

    def as_graph_part(self, node_of_gid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(packed node pairs, scored, intersection, union) of the pairs between different texts."""
        keys, differ = graph_pairs(self.pairs, node_of_gid)
        return keys[differ], self.scored[differ], self.intersection[differ], self.union[differ]


def read_block(path: Path, block: Block, where: SourceRows) -> BlockPairs:
    """The pairs of one reused block, by row (never by id: no lookup table of every id), in this build's gids."""
    table = pq.read_table(path, columns=READ_COLUMNS, schema=BLOCK_SCHEMA)
    side_a = where.gids(block.a, table.column("row_a").to_numpy(zero_copy_only=False), path)
    side_b = where.gids(block.b, table.column("row_b").to_numpy(zero_copy_only=False), path)
    return BlockPairs(
        np.stack([side_a, side_b], axis=1).reshape(-1, 2),
        table.column("scored").to_numpy(zero_copy_only=False).astype(bool),
        table.column("intersection").to_numpy(zero_copy_only=False),
        table.column("union").to_numpy(zero_copy_only=False),
    )


@dataclass
class Graph:
    """The global graph: every candidate pair of nodes, which were scored, and the scored ones' counts."""

    candidates: np.ndarray  # packed node pairs, sorted, unique
    pairs: np.ndarray  # (m, 2) the scored ones, sorted
    intersection: np.ndarray
    union: np.ndarray


def merge_graph(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> Graph:
    """The union of (packed node pairs, scored, intersection, union) parts, one row per node pair.

    A pair found in more than one part (texts present in several sources) must agree in every value: the
    values are functions of the two texts, so a disagreement means a block does not hold what its key says.
    """
    keys = np.concatenate([p[0] for p in parts]).astype(np.uint64)
    scored = np.concatenate([p[1] for p in parts]).astype(bool)
    inter = np.concatenate([p[2] for p in parts]).astype(np.int64)
    union = np.concatenate([p[3] for p in parts]).astype(np.int64)
    order = np.lexsort((keys,))
    keys, scored, inter, union = keys[order], scored[order], inter[order], union[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    group = np.cumsum(first) - 1
    lead = np.flatnonzero(first)
    same = (scored == scored[lead][group]) & (inter == inter[lead][group]) & (union == union[lead][group])
    if not same.all():
        pair = unpack_pairs(keys[~same][:1])[0]
        raise DedupInputError(
            f"near-duplicate blocks disagree about the pair of gids {pair.tolist()}: a reused block does not hold "
            f"what its key says; delete the dedup stage's {BLOCKS} folder to rebuild the blocks"
        )
    keys, scored, inter, union = keys[first], scored[first], inter[first], union[first]
    return Graph(keys, unpack_pairs(keys[scored]), inter[scored], union[scored])


def write_blocks(folder: Path, blocks: list[Block], computed: BlockPairs, ids: pa.Array, source_of_gid: np.ndarray,
                 where: SourceRows) -> None:
    """Write each block this build computed under the stage folder: its share of `computed` (the pairs this
    build generated and scored, in gids), each pair with the block's first source in column a."""
    n_sources = source_count(blocks)
    number = block_numbers(computed.pairs, source_of_gid, n_sources)
    sources = np.asarray(source_of_gid)[computed.pairs].reshape(-1, 2)
    oriented = np.where((sources[:, 0] > sources[:, 1])[:, None], computed.pairs[:, ::-1], computed.pairs)
    rows = where.rows(oriented.reshape(-1)).reshape(-1, 2)
    for block in blocks:
        if not block.reused:
            sel = number == block.a * n_sources + block.b
            write_block(folder / block.name, ids, oriented[sel], rows[sel], computed.scored[sel],
                        computed.intersection[sel], computed.union[sel])


def reused_parts(folder: Path, blocks: list[Block], where: SourceRows,
                 node_of_gid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The graph parts (`merge_graph`) of the reused blocks, read back one at a time: memory holds their
    node pairs with flags and counts (25 bytes each) and one block's table."""
    return [read_block(folder / b.name, b, where).as_graph_part(node_of_gid) for b in blocks if b.reused]


def reusable_blocks(folder: Path) -> set[str]:
    """Keys of the blocks the stage folder's last record names and that still match it (size and sha256):
    only those are read back instead of computed."""
    record = records.read_record(folder)
    if record is None:
        return set()
    names = record.files.get("blocks", [])
    damaged = {path.name for path, _ in records.damaged_outputs(folder, record, names)}
    return {Path(name).stem for name in names if Path(name).name not in damaged}


def remove_unnamed_blocks(folder: Path, names: list[str]) -> None:
    """Delete the block files a just-committed record does not name (older keys): a later build reuses only
    what the last record names, so the others would only take space."""
    named = {Path(n).name for n in names}
    for path in sorted((folder / BLOCKS).glob("*.parquet")):
        if path.name not in named:
            path.unlink(missing_ok=True)
