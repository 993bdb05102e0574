"""The Megatron indexed-dataset files, read back by a reader written from the format description alone.

The reader below follows Megatron-LM's documented `.idx` layout (magic, u64 version, u8 dtype code,
u64 sequence count, u64 document count, i32 sizes, i64 pointers, i64 document index) with `struct`
only; it shares no code with corpus_dagster.tokenize.indexed.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from corpus_dagster.tokenize.indexed import (
    SplitWriter,
    encode_index,
    read_index,
    read_sequence,
    token_dtype,
)

CODES = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 8: ("H", 2)}


def independent_read(prefix: Path) -> dict:
    """Parse `<prefix>.idx` and `<prefix>.bin` byte by byte."""
    idx = (prefix.parent / f"{prefix.name}.idx").read_bytes()
    binary = (prefix.parent / f"{prefix.name}.bin").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    pos = 9
    (version,) = struct.unpack("<Q", idx[pos : pos + 8])
    pos += 8
    code = idx[pos]
    pos += 1
    n_seq, n_doc = struct.unpack("<QQ", idx[pos : pos + 16])
    pos += 16
    sizes = list(struct.unpack(f"<{n_seq}i", idx[pos : pos + 4 * n_seq]))
    pos += 4 * n_seq
    pointers = list(struct.unpack(f"<{n_seq}q", idx[pos : pos + 8 * n_seq]))
    pos += 8 * n_seq
    doc_index = list(struct.unpack(f"<{n_doc}q", idx[pos : pos + 8 * n_doc]))
    pos += 8 * n_doc
    assert pos == len(idx), "trailing bytes after the document index"
    fmt, width = CODES[code]
    sequences = []
    for size, ptr in zip(sizes, pointers, strict=True):
        sequences.append(list(struct.unpack(f"<{size}{fmt}", binary[ptr : ptr + size * width])))
    return {
        "version": version,
        "code": code,
        "sizes": sizes,
        "pointers": pointers,
        "doc_index": doc_index,
        "sequences": sequences,
        "bin_len": len(binary),
        "width": width,
    }


def _docs(rng: np.random.Generator, n: int, high: int) -> list[np.ndarray]:
    return [rng.integers(0, high, size=int(rng.integers(1, 40))) for _ in range(n)]


def _write(folder: Path, split: str, docs: list[np.ndarray], dtype, max_bytes: int, batch: int | None = None):
    w = SplitWriter(folder, split, np.dtype(dtype), max_bytes)
    step = batch or len(docs) or 1
    for i in range(0, len(docs), step):
        chunk = docs[i : i + step]
        w.add(np.concatenate(chunk) if chunk else np.zeros(0), np.array([len(d) for d in chunk]))
    return w.close()


@pytest.mark.parametrize(("dtype", "code", "high"), [(np.uint16, 8, 65499), (np.int32, 4, 200_000)])
def test_written_files_read_back_with_an_independent_reader(tmp_path, dtype, code, high):
    docs = _docs(np.random.default_rng(0), 50, high)
    parts = _write(tmp_path, "train", docs, dtype, 1 << 30)
    assert [p.prefix for p in parts] == ["train"]
    got = independent_read(tmp_path / "train")
    assert got["version"] == 1 and got["code"] == code
    assert got["sizes"] == [len(d) for d in docs]
    assert got["doc_index"] == list(range(len(docs) + 1))
    assert got["pointers"][0] == 0
    assert got["pointers"] == [sum(len(d) for d in docs[:i]) * got["width"] for i in range(len(docs))]
    assert got["sequences"] == [d.tolist() for d in docs]
    assert got["bin_len"] == sum(len(d) for d in docs) * got["width"]
    assert parts[0].n_docs == 50 and parts[0].n_tokens == sum(len(d) for d in docs)


def test_module_reader_agrees_with_independent_reader(tmp_path):
    docs = _docs(np.random.default_rng(1), 20, 1000)
    _write(tmp_path, "val", docs, np.uint16, 1 << 20)
    index = read_index(tmp_path / "val.idx")
    assert index.dtype == np.uint16
    for i, d in enumerate(docs):
        assert read_sequence(tmp_path / "val.bin", index, i).tolist() == d.tolist()


def test_split_by_max_file_bytes_never_cuts_a_document(tmp_path):
    docs = _docs(np.random.default_rng(2), 60, 1000)
    max_bytes = 100  # uint16: 50 tokens per file
    parts = _write(tmp_path, "train", docs, np.uint16, max_bytes)
    assert len(parts) > 3
    assert [p.prefix for p in parts] == [f"train-{i:05d}-of-{len(parts):05d}" for i in range(len(parts))]
    read_back = []
    for p in parts:
        got = independent_read(tmp_path / p.prefix)
        assert got["bin_len"] <= max_bytes
        read_back += got["sequences"]
    assert read_back == [d.tolist() for d in docs]
    assert not (tmp_path / "train.bin").exists()


def test_oversized_document_gets_a_file_of_its_own(tmp_path):
    docs = [np.arange(5), np.arange(100), np.arange(3)]
    parts = _write(tmp_path, "train", docs, np.uint16, 20)  # 10 tokens per file
    assert [p.n_docs for p in parts] == [1, 1, 1]
    assert independent_read(tmp_path / parts[1].prefix)["sequences"] == [list(range(100))]


def test_file_cuts_do_not_depend_on_batching(tmp_path):
    docs = _docs(np.random.default_rng(3), 40, 500)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    whole = _write(tmp_path / "a", "train", docs, np.uint16, 160)
    one_by_one = _write(tmp_path / "b", "train", docs, np.uint16, 160, batch=1)
    assert len(whole) > 1
    assert [(p.prefix, p.bin_sha256, p.idx_sha256) for p in whole] == [
        (p.prefix, p.bin_sha256, p.idx_sha256) for p in one_by_one
    ]


def test_empty_split_is_a_valid_empty_dataset(tmp_path):
    parts = SplitWriter(tmp_path, "val", np.dtype(np.int32), 1 << 20).close()
    assert [(p.prefix, p.n_docs, p.n_tokens) for p in parts] == [("val", 0, 0)]
    got = independent_read(tmp_path / "val")
    assert got["sizes"] == [] and got["doc_index"] == [0] and got["bin_len"] == 0


def test_dtype_follows_megatron_vocabulary_rule():
    assert token_dtype(50257) == np.uint16
    assert token_dtype(65499) == np.uint16
    assert token_dtype(65500) == np.int32
    assert token_dtype(100277) == np.int32


def test_encode_index_layout_is_exact():
    idx = encode_index(np.array([3, 1]), np.dtype(np.int32))
    assert idx == (
        b"MMIDIDX\x00\x00"
        + struct.pack("<QBQQ", 1, 4, 2, 3)
        + struct.pack("<2i", 3, 1)
        + struct.pack("<2q", 0, 12)
        + struct.pack("<3q", 0, 1, 2)
    )


def test_read_index_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.idx"
    bad.write_bytes(b"NOTMAGIC!" + bytes(30))
    with pytest.raises(ValueError, match="bad magic"):
        read_index(bad)
    good = encode_index(np.array([2, 2]), np.dtype(np.uint16))
    bad.write_bytes(good[:-8])
    with pytest.raises(ValueError, match="header implies"):
        read_index(bad)
    bad.write_bytes(good[:9] + struct.pack("<Q", 2) + good[17:])
    with pytest.raises(ValueError, match="version 2"):
        read_index(bad)


def test_add_rejects_inconsistent_lengths(tmp_path):
    w = SplitWriter(tmp_path, "train", np.dtype(np.uint16), 100)
    with pytest.raises(ValueError, match="sum of lengths"):
        w.add(np.arange(5), np.array([2, 2]))


def test_megatron_core_reader_reads_our_files(tmp_path):
    """Megatron's own IndexedDataset, where megatron-core (it needs torch) is installed."""
    mod = pytest.importorskip(
        "megatron.core.datasets.indexed_dataset",
        reason="megatron-core needs torch; PyPI only has CUDA builds of torch here (see docs/tokens.md)",
    )
    docs = _docs(np.random.default_rng(4), 10, 60000)
    _write(tmp_path, "train", docs, np.uint16, 1 << 20)
    ds = mod.IndexedDataset(str(tmp_path / "train"))
    assert len(ds) == len(docs)
    for i, d in enumerate(docs):
        assert ds[i].tolist() == d.tolist()
