"""Exact Jaccard of candidate pairs over compact hashed shingle sets kept on disk.

Only documents that appear in a candidate pair are re-shingled. Each one's shingle set is stored once
as its sorted unique 44-bit shingle fingerprints (the top 44 bits of the 64-bit shingle hash) in a flat
file; pairs are then verified a chunk at a time by a merge walk over the two sets of each pair in a
memory map of the file (`kernels.intersections`), so memory is bounded by the chunk (times the threads
that score chunks at once), never by the corpus. The Jaccard is exact over the fingerprints: two different
shingles of one pair share a fingerprint with probability about (|A| + |B|)**2 / 2**45 (1e-8 for two
500-shingle documents). Each document's fingerprints are sorted and deduplicated on their own, in cache
(`kernels.sorted_unique_segments`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.lib.shingle_hashing import shingle_hashes, text_word_hashes
from corpus_dagster.lib.text import byte_batches

FINGERPRINT_BITS = 44
_FP_SHIFT = np.uint64(64 - FINGERPRINT_BITS)  # a fingerprint is the hash's top FINGERPRINT_BITS


def shingle_sets(texts, shingle_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique shingle fingerprints of each text: (values uint64, lengths int64), in text order."""
    from corpus_dagster.lib.kernels import sorted_unique_segments  # numba: imported where sets are built

    hashes, offsets = shingle_hashes(*text_word_hashes(texts), shingle_size)
    n_docs = len(offsets) - 1
    if n_docs <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    fingerprints = hashes[offsets[0]:offsets[-1]] >> _FP_SHIFT  # a new array: sorted in place
    return sorted_unique_segments(fingerprints, offsets - offsets[0])


def jaccard_of(inter: np.ndarray, union: np.ndarray) -> np.ndarray:
    """inter / union as float64 (0.0 where the union is empty): one formula for every Jaccard of a store."""
    return np.divide(np.asarray(inter, dtype=np.float64), np.asarray(union, dtype=np.float64),
                     out=np.zeros(len(inter)), where=np.asarray(union) > 0)


class ShingleStore:
    """Append-only file of shingle sets for nodes 0..n_nodes-1, written in any order, read by node."""

    def __init__(self, path: Path, n_nodes: int) -> None:
        self.path = Path(path)
        self.offset = np.full(n_nodes, -1, dtype=np.int64)
        self.length = np.zeros(n_nodes, dtype=np.int64)
        self._size = 0
        self._fh = open(self.path, "wb")

    @classmethod
    def open(cls, path: Path, offset: np.ndarray, length: np.ndarray) -> ShingleStore:
        """Reopen a closed store file read-only, from the `offset` and `length` arrays it was written with.

        Lets another process (a verification unit, the finish step) read a store one process built.
        """
        path = Path(path)
        store = cls.__new__(cls)
        store.path = path
        store.offset = np.asarray(offset, dtype=np.int64)
        store.length = np.asarray(length, dtype=np.int64)
        store._size = path.stat().st_size // 8
        store._fh = None
        need = int((store.offset + store.length).max()) if len(store.offset) else 0
        if (store.offset < 0).any() or need > store._size:
            raise DedupInputError(
                f"shingle store {path} holds {store._size} values, its index needs {need}; rebuild it"
            )
        return store

    def append(self, nodes: np.ndarray, values: np.ndarray, lengths: np.ndarray) -> None:
        """Store the sets of `nodes` (their values concatenated in node-list order)."""
        self.offset[nodes] = self._size + np.cumsum(lengths) - lengths
        self.length[nodes] = lengths
        self._fh.write(np.ascontiguousarray(values, dtype=np.uint64).tobytes())
        self._size += len(values)

    def close(self) -> None:
        """Finish writing; the store is then read-only."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        missing = np.flatnonzero(self.offset < 0)
        if len(missing):
            raise RuntimeError(f"shingle store lacks {len(missing)} node(s), e.g. node {int(missing[0])}")

    def jaccard(self, a: np.ndarray, b: np.ndarray, chunk_values: int, threads: int = 1) -> np.ndarray:
        """Exact Jaccard of the sets of nodes a[i] and b[i] (float64), chunk_values set entries at a time.

        `threads` > 1 compares that many chunks at once on threads of this process (the merge-walk kernel
        releases the GIL; each chunk fills its own slice of the result, so the bytes are the same), at
        `threads` chunks of memory instead of one."""
        return jaccard_of(*self.counts(a, b, chunk_values, threads))

    def counts(
        self, a: np.ndarray, b: np.ndarray, chunk_values: int, threads: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """(|A & B|, |A | B|) of the sets of nodes a[i] and b[i], int64: the integers behind `jaccard`, so a
        threshold can be tested exactly (inter * 100 >= t100 * union) instead of on a rounded ratio."""
        inter = np.zeros(len(a), dtype=np.int64)
        if self._size == 0 or len(a) == 0:
            return inter, self.length[a] + self.length[b]
        cum = np.cumsum(self.length[a] + self.length[b])
        spans, start = [], 0
        while start < len(a):
            done = int(cum[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(cum, done + chunk_values, side="right")))
            spans.append((start, stop))
            start = stop

        def fill(span: tuple[int, int]) -> None:
            inter[span[0]:span[1]] = self._intersection_chunk(a[span[0]:span[1]], b[span[0]:span[1]])

        if threads <= 1 or len(spans) <= 1:
            for span in spans:
                fill(span)
        else:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="jaccard") as pool:
                list(pool.map(fill, spans))  # list(): a chunk's error is raised here
        return inter, self.length[a] + self.length[b] - inter

    def _intersection_chunk(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from corpus_dagster.lib.kernels import intersections  # numba: imported where sets are compared

        # A fresh map per chunk: the pages it touched are released again when it goes away. Both sets of a
        # pair are sorted and unique, so one merge walk counts the shared fingerprints.
        mm = np.memmap(self.path, dtype=np.uint64, mode="r", shape=(self._size,))
        try:
            inter = intersections(np.asarray(mm), self.offset[a], self.length[a], self.offset[b], self.length[b])
        finally:
            del mm
        return np.asarray(inter, dtype=np.int64)


def shingle_sets_task(path: str, row_group: int, rows: np.ndarray, shingle_size: int, batch_bytes: int,
                      column: str = "text"):
    """Sorted unique shingle fingerprints of the given rows of one row group, texts from `column` (runs in a worker)."""
    texts = pq.ParquetFile(path).read_row_group(row_group, columns=[column]).column(column).combine_chunks()
    texts = texts.take(rows)
    values, lengths = [np.zeros(0, np.uint64)], [np.zeros(0, np.int64)]
    for start, stop in byte_batches(texts, batch_bytes):
        v, n = shingle_sets(texts.slice(start, stop - start), shingle_size)
        values.append(v)
        lengths.append(n)
    return np.concatenate(values), np.concatenate(lengths)
