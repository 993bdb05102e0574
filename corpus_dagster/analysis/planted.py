"""Planted corpora for tests and benchmarks: varied text with near duplicates at measured Jaccard.

Words come from a Zipf-distributed vocabulary of pronounceable pseudo-words with punctuation and case,
so the normalization has work to do. A near duplicate is its original with some words replaced; the
planted pair's Jaccard is then computed exactly (reference sets of shingles), so a test or benchmark
knows every pair it must find. Exact twins, short documents and normalization-only twins are planted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

_SYL = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "en", "ar", "is", "ul", "pe", "do", "gri", "sha", "tho"]


def _vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    n_syl = rng.integers(1, 4, size)
    words = {"".join(rng.choice(_SYL, k)) for k in n_syl}
    return np.array(sorted(words))


def reference_shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    """Plain-Python shingles: lowercase, non-alphanumeric runs to one space, k-word windows."""
    words = re.sub(r"[\W_]+", " ", text.lower()).split()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def jaccard(a: set, b: set) -> float:
    """Exact Jaccard of two sets (0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0


@dataclass
class Planted:
    """The corpus table (id, text, source_id) and the planted near pairs (index pairs with their Jaccard)."""

    table: pa.Table
    near_pairs: list[tuple[int, int, float]]
    exact_pairs: list[tuple[int, int]]


def planted_corpus(n_docs: int, seed: int = 0, near_share: float = 0.1, exact_share: float = 0.03,
                   short_share: float = 0.02, sources: int = 3, words: tuple[int, int] = (60, 400)) -> Planted:
    """n_docs documents with ids `src{s}:{i:08d}`; about near_share of them are edited copies of another."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng, 6000)
    zipf = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    zipf /= zipf.sum()
    texts: list[str] = []
    toks: list[np.ndarray] = []
    near: list[tuple[int, int, float]] = []
    exact: list[tuple[int, int]] = []
    for i in range(n_docs):
        r = rng.random()
        if i > 10 and r < near_share:
            j = int(rng.integers(0, i))
            base = toks[j]
            if len(base) < 20:
                base = rng.choice(len(vocab), int(rng.integers(*words)), p=zipf)
                toks.append(base)
                texts.append(_render(vocab, base, rng))
                continue
            edits = int(rng.integers(1, max(2, len(base) // 25)))
            w = base.copy()
            w[rng.choice(len(w), edits, replace=False)] = rng.choice(len(vocab), edits, p=zipf)
            toks.append(w)
            texts.append(_render(vocab, w, rng))
            near.append((j, i, -1.0))
        elif i > 10 and r < near_share + exact_share:
            j = int(rng.integers(0, i))
            toks.append(toks[j])
            texts.append(texts[j])
            exact.append((j, i))
        elif r < near_share + exact_share + short_share:
            w = rng.choice(len(vocab), int(rng.integers(1, 5)), p=zipf)
            toks.append(w)
            texts.append(_render(vocab, w, rng))
        else:
            w = rng.choice(len(vocab), int(rng.integers(*words)), p=zipf)
            toks.append(w)
            texts.append(_render(vocab, w, rng))
    near = [(a, b, jaccard(reference_shingles(texts[a]), reference_shingles(texts[b]))) for a, b, _ in near]
    ids = [f"src{i % sources}:{i:08d}" for i in range(n_docs)]
    table = pa.table({"id": ids, "text": texts, "source_id": [f"src{i % sources}" for i in range(n_docs)]})
    return Planted(table, near, exact)


def _render(vocab: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> str:
    """Words joined into sentences: capitals and punctuation, which normalization removes again."""
    out, start = [], True
    for k, word in enumerate(vocab[w].tolist()):
        out.append(word.capitalize() if start else word)
        start = False
        if k % 13 == 12:
            out[-1] += "."
            start = True
        elif k % 7 == 6:
            out[-1] += ","
    return " ".join(out) + "."
