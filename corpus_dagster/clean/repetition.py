"""Gopher repetition filter (Rae et al. 2021, table A1), vectorized over a batch.

Rules in this fixed order (a null threshold switches that rule off), each over the whole text length:
repetition_dup_para, repetition_dup_para_chars, repetition_dup_line, repetition_dup_line_chars,
repetition_top_2gram .. repetition_top_4gram, repetition_dup_5gram .. repetition_dup_10gram.
Paragraphs and lines are split by polars; word n-grams are 64-bit polynomial hashes of token hashes;
equal items are grouped with one numpy sort per level (groups.py). Only the greedy scan of datatrove's duplicate n-gram count (which skips
n words after each duplicate) is a Python loop, and it visits only positions whose n-gram did occur
earlier in the same document.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import cached_property

import numpy as np
import polars as pl

from corpus_dagster.clean.batch import DocBatch, Lines
from corpus_dagster.clean.declare import Filter, Measures, rule
from corpus_dagster.clean.groups import Groups
from corpus_dagster.clean.verdict import Verdict, ratio
from corpus_dagster.clean.words import flatten
from corpus_dagster.core.settings import CleanRepetitionSettings

TOP_NGRAMS = (2, 3, 4)
DUP_NGRAMS = (5, 6, 7, 8, 9, 10)
_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the rolling n-gram hash
_SEP = "\x00"  # never in repaired text (the repair step removes NUL)


def duplicate_stats(lists: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: number of items, items equal to an earlier item, and those items' characters."""
    lines = Lines(lists)
    dup = ~lines.first_in_doc(np.ones(len(lines.doc), dtype=bool))
    return np.diff(lines.offsets), lines.per_doc(dup), lines.per_doc(np.where(dup, lines.length, 0))


class _Ngrams:
    """Token hashes, lengths and positions of a batch, with rolling n-gram hashes."""

    def __init__(self, batch: DocBatch):
        flat, self.doc, self.offsets = flatten(batch.words)
        self.tok = flat.hash().to_numpy().astype(np.uint64)
        self.cum = np.zeros(len(self.tok) + 1, dtype=np.int64)
        np.cumsum(flat.str.len_chars().to_numpy(), out=self.cum[1:])
        self.pos_in_doc = np.arange(len(self.tok), dtype=np.int64) - self.offsets[self.doc]
        self.doc_len = np.diff(self.offsets)
        self.n = 1
        self.hash = self.tok

    def advance(self) -> None:
        """Move from n-gram to (n+1)-gram hashes (index i = the n-gram starting at token i)."""
        self.n += 1
        with np.errstate(over="ignore"):
            self.hash = self.hash[:-1] * _MULT + self.tok[self.n - 1:]

    def chars(self, pos: np.ndarray, sep: int) -> np.ndarray:
        """Characters of the n-grams starting at pos, words joined by `sep` characters."""
        return self.cum[pos + self.n] - self.cum[pos] + sep * (self.n - 1)


def _top_ngram_chars(ng: _Ngrams, pos: np.ndarray, groups: Groups, n_docs: int) -> np.ndarray:
    """Per document: count x characters of its most frequent n-gram, ties to the one seen first, as
    Counter.most_common(1) picks it. `pos` holds every occurrence of every repeated n-gram."""
    n = ng.n
    out = np.zeros(n_docs, dtype=np.float64)
    long_enough = np.flatnonzero(ng.doc_len >= n)  # no repeat: the first n-gram, count 1
    out[long_enough] = ng.chars(ng.offsets[long_enough], sep=1)
    starts, sizes = groups.runs()
    rep = sizes >= 2
    if rep.any():
        first = pos[starts[rep]]
        d = ng.doc[first]
        low = np.int64(0xFFFFFFFF)
        score = (sizes[rep].astype(np.int64) << 32) | (low - (first - ng.offsets[d]))
        best = np.zeros(n_docs, dtype=np.int64)
        np.maximum.at(best, d, score)
        has = np.flatnonzero(best)
        first_best = ng.offsets[has] + (low - (best[has] & low))
        out[has] = (best[has] >> 32) * ng.chars(first_best, sep=1)
    return out


def _greedy_dup_chars(cands: list[int], prev: list[int], n: int, chars: list[int]) -> int:
    """datatrove's scan: a position whose n-gram was seen at a visited position counts, then n are skipped.

    Only candidate positions (n-gram seen anywhere earlier) can count; an earlier occurrence only
    counts as seen if the scan visited it, i.e. it does not lie inside a stretch skipped after a hit.
    """
    hits: list[int] = []
    total, next_free = 0, -1
    for i, c in zip(cands, chars, strict=True):
        if i < next_free:
            continue
        p = prev[i]
        while p >= 0:
            j = bisect_right(hits, p) - 1
            if j < 0 or p == hits[j] or p >= hits[j] + n:
                break  # p was visited
            p = prev[p]
        if p >= 0:
            total += c
            hits.append(i)
            next_free = i + n
    return total


