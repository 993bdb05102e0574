"""Megatron-LM indexed dataset files (`.bin` + `.idx`, the `MMIDIDX` format): write, split by size, read.

Layout of an `.idx` file (all integers little-endian), as Megatron's `IndexedDataset` reads it:
  9 bytes  magic `MMIDIDX\\x00\\x00`
  u64      version, always 1
  u8       dtype code of the tokens in the `.bin` (8 = uint16, 4 = int32, ...)
  u64      sequence count S
  u64      document count D (= S + 1 here: one sequence per document)
  i32[S]   sequence lengths in tokens
  i64[S]   sequence pointers: byte offset of each sequence in the `.bin`
  i64[D]   document index: sequence index where each document starts, plus a final S
The `.bin` file is the tokens of every sequence back to back, in the dtype, no header.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_BYTES = len(MAGIC) + 8 + 1 + 8 + 8

# Megatron's DType enum: the numeric code stored in the .idx for each token dtype.
DTYPE_CODES: dict[str, int] = {
    "uint8": 1,
    "int8": 2,
    "int16": 3,
    "int32": 4,
    "int64": 5,
    "float64": 6,
    "float32": 7,
    "uint16": 8,
}
CODE_DTYPES = {code: np.dtype(name) for name, code in DTYPE_CODES.items()}

# Megatron's `DType.optimal_dtype`: uint16 below this vocabulary size, else int32. Using its rule keeps our
# files identical to what Megatron's own preprocess_data.py writes for the same tokenizer.
UINT16_VOCAB_LIMIT = 65500


def token_dtype(vocab_size: int) -> np.dtype:
    """The token dtype for a vocabulary: uint16 when it fits Megatron's limit, else int32."""
    return np.dtype(np.uint16) if vocab_size < UINT16_VOCAB_LIMIT else np.dtype(np.int32)


