"""Text normalization and word boundaries shared by MinHash shingles and decontamination n-grams.

One normalization for both, so a person reads one rule: lowercase, then every run of characters that
are not alphanumeric (Python's str.isalnum: Unicode letters and numbers) becomes one space, then the
ends are trimmed; words are what the spaces separate. The scalar form (`words`) is the reference.
The batch form never builds the normalized string: it lowercases a whole batch in polars, then finds
the words as maximal runs of alphanumeric characters directly in the UTF-8 bytes with numpy (decoding
code points only when a batch has non-ASCII bytes, and classifying them with a table built from
str.isalnum, so both forms agree on every character by construction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import polars as pl
import pyarrow as pa

# Python's \w is alphanumeric characters plus "_", so [\W_] is "not alphanumeric".
_PY_NON_ALNUM_RUN = re.compile(r"[\W_]+")


def normalize_text(text: str) -> str:
    """Scalar reference normalization: lowercase, non-alphanumeric runs to one space, trimmed."""
    return _PY_NON_ALNUM_RUN.sub(" ", text.lower()).strip(" ")


def words(text: str) -> list[str]:
    """The normalized words of one text (empty list when it has none)."""
    norm = normalize_text(text)
    return norm.split(" ") if norm else []


@cache
def _alnum_table() -> np.ndarray:
    """is-alphanumeric for every code point (str.isalnum), built once per process (1.1 MB)."""
    # numpy's unicode dtype is UTF-32, so every code point is one "<U1" element; np.strings.isalnum
    # applies the same Unicode database as str.isalnum (a test compares them on every code point).
    return np.strings.isalnum(np.arange(0x110000, dtype=np.uint32).view("<U1"))


@dataclass(frozen=True)
class WordBatch:
    """Words of a batch of documents as byte ranges into one UTF-8 buffer (no Python string per word).

    data: the lowercased texts concatenated (uint8). starts/ends: byte range of each word, in document
    order. doc_offsets: words of document i are starts[doc_offsets[i]:doc_offsets[i + 1]].
    """

    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    doc_offsets: np.ndarray

    @property
    def n_docs(self) -> int:
        """Documents in the batch."""
        return len(self.doc_offsets) - 1

    def word_counts(self) -> np.ndarray:
        """Words per document (int64)."""
        return np.diff(self.doc_offsets)

    def word_text(self, index: int) -> str:
        """One word as a string (for reports, never in a hot loop)."""
        return bytes(self.data[self.starts[index] : self.ends[index]]).decode("utf-8")


_ASCII_ALNUM = np.array([chr(b).isalnum() if b < 0x80 else False for b in range(256)], dtype=bool)
_SEQ_LEN = np.array([1] * 0xC0 + [2] * 0x20 + [3] * 0x10 + [4] * 0x10, dtype=np.int64)  # by lead byte


def _alnum_bytes(data: np.ndarray) -> np.ndarray:
    """Per byte: does it belong to an alphanumeric character. ASCII by a 256-entry table; the few
    multi-byte characters are decoded (vectorized) and looked up in the code point table."""
    alnum = _ASCII_ALNUM[data]
    leads = np.flatnonzero(data >= 0xC0)
    if len(leads) == 0:
        return alnum
    padded = np.concatenate([data, np.zeros(3, dtype=np.uint8)])
    b0 = padded[leads].astype(np.uint32)
    b1, b2, b3 = ((padded[leads + i] & 0x3F).astype(np.uint32) for i in (1, 2, 3))
    n = _SEQ_LEN[b0]
    cp = np.where(
        n == 2,
        ((b0 & 0x1F) << 6) | b1,
        np.where(
            n == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2, ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3
        ),
    )
    before = np.cumsum(n) - n
    idx = np.repeat(leads - before, n) + np.arange(int(n.sum()), dtype=np.int64)
    alnum[idx] = np.repeat(_alnum_table()[cp], n)
    return alnum


def tokenize_batch(texts: pl.Series | pa.Array | pa.ChunkedArray | list[str | None]) -> WordBatch:
    """Lowercase a batch of texts and locate every word, vectorized over the whole batch."""
    if not isinstance(texts, pl.Series):
        if isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = pl.Series("text", texts)
        else:
            texts = pl.Series("text", texts, dtype=pl.String)
    lower = texts.fill_null("").str.to_lowercase().to_arrow()
    if isinstance(lower, pa.ChunkedArray):
        lower = lower.combine_chunks()
    lower = lower.cast(pa.large_string())
    n_docs = len(lower)
    offsets = np.frombuffer(lower.buffers()[1], dtype=np.int64)[lower.offset : lower.offset + n_docs + 1]
    base = int(offsets[0]) if n_docs else 0
    offsets = offsets - base if n_docs else np.zeros(1, dtype=np.int64)
    total = int(offsets[-1])
    data_buf = lower.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8)[base : base + total] if total else np.zeros(0, np.uint8)
    alnum = _alnum_bytes(data)
    # A word starts where an alphanumeric byte follows a non-alphanumeric one or a document start, and
    # ends where one is followed by a non-alphanumeric byte or a document end.
    doc_start, doc_end = offsets[:-1], offsets[1:]
    nonempty = doc_end > doc_start
    before = np.zeros(total, dtype=bool)
    before[1:] = alnum[:-1]
    before[doc_start[nonempty]] = False
    after = np.zeros(total, dtype=bool)
    after[:-1] = alnum[1:]
    after[doc_end[nonempty] - 1] = False
    starts = np.flatnonzero(alnum & ~before)
    ends = np.flatnonzero(alnum & ~after) + 1
    doc_offsets = np.searchsorted(starts, offsets).astype(np.int64)
    return WordBatch(
        data=data, starts=starts.astype(np.int64), ends=ends.astype(np.int64), doc_offsets=doc_offsets
    )
