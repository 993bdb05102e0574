"""Protected evaluation sets: read them and index their token n-grams for decontamination.

A protected set is named in the config with a path (a file or a glob), a format (jsonl, parquet or
text: one document per non-empty line) and the field holding the text. Its n-grams are hashed with the
same normalization and shingle hash as MinHash (k = `ngram`) and kept sorted for vectorized lookup.
The normalized words are kept too, so a match is confirmed by comparing the actual words (a hash
collision can never drop a document). Protected sets are evaluation-sized: they are held in memory.
"""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.core.settings import DedupSettings
from corpus_dagster.lib.shingle_hashing import shingle_hashes, word_hashes
from corpus_dagster.lib.text import WordBatch, tokenize_batch

FORMATS = ("jsonl", "parquet", "text")


def protected_set_specs(cfg: DedupSettings) -> list[dict[str, Any]]:
    """The configured protected sets, each with its item defaults (the typed items have them); names must
    be unique."""
    specs = [item.to_dict() for item in cfg.protected_sets]
    names = [s["name"] for s in specs]
    if len(set(names)) != len(names):
        raise DedupInputError(f"dedup.protected_sets: set names must be unique, got {names}")
    return specs


def _infer_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".jsonl") or name.endswith(".json"):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "text"


def read_protected_texts(spec: dict[str, Any]) -> list[str]:
    """All texts of one protected set, files in sorted path order; errors name the set, file and line."""
    name, pattern, key = spec["name"], spec["path"], spec["field"]
    paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    if not paths or not all(Path(p).is_file() for p in paths):
        raise DedupInputError(f"protected set {name!r}: no file at {pattern!r}")
    texts: list[str] = []
    for path in paths:
        fmt = spec.get("format") or _infer_format(path)
        if fmt == "jsonl":
            with open(path, encoding="utf-8") as fh:
                for line_no, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DedupInputError(
                            f"protected set {name!r}: {path}, line {line_no}: not JSON: {exc}"
                        ) from exc
                    if not isinstance(record, dict) or not isinstance(record.get(key), str):
                        raise DedupInputError(
                            f"protected set {name!r}: {path}, line {line_no}: no string field {key!r}"
                        )
                    texts.append(record[key])
        elif fmt == "parquet":
            schema = pq.read_schema(path)
            if key not in schema.names:
                raise DedupInputError(f"protected set {name!r}: {path}: no column {key!r}")
            texts.extend(
                t for t in pq.read_table(path, columns=[key]).column(key).to_pylist() if t is not None
            )
        elif fmt == "text":
            with open(path, encoding="utf-8") as fh:
                texts.extend(line.rstrip("\n") for line in fh if line.strip())
        else:
            raise DedupInputError(f"protected set {name!r}: unknown format {fmt!r} (one of {FORMATS})")
    return texts


@dataclass
class ProtectedIndex:
    """Sorted unique n-gram hashes of all protected sets, each with the first set (config order) and the
    place it occurs (word position in that set's word buffer), for confirming matches by their words."""

    n: int
    names: list[str]
    hashes: np.ndarray  # uint64, sorted, unique
    set_index: np.ndarray  # int32: first set holding the n-gram
    word_pos: np.ndarray  # int64: position of the n-gram's first word in that set's WordBatch
    batches: list[WordBatch]
    _bitmap: np.ndarray | None = field(default=None, init=False, repr=False)
    _bitmap_bits: int = field(default=0, init=False, repr=False)

    def lookup(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(hit mask, slot in `hashes`) of each query hash; a bitmap on the top bits skips most searches."""
        if len(self.hashes) == 0:
            return np.zeros(len(queries), dtype=bool), np.zeros(len(queries), dtype=np.int64)
        bits = int(min(28, max(16, np.ceil(np.log2(len(self.hashes))) + 4)))
        shift = np.uint64(64 - bits)
        if self._bitmap is None or self._bitmap_bits != bits:
            self._bitmap = np.zeros(1 << bits, dtype=bool)
            self._bitmap[self.hashes >> shift] = True
            self._bitmap_bits = bits
        maybe = np.flatnonzero(self._bitmap[queries >> shift])
        slot = np.zeros(len(queries), dtype=np.int64)
        slot[maybe] = np.minimum(np.searchsorted(self.hashes, queries[maybe]), len(self.hashes) - 1)
        hit = np.zeros(len(queries), dtype=bool)
        hit[maybe] = self.hashes[slot[maybe]] == queries[maybe]
        return hit, slot

    def ngram_words(self, set_idx: int, pos: int) -> list[bytes]:
        """The n words of the protected n-gram starting at word `pos` of set `set_idx`."""
        wb = self.batches[set_idx]
        return [bytes(wb.data[wb.starts[i] : wb.ends[i]]) for i in range(pos, pos + self.n)]

    def save(self, path: Path) -> None:
        """Write the index to one .npz (for worker processes)."""
        arrays: dict[str, Any] = {
            "meta": np.frombuffer(json.dumps({"n": self.n, "names": self.names}).encode(), dtype=np.uint8),
            "hashes": self.hashes,
            "set_index": self.set_index,
            "word_pos": self.word_pos,
        }
        for i, wb in enumerate(self.batches):
            arrays[f"data{i}"], arrays[f"starts{i}"], arrays[f"ends{i}"] = wb.data, wb.starts, wb.ends
            arrays[f"offsets{i}"] = wb.doc_offsets
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: Path) -> ProtectedIndex:
        """Read an index written by save()."""
        with np.load(path) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            batches = [
                WordBatch(z[f"data{i}"], z[f"starts{i}"], z[f"ends{i}"], z[f"offsets{i}"])
                for i in range(len(meta["names"]))
            ]
            return cls(meta["n"], meta["names"], z["hashes"], z["set_index"], z["word_pos"], batches)


def build_protected_index(cfg: DedupSettings) -> ProtectedIndex:
    """Read and index every configured protected set (cfg = the `dedup` section)."""
    n = cfg.ngram
    specs = protected_set_specs(cfg)
    all_hashes, all_sets, all_pos, batches = [], [], [], []
    for set_idx, spec in enumerate(specs):
        wb = tokenize_batch(read_protected_texts(spec))
        hashes, offsets = shingle_hashes(word_hashes(wb), wb.doc_offsets, n)
        # Word position of each n-gram's first word: its rank within its document plus the document's first word.
        per_doc = np.diff(offsets)
        doc_of = np.repeat(np.arange(len(per_doc)), per_doc)
        pos = np.arange(len(hashes), dtype=np.int64) - offsets[doc_of] + wb.doc_offsets[doc_of]
        all_hashes.append(hashes)
        all_sets.append(np.full(len(hashes), set_idx, dtype=np.int32))
        all_pos.append(pos)
        batches.append(wb)
    if not specs:
        empty = np.zeros(0, np.uint64)
        return ProtectedIndex(n, [], empty, np.zeros(0, np.int32), np.zeros(0, np.int64), [])
    hashes = np.concatenate(all_hashes)
    # np.unique's return_index is the first occurrence: sets are concatenated in config order.
    uniq, first = np.unique(hashes, return_index=True)
    return ProtectedIndex(
        n,
        [s["name"] for s in specs],
        uniq,
        np.concatenate(all_sets)[first],
        np.concatenate(all_pos)[first],
        batches,
    )
