"""Reference text rules, written from the specification and nothing else.

Normalization: lowercase; every run of characters that are not letters or digits becomes one space;
shingles are the sets of 5 consecutive words. Document ids: the `id` column when the file has one, else
`<file stem>_<row>` with the row zero-padded to max(5, digits of the last row).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_NON_ALNUM = re.compile(r"[\W_]+")  # not str.isalnum(): the regex's [^\W_] is the same set of characters
# Per code point of Latin-1 (bytes.translate) and of the BMP (a lookup table): itself when str.isalnum(), else a space.
_LATIN1 = bytes(c if chr(c).isalnum() else 32 for c in range(256))


@cache
def _bmp_alnum() -> np.ndarray:
    return np.array([chr(c).isalnum() for c in range(0x10000)])


def normalized_words(text: str) -> list[str]:
    """Words of the normalized text: lowercase, then every character that is not a letter or digit
    (str.isalnum) is a separator.

    The same rule three ways, the first that applies: bytes.translate when the lowercased text is Latin-1,
    a table lookup over its UTF-16 code units when it is all in the BMP, else the regex (each several times
    faster than the next)."""
    low = text.lower()
    try:
        return low.encode("latin-1").translate(_LATIN1).decode("latin-1").split()
    except UnicodeEncodeError:
        pass
    units = np.frombuffer(low.encode("utf-16-le", "surrogatepass"), np.uint16)
    if not ((units >= 0xD800) & (units < 0xE000)).any():  # no surrogates: one unit per character
        units = np.where(_bmp_alnum()[units], units, np.uint16(32))
        return units.tobytes().decode("utf-16-le").split()
    return _NON_ALNUM.sub(" ", low).split()


def shingle_set(text: str, k: int = 5) -> set[tuple[str, ...]]:
    """The set of k-word shingles (empty for fewer than k words)."""
    w = normalized_words(text)
    return {tuple(w[i : i + k]) for i in range(len(w) - k + 1)}


def jaccard(a: set, b: set) -> float:
    """|A & B| / |A | B|; 0.0 when both are empty."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the shingle hash


def shingle_hashes(text: str, k: int = 5) -> np.ndarray:
    """The k-word shingle set of `text` as sorted unique 64-bit hashes (a polynomial of the words' Python
    hashes): the same set as shingle_set, several times cheaper to build and intersect. Two different
    shingles of one pair collide with probability about |A|*|B| / 2**64."""
    words = normalized_words(text)
    n = len(words) - k + 1
    if n <= 0:
        return np.empty(0, np.uint64)
    h = np.fromiter(map(hash, words), dtype=np.int64, count=len(words)).view(np.uint64)
    acc = np.zeros(n, np.uint64)
    for j in range(k):
        acc = acc * _MIX + h[j:j + n]  # wraps modulo 2**64
    acc.sort()
    keep = np.empty(n, bool)  # np.unique, several times faster on uint64
    keep[0] = True
    np.not_equal(acc[1:], acc[:-1], out=keep[1:])
    return acc[keep]


def shingles_of(texts: dict[str, str], k: int = 5) -> Callable[[str], np.ndarray]:
    """shingle_hashes of a document by id, each built once (a pair check meets a document many times)."""
    built: dict[str, np.ndarray] = {}

    def shingles(doc_id: str) -> np.ndarray:
        if doc_id not in built:
            built[doc_id] = shingle_hashes(texts[doc_id], k)
        return built[doc_id]

    return shingles


def counts_hashes(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """(|A & B|, |A | B|) of two shingle_hashes arrays: the integers an exact threshold test needs."""
    if a.size < b.size:
        a, b = b, a
    if not b.size:
        inter = 0
    else:  # both sorted and unique: look each element of the smaller one up in the larger one
        at = np.searchsorted(a, b)
        at[at == a.size] = 0
        inter = int(np.count_nonzero(a[at] == b))
    return inter, int(a.size + b.size - inter)


def jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    """jaccard() of two shingle_hashes arrays."""
    inter, union = counts_hashes(a, b)
    return inter / union if union else 0.0


def corpus_files(corpus_dir: str | Path, exclude: str | Path | None = None) -> list[Path]:
    """Sorted *.parquet files under a folder, skipping hidden/underscore names and the `exclude` folder."""
    root = Path(corpus_dir)
    ex = Path(exclude).resolve() if exclude else None
    out = []
    for p in sorted(root.rglob("*.parquet")):
        if any(part.startswith((".", "_")) for part in p.relative_to(root).parts):
            continue
        if ex is not None and ex in p.resolve().parents:
            continue
        out.append(p)
    return out


def _batches(files: Iterable[str | Path]) -> Iterator[tuple[list[str], pa.Array]]:
    """(ids, text column) of each record batch, file by file."""
    for path in files:
        pf = pq.ParquetFile(path)
        has_id = "id" in pf.schema_arrow.names
        rows = pf.metadata.num_rows
        width = max(5, len(str(max(rows - 1, 0))))
        row = 0
        for batch in pf.iter_batches(batch_size=8192, columns=["id", "text"] if has_id else ["text"], use_threads=False):
            n = batch.num_rows
            ids = ([str(i) for i in batch.column("id").to_pylist()] if has_id
                   else [f"{Path(path).stem}_{row + i:0{width}d}" for i in range(n)])
            yield ids, batch.column("text")
            row += n


def iter_documents(files: Iterable[str | Path], wanted: set[str] | None = None,
                   utf8: bool = False) -> Iterator[tuple[str, str | bytes]]:
    """(id, text) of every document, file by file, or of the `wanted` ids only (only their texts are
    converted to Python); with `utf8`, the text's UTF-8 bytes. A null text is empty."""
    pick = pa.array(sorted(wanted), pa.string()) if wanted is not None else None
    for ids, texts in _batches(files):
        if pick is not None:
            keep = pc.is_in(pa.array(ids, pa.string()), value_set=pick)
            ids = [i for i, k in zip(ids, keep.to_pylist(), strict=True) if k]
            texts = texts.filter(keep)
        if utf8:
            texts = texts.cast(pa.large_binary() if pa.types.is_large_string(texts.type) else pa.binary())
        empty = b"" if utf8 else ""
        for doc_id, text in zip(ids, texts.to_pylist(), strict=True):
            yield doc_id, empty if text is None else text


def text_sizes(files: Iterable[str | Path]) -> dict[str, int]:
    """UTF-8 bytes of every document's text by id (what hashing it costs)."""
    sizes: dict[str, int] = {}
    for ids, texts in _batches(files):
        sizes.update(zip(ids, pc.fill_null(pc.binary_length(texts), 0).to_pylist(), strict=True))
    return sizes


def texts_of(files: Iterable[str | Path], wanted: set[str]) -> dict[str, str]:
    """Texts of the wanted ids only."""
    return dict(iter_documents(files, wanted))
