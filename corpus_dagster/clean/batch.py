"""A batch of documents with lazily computed, shared views (polars series, word lists, lines)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from corpus_dagster.clean.groups import Groups
from corpus_dagster.clean.words import flatten, split_word_lists


class DocBatch:
    """Texts plus cached derived columns, so rule groups share one tokenization per document."""

    def __init__(self, texts: list[str], series: pl.Series | None = None, words: pl.Series | None = None):
        self.texts = texts
        self._series = series
        self._words = words
        self._word_lists: pa.LargeListArray | None = None
        self._n_chars: np.ndarray | None = None
        self._lines: Lines | None = None

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def series(self) -> pl.Series:
        """The texts as a polars string series."""
        if self._series is None:
            self._series = pl.Series("text", self.texts, dtype=pl.String)
        return self._series

    @property
    def word_lists(self) -> pa.LargeListArray:
        """Word tokens per document as an Arrow list array; computed once per batch (also for `words`)."""
        if self._word_lists is None:
            self._word_lists = self._words.to_arrow() if self._words is not None else split_word_lists(self.series)
        return self._word_lists

    @property
    def words(self) -> pl.Series:
        """Word tokens per document (list[str] series); computed once per batch."""
        if self._words is None:
            self._words = pl.Series("words", self.word_lists)
        return self._words

    @property
    def n_chars(self) -> np.ndarray:
        """Unicode code points per document."""
        if self._n_chars is None:
            self._n_chars = self.series.str.len_chars().to_numpy().astype(np.int64)
        return self._n_chars

    @property
    def lines(self) -> Lines:
        """Lines split on `\\n` (blank ones included), flattened with their document index."""
        if self._lines is None:
            self._lines = Lines(self.series.str.split("\n"))
        return self._lines

    def take(self, index: np.ndarray) -> DocBatch:
        """The sub-batch at `index`, reusing whatever was computed already."""
        idx = pl.Series(index.astype(np.int64))
        sub = DocBatch([self.texts[i] for i in index.tolist()], self.series.gather(idx),
                       self._words.gather(idx) if self._words is not None else None)
        if self._words is None and self._word_lists is not None:  # only the kept documents' tokens are copied
            sub._word_lists = self._word_lists.take(pa.array(index.astype(np.int64)))
        if self._n_chars is not None:
            sub._n_chars = self._n_chars[index]
        return sub


class Lines:
    """Flat view of every document's lines: text, length, blank flag, document index."""

    def __init__(self, lists: pl.Series):
        self.flat, self.doc, self.offsets = flatten(lists)
        self.n_docs = len(self.offsets) - 1
        self.length = self.flat.str.len_chars().to_numpy().astype(np.int64)
        self._blank: np.ndarray | None = None
        self._words: np.ndarray | None = None

    @property
    def words(self) -> np.ndarray:
        """Whitespace-separated words per line."""
        if self._words is None:
            self._words = self.flat.str.count_matches(r"\S+").to_numpy()
        return self._words

    @property
    def blank(self) -> np.ndarray:
        """True for lines that are empty or only whitespace."""
        if self._blank is None:
            self._blank = ~self.flat.str.contains(r"\S").to_numpy()
        return self._blank

    def per_doc(self, values: np.ndarray) -> np.ndarray:
        """Sum a per-line array (bool or number) per document."""
        return np.bincount(self.doc, weights=values, minlength=self.n_docs)

    def _groups(self, select: np.ndarray) -> tuple[np.ndarray, Groups]:
        pos = np.flatnonzero(select)
        return pos, Groups(self.flat.gather(pos).hash().to_numpy(), self.doc[pos])

    def first_in_doc(self, select: np.ndarray) -> np.ndarray:
        """True where a selected line's text is its first occurrence among its document's selected lines."""
        out = np.zeros(len(select), dtype=bool)
        pos, groups = self._groups(select)
        out[pos] = groups.first()
        return out

    def duplicated_in_doc(self, select: np.ndarray) -> np.ndarray:
        """True where a selected line's text occurs more than once among its document's selected lines."""
        out = np.zeros(len(select), dtype=bool)
        pos, groups = self._groups(select)
        out[pos] = groups.sizes() > 1
        return out