def encode_index(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The `.idx` bytes for sequences of `lengths` tokens (one document each) stored as `dtype`."""
    dtype = np.dtype(dtype)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = int(lengths.size)
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    header = MAGIC + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[dtype.name])
    header += struct.pack("<Q", n) + struct.pack("<Q", n + 1)
    return b"".join(
        [
            header,
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            np.arange(n + 1, dtype="<i8").tobytes(),
        ]
    )


@dataclass(frozen=True)
class PartInfo:
    """One written `.bin`/`.idx` pair."""

    prefix: str
    n_docs: int
    n_tokens: int
    bin_bytes: int
    bin_sha256: str
    idx_bytes: int
    idx_sha256: str


class _PartWriter:
    """Appends token arrays to one `.bin` (hashing as it goes) and writes the `.idx` on close."""

    def __init__(self, folder: Path, prefix: str, dtype: np.dtype):
        self.folder = folder
        self.prefix = prefix
        self.dtype = dtype
        self.fh = open(folder / f"{prefix}.bin", "wb")
        self.sha = hashlib.sha256()
        self.lengths: list[np.ndarray] = []
        self.n_tokens = 0

    @property
    def n_bytes(self) -> int:
        return self.n_tokens * self.dtype.itemsize

    def write(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        data = np.ascontiguousarray(tokens, dtype=self.dtype.newbyteorder("<"))
        view = memoryview(data).cast("B")
        self.fh.write(view)
        self.sha.update(view)
        self.lengths.append(np.asarray(lengths, dtype=np.int64))
        self.n_tokens += int(data.size)

    def close(self) -> PartInfo:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        idx = encode_index(lengths, self.dtype)
        with open(self.folder / f"{self.prefix}.idx", "wb") as fh:
            fh.write(idx)
            fh.flush()
            os.fsync(fh.fileno())
        return PartInfo(
            prefix=self.prefix,
            n_docs=int(lengths.size),
            n_tokens=self.n_tokens,
            bin_bytes=self.n_bytes,
            bin_sha256=self.sha.hexdigest(),
            idx_bytes=len(idx),
            idx_sha256=hashlib.sha256(idx).hexdigest(),
        )


class SplitWriter:
    """Writes one split as one or more Megatron datasets, each `.bin` at most `max_file_bytes`.

    A document is never cut: a file is closed when the next document would overflow it, and a document
    larger than the limit gets a file of its own. The cut points depend only on the sequence of document
    lengths, so any batching of `add` calls gives the same files. Parts are written as
    `<split>.part<iiiii>` and renamed on `close`: `<split>.bin/.idx` when there is one part, else
    `<split>-<iiiii>-of-<nnnnn>.bin/.idx`.
    """

    def __init__(self, folder: Path, split: str, dtype: np.dtype, max_file_bytes: int):
        if max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be positive, got {max_file_bytes}")
        self.folder = Path(folder)
        self.split = split
        self.dtype = np.dtype(dtype)
        self.max_file_bytes = max_file_bytes
        self.parts: list[PartInfo] = []
        self.current: _PartWriter | None = None

    def _roll(self) -> _PartWriter:
        if self.current is not None:
            self.parts.append(self.current.close())
        self.current = _PartWriter(self.folder, f"{self.split}.part{len(self.parts):05d}", self.dtype)
        return self.current

    def add(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents: `tokens` is their sequences back to back, `lengths` their sizes in tokens."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != int(np.asarray(tokens).size):
            raise ValueError("sum of lengths does not match the number of tokens")
        item = self.dtype.itemsize
        ends = np.cumsum(lengths)  # token end of each document within this batch
        doc, tok = 0, 0
        n = int(lengths.size)
        while doc < n:
            part = self.current if self.current is not None else self._roll()
            room = self.max_file_bytes - part.n_bytes
            # documents from `doc` on whose cumulative bytes still fit in this part
            fit = int(np.searchsorted((ends[doc:] - tok) * item, room, side="right"))
            if fit == 0:
                if part.n_tokens > 0:
                    self._roll()
                    continue
                fit = 1  # a document larger than the limit: alone in its own part
            end_tok = int(ends[doc + fit - 1])
            part.write(tokens[tok:end_tok], lengths[doc : doc + fit])
            doc += fit
            tok = end_tok
            if doc < n:
                self._roll()

    def close(self) -> list[PartInfo]:
        """Close the last part (an empty split gets one empty dataset) and give parts their final names."""
        if self.current is None:
            self._roll()
        assert self.current is not None
        self.parts.append(self.current.close())
        self.current = None
        total = len(self.parts)
        final = []
        for i, part in enumerate(self.parts):
            name = self.split if total == 1 else f"{self.split}-{i:05d}-of-{total:05d}"
            for ext in (".bin", ".idx"):
                os.replace(self.folder / f"{part.prefix}{ext}", self.folder / f"{name}{ext}")
            final.append(
                PartInfo(
                    name,
                    part.n_docs,
                    part.n_tokens,
                    part.bin_bytes,
                    part.bin_sha256,
                    part.idx_bytes,
                    part.idx_sha256,
                )
            )
        self.parts = final
        return final


@dataclass(frozen=True)
class IndexData:
    """The parsed contents of an `.idx` file."""

    dtype: np.dtype
    lengths: np.ndarray
    pointers: np.ndarray
    doc_indices: np.ndarray


def read_index(path: str | Path) -> IndexData:
    """Parse an `.idx` file; raises ValueError naming the file when it is not a version-1 MMIDIDX index."""
    data = Path(path).read_bytes()
    if len(data) < HEADER_BYTES or data[: len(MAGIC)] != MAGIC:
        raise ValueError(f"{path}: not a Megatron MMIDIDX index (bad magic)")
    off = len(MAGIC)
    (version,) = struct.unpack_from("<Q", data, off)
    (code,) = struct.unpack_from("<B", data, off + 8)
    n_seq, n_doc = struct.unpack_from("<QQ", data, off + 9)
    if version != VERSION:
        raise ValueError(f"{path}: unsupported index version {version}")
    if code not in CODE_DTYPES:
        raise ValueError(f"{path}: unknown dtype code {code}")
    expected = HEADER_BYTES + n_seq * 4 + n_seq * 8 + n_doc * 8
    if len(data) != expected:
        raise ValueError(f"{path}: index is {len(data)} bytes, its header implies {expected}")
    off = HEADER_BYTES
    lengths = np.frombuffer(data, dtype="<i4", count=n_seq, offset=off)
    pointers = np.frombuffer(data, dtype="<i8", count=n_seq, offset=off + 4 * n_seq)
    doc_indices = np.frombuffer(data, dtype="<i8", count=n_doc, offset=off + 12 * n_seq)
    return IndexData(CODE_DTYPES[code], lengths, pointers, doc_indices)


def read_sequence(bin_path: str | Path, index: IndexData, i: int) -> np.ndarray:
    """Tokens of sequence `i` of a `.bin` file, read through a memory map."""
    mm = np.memmap(bin_path, dtype=np.uint8, mode="r")
    start = int(index.pointers[i])
    stop = start + int(index.lengths[i]) * index.dtype.itemsize
    return np.frombuffer(mm[start:stop].tobytes(), dtype=index.dtype.newbyteorder("<")).copy()
