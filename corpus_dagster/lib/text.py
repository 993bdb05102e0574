"""Text normalization and word boundaries shared by MinHash shingles and decontamination n-grams.

One normalization for both, so a person reads one rule: lowercase, then every run of characters that
are not alphanumeric (Python's str.isalnum: Unicode letters and numbers) becomes one space, then the
ends are trimmed; words are what the spaces separate. The scalar form (`words`) is the reference.
The batch form never builds the normalized string: it lowercases a whole batch in polars, then finds
the words as maximal runs of alphanumeric characters directly in the UTF-8 bytes, in one compiled pass
(`kernels.word_bounds`) that decodes code points as it goes and classifies them with a table built from
str.isalnum, so both forms agree on every character by construction. Where only the words' hashes are
wanted (MinHash, shingle sets), one compiled pass lowercases each code point by a table built from the
same polars lowercasing and hashes the words as it finds them (`shingle_hashing.text_word_hashes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

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
_NO_TABLE = np.zeros(0, dtype=bool)  # the code point table, when a batch is all ASCII
_ASCII_LOWER = np.array([ord(chr(b).lower()) if b < 0x80 else b for b in range(256)], dtype=np.uint8)
_SEPARATOR = 0x0A  # a line feed: not cased, so it leaves the lowercase of its neighbours alone
_CASED_END = 0x20000  # the end of the planes that hold code points with a lowercase
_CAPITAL_SIGMA = 0x03A3  # lowercases to ς at the end of a word and to σ elsewhere


@cache
def _lower_table() -> np.ndarray:
    """The code point `tokenize_batch`'s lowercasing (polars) gives each code point, or -1 where that is not
    one code point (İ becomes i and a combining dot) or depends on the neighbours (Σ): int32, 4.4 MB.

    Built by lowercasing the code points of planes 0 and 1 at once, one per line, in one polars call, so
    the table follows polars' Unicode version exactly as the batch lowercasing does.
    """
    # ASCII is lowercased by _ASCII_LOWER; from plane 2 on (ideographs, private use) no code point has a
    # lowercase of its own (a test checks every one of them against polars)
    cps = np.arange(0x80, _CASED_END, dtype=np.uint32)
    cps = cps[(cps < 0xD800) | (cps >= 0xE000)]  # surrogates are not characters; UTF-8 never holds them
    lines = np.empty(2 * len(cps), dtype=np.uint32)
    lines[0::2], lines[1::2] = cps, _SEPARATOR
    text = lines.tobytes().decode("utf-32-le")
    lowered = np.frombuffer(pl.Series([text]).str.to_lowercase().item().encode("utf-32-le"), dtype=np.uint32)
    ends = np.flatnonzero(lowered == _SEPARATOR)  # no lowercase of a non-ASCII code point is a line feed
    if len(ends) != len(cps):
        raise RuntimeError(f"lowercase table: {len(ends)} lines back for {len(cps)} code points")
    starts = np.concatenate([[0], ends[:-1] + 1])
    table = np.arange(0x110000, dtype=np.int32)
    table[:0x80] = _ASCII_LOWER[:0x80]
    table[cps] = np.where(ends - starts == 1, lowered[starts].astype(np.int32), -1)
    table[_CAPITAL_SIGMA] = -1
    return table


def texts_array(texts: pl.Series | pa.Array | pa.ChunkedArray | list[str | None]) -> pa.Array:
    """A batch of texts as one Arrow string array without nulls (a null reads as an empty text)."""
    if isinstance(texts, pl.Series):
        texts = texts.to_arrow()
    elif not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(texts, type=pa.large_string())
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if texts.type not in (pa.string(), pa.large_string()):
        texts = texts.cast(pa.large_string())
    return pc.fill_null(texts, "") if texts.null_count else texts


def lowercase(texts: pa.Array) -> pa.Array:
    """The batch lowercased by polars (Unicode's full lowercase, final sigma included), as large_string."""
    return pl.Series("text", texts).str.to_lowercase().to_arrow().cast(pa.large_string())


def tokenizer_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ASCII lowercase, ASCII alphanumeric, code point lowercase, code point alphanumeric): what the
    word kernels read to lowercase and classify characters."""
    return _ASCII_LOWER, _ASCII_ALNUM, _lower_table(), _alnum_table()


def tokenize_batch(texts: pl.Series | pa.Array | pa.ChunkedArray | list[str | None]) -> WordBatch:
    """Lowercase a batch of texts and locate every word, vectorized over the whole batch."""
    lower = lowercase(texts_array(texts))
    n_docs = len(lower)
    offsets = np.frombuffer(lower.buffers()[1], dtype=np.int64)[lower.offset : lower.offset + n_docs + 1]
    base = int(offsets[0]) if n_docs else 0
    offsets = offsets - base if n_docs else np.zeros(1, dtype=np.int64)
    total = int(offsets[-1])
    data_buf = lower.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8)[base : base + total] if total else np.zeros(0, np.uint8)
    from corpus_dagster.lib.kernels import word_bounds  # numba: imported where words are needed

    cp_alnum = _alnum_table() if total and int(data.max()) >= 0x80 else _NO_TABLE
    starts, ends, doc_offsets = word_bounds(data, offsets, _ASCII_ALNUM, cp_alnum)
    return WordBatch(data=data, starts=starts, ends=ends, doc_offsets=doc_offsets)


def byte_batches(texts: pa.Array, batch_bytes: int) -> list[tuple[int, int]]:
    """Cut a text column into [start, stop) row ranges of about batch_bytes UTF-8 bytes each (>= 1 row)."""
    n = len(texts)
    if n == 0:
        return []
    sizes = pc.fill_null(pc.binary_length(texts), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ends = np.cumsum(sizes)
    cuts, start = [], 0
    while start < n:
        limit = (ends[start - 1] if start else 0) + batch_bytes
        stop = max(int(np.searchsorted(ends, limit, side="right")), start + 1)
        cuts.append((start, min(stop, n)))
        start = stop
    return cuts
