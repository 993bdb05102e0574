"""Decontamination: find documents that share a token n-gram with a protected evaluation set.

Vectorized over a batch: every n-gram hash of every document is looked up in the sorted protected
hashes at once (searchsorted); only documents with a hit are then looked at one by one, to confirm the
match word for word and report the first matching n-gram in document order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from corpus_dagster.dedup.protected import ProtectedIndex
from corpus_dagster.lib.shingle_hashing import shingle_hashes, word_hashes
from corpus_dagster.lib.text import tokenize_batch


@dataclass(frozen=True)
class Contamination:
    """One contaminated document of a batch: its row, the protected set's name and the first shared n-gram."""

    row: int
    set_name: str
    ngram: str

    @property
    def detail(self) -> str:
        """The text recorded in dropped.parquet's `detail` column."""
        return f"{self.set_name}: {self.ngram}"


def find_contaminated(texts: pa.Array | list[str | None], index: ProtectedIndex) -> list[Contamination]:
    """Documents of the batch that share an n-gram of index.n words with a protected set, in row order."""
    if len(index.hashes) == 0:
        return []
    wb = tokenize_batch(texts)
    hashes, offsets = shingle_hashes(word_hashes(wb), wb.doc_offsets, index.n)
    if len(hashes) == 0:
        return []
    hit, slot = index.lookup(hashes)
    hit_positions = np.flatnonzero(hit)
    if len(hit_positions) == 0:
        return []
    doc_of_hit = np.searchsorted(offsets, hit_positions, side="right") - 1
    found: list[Contamination] = []
    docs, first_hit = np.unique(doc_of_hit, return_index=True)  # hits are in position order
    bounds = np.append(first_hit, len(hit_positions))
    for i, doc in enumerate(docs):
        for ngram_idx in hit_positions[bounds[i] : bounds[i + 1]]:
            first_word = int(ngram_idx - offsets[doc] + wb.doc_offsets[doc])
            mine = [
                bytes(wb.data[wb.starts[i] : wb.ends[i]]) for i in range(first_word, first_word + index.n)
            ]
            k = slot[ngram_idx]
            set_idx = int(index.set_index[k])
            if mine == index.ngram_words(set_idx, int(index.word_pos[k])):
                found.append(Contamination(int(doc), index.names[set_idx], b" ".join(mine).decode("utf-8")))
                break
    return found
