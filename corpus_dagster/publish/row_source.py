"""The rows of one shard, read in shard order a window at a time, each input row group decoded once.

A shard's rows are in global id order (`<source_id>:<k>` compared as strings), so consecutive rows come
from a few regions of a source's files (k = 1, 10-19, 100-199, ... sort together) rather than from one.
Reading a whole shard at once held every row group it touches plus the shard itself: at 10x the bench
corpus a 10,000-row shard of changelogs was 700 MB of text and the publish step peaked at 3.3 GB. Here a
row group is read when the first row that needs it comes up and dropped after the last one, so memory is
bounded by the row groups live at the same time (about one per decimal magnitude of k per source the
window spans) plus one window of rows, whatever the shard's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.parquet import locate_rows

WINDOW_ROWS = 256  # rows handed out at a time: small against any row group, large enough to amortize a take


class RowSource:
    """Rows (file_idx[i], row_idx[i]) of `files`, in that order, with `columns` (a column a file lacks is
    zeros: e.g. pii_redactions before the scrub stage)."""

    def __init__(self, files: list[Path], file_idx: np.ndarray, row_idx: np.ndarray, columns: list[str]):
        self.columns = columns
        self.n = len(file_idx)
        file_idx = np.asarray(file_idx, dtype=np.int64)
        row_idx = np.asarray(row_idx, dtype=np.int64)
        self._meta: dict[int, pq.ParquetFile] = {}
        group = np.zeros(self.n, dtype=np.int64)
        local = np.zeros(self.n, dtype=np.int64)
        for f in np.unique(file_idx).tolist():
            sel = np.nonzero(file_idx == f)[0]
            pf = self._meta[f] = pq.ParquetFile(files[f])
            group[sel], local[sel] = locate_rows(pf, row_idx[sel])
        # one key per (file, row group); the last row that needs each key says when it can go
        self.key = file_idx * (1 << 32) + group
        self.local = local
        keys, last_rev = np.unique(self.key[::-1], return_index=True)
        self._last = dict(zip(keys.tolist(), (self.n - 1 - last_rev).tolist(), strict=True))
        self._live: dict[int, pa.Table] = {}
        self.peak_live_groups = 0

    def _group(self, key: int) -> pa.Table:
        table = self._live.get(key)
        if table is None:
            f, g = divmod(key, 1 << 32)
            pf = self._meta[f]
            avail = [c for c in self.columns if c in pf.schema_arrow.names]
            table = pf.read_row_group(g, columns=avail, use_threads=False)  # processes parallelize
            for c in self.columns:
                if c not in avail:
                    table = table.append_column(c, pa.array(np.zeros(table.num_rows, dtype=np.int32)))
            table = self._live[key] = table.select(self.columns)
            self.peak_live_groups = max(self.peak_live_groups, len(self._live))
        return table

    def window(self, start: int, stop: int) -> pa.Table:
        """Rows start..stop-1 (start < stop) as one table of single-chunk columns; drops the row groups no
        later row needs."""
        keys, local = self.key[start:stop], self.local[start:stop]
        pieces, positions = [], []
        for k in np.unique(keys).tolist():
            sel = np.nonzero(keys == k)[0]
            pieces.append(self._group(k).take(pa.array(local[sel])))
            positions.append(sel)
            if self._last[k] < stop:  # no later row needs this row group
                del self._live[k]
        table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        order = np.argsort(np.concatenate(positions), kind="stable")
        return table.take(pa.array(order)).combine_chunks()

    def windows(self, rows: int | None = None) -> Iterator[tuple[int, pa.Table]]:
        """(first row, table) of every window of `rows` rows (default WINDOW_ROWS), in order."""
        rows = rows or WINDOW_ROWS
        for start in range(0, self.n, rows):
            yield start, self.window(start, min(self.n, start + rows))