def _dup_ngram_chars(ng: _Ngrams, pos: np.ndarray, groups: Groups, n_docs: int) -> np.ndarray:
    """Per document: characters of n-grams that repeat one seen earlier, counted by datatrove's scan.
    `pos` holds every occurrence of every repeated n-gram."""
    out = np.zeros(n_docs, dtype=np.float64)
    prev_in_pos = groups.previous()
    has_prev = prev_in_pos >= 0
    if not has_prev.any():
        return out
    prev = np.full(len(ng.hash), -1, dtype=np.int64)
    prev[pos[has_prev]] = pos[prev_in_pos[has_prev]]
    prev_list = prev.tolist()
    cands = pos[has_prev]
    cand_doc = ng.doc[cands]
    cand_chars = ng.chars(cands, sep=0)
    bounds = np.flatnonzero(np.diff(cand_doc)) + 1
    for group, chars in zip(np.split(cands, bounds), np.split(cand_chars, bounds), strict=True):
        out[ng.doc[group[0]]] = _greedy_dup_chars(group.tolist(), prev_list, ng.n, chars.tolist())
    return out


class RepetitionMeasures(Measures):
    """Shares of repeated paragraphs, lines and word n-grams. The n-gram measures are asked for in increasing
    n: each level looks only at positions whose shorter n-gram repeats in a document still open, over the
    documents the paragraph and line rules kept (every occurrence of a repeated n-gram is among them, so the
    work shrinks quickly as n grows)."""

    @cached_property
    def _paras(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self.batch.series
        return duplicate_stats(s.str.strip_chars().str.replace_all(r"\n{2,}", _SEP).str.split(_SEP))

    @cached_property
    def _lines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return duplicate_stats(self.batch.series.str.replace_all(r"\n+", "\n").str.split("\n"))

    @property
    def dup_para(self) -> np.ndarray:
        n_items, n_dup, _chars = self._paras
        return ratio(n_dup, n_items)

    @property
    def dup_para_chars(self) -> np.ndarray:
        return ratio(self._paras[2], self.batch.n_chars)

    @property
    def dup_line(self) -> np.ndarray:
        n_items, n_dup, _chars = self._lines
        return ratio(n_dup, n_items)

    @property
    def dup_line_chars(self) -> np.ndarray:
        return ratio(self._lines[2], self.batch.n_chars)

    def __getitem__(self, name: str) -> np.ndarray:
        kind, _, n = name.partition(":")
        return self._ngram_share(kind, int(n)) if n else getattr(self, name)

    @cached_property
    def _ngram_state(self) -> _NgramScan:
        return _NgramScan(self.batch, self.verdict.open_index())

    def _ngram_share(self, kind: str, n: int) -> np.ndarray:
        """Share of characters of the most frequent (`top`) or repeating (`dup`) word n-grams, per document
        (0 for the documents dropped before the n-gram rules)."""
        scan = self._ngram_state
        scan.reach(n, self.verdict.open[scan.index])
        sub = scan.batch
        chars = (_top_ngram_chars if kind == "top" else _dup_ngram_chars)(scan.ng, scan.pos, scan.groups, len(sub))
        out = np.zeros(len(self.batch), dtype=np.float64)
        out[scan.index] = ratio(chars, sub.n_chars)
        return out


class _NgramScan:
    """The level-by-level n-gram scan over the documents open when it starts."""

    def __init__(self, batch: DocBatch, index: np.ndarray):
        self.index = index
        self.batch = batch.take(index)
        self.ng = _Ngrams(self.batch)
        self.pos = np.arange(len(self.ng.tok), dtype=np.int64)
        self.groups: Groups | None = None

    def reach(self, n: int, still_open: np.ndarray) -> None:
        """Advance to level n; `still_open` says which of the scan's documents no rule has dropped yet."""
        ng = self.ng
        assert n >= ng.n, "n-gram measures are asked for in increasing n"
        while ng.n < n:
            if self.groups is not None:
                self.pos = self.pos[self.groups.sizes() >= 2]
            ng.advance()
            pos = self.pos[self.pos < len(ng.hash)]
            d = ng.doc[pos]
            self.pos = pos[(ng.pos_in_doc[pos] <= ng.doc_len[d] - ng.n) & still_open[d]]
            self.groups = Groups(ng.hash[self.pos], ng.doc[self.pos])


REPETITION = Filter("repetition", (
    rule("repetition_dup_para", "share of paragraphs repeating an earlier one", (">", "max_dup_para_ratio", "dup_para")),
    rule("repetition_dup_para_chars", "share of characters in paragraphs repeating an earlier one",
         (">", "max_dup_para_char_ratio", "dup_para_chars")),
    rule("repetition_dup_line", "share of lines repeating an earlier one", (">", "max_dup_line_ratio", "dup_line")),
    rule("repetition_dup_line_chars", "share of characters in lines repeating an earlier one",
         (">", "max_dup_line_char_ratio", "dup_line_chars")),
    *(rule(f"repetition_top_{n}gram", f"share of characters covered by the most frequent word {n}-gram",
           (">", f"max_top_{n}gram_char_ratio", f"top:{n}")) for n in TOP_NGRAMS),
    *(rule(f"repetition_dup_{n}gram", f"share of characters in word {n}-grams repeating an earlier one",
           (">", f"max_dup_{n}gram_char_ratio", f"dup:{n}")) for n in DUP_NGRAMS),
), measures=RepetitionMeasures, base=True, enabled=True)


def gopher_repetition(batch: DocBatch, cfg: CleanRepetitionSettings) -> Verdict:
    """First failing repetition rule per document (reason None when all pass)."""
    return REPETITION.verdict(batch, cfg)
