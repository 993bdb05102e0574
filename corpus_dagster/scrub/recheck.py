"""Which regions a re-check pass looks at, and which changed texts need one, for a whole batch at once.

A pass after the first re-checks only the texts the previous pass changed, and in them only the regions
within RECHECK_RADIUS of a placeholder it inserted: text farther away did not change, and every
detector's context (cue words, obfuscated addresses, candidate windows) reaches less far than this.
Changelogs hold an address per entry, so most of their regions are near one: the tests here run on the
numpy arrays of spans.Matches, with one key per (text, offset) so that a single searchsorted serves every
text of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus_dagster.scrub.spans import Matches

RECHECK_RADIUS = 512

# (text index, offset) as one sortable integer: texts are far shorter than this, and it leaves room for
# offsets RECHECK_RADIUS before 0 or past a text's end without reaching a neighbouring text's keys.
_STRIDE = 1 << 40

Placed = list[tuple[str, int]]
Span = tuple[str, int, int]


def mark_keys(placed: list[Placed]) -> np.ndarray:
    """Sorted keys of every placeholder position; `placed[i]` is text i's (type, position) list, sorted."""
    return np.asarray([i * _STRIDE + pos for i, p in enumerate(placed) for _, pos in p], np.int64)


def near_mask(m: Matches, marks: np.ndarray) -> np.ndarray:
    """The matches that a placeholder position of their text (`marks`, from mark_keys) lies within
    RECHECK_RADIUS of: a mark in [start - RECHECK_RADIUS, end + RECHECK_RADIUS]."""
    if not len(m) or not len(marks):
        return np.zeros(len(m), bool)
    base = m.doc * _STRIDE
    i = np.searchsorted(marks, base + m.start - RECHECK_RADIUS, side="left")
    found = i < len(marks)
    return found & (marks[np.minimum(i, len(marks) - 1)] <= base + m.end + RECHECK_RADIUS)


def members(doc: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Whether each text index in `doc` is one of the sorted `docs`."""
    if not len(docs):
        return np.zeros(len(doc), bool)
    i = np.minimum(np.searchsorted(docs, doc), len(docs) - 1)
    return docs[i] == doc


@dataclass(frozen=True)
class Replaced:
    """The spans a pass replaced, as sorted (text, offset) keys, with what each placeholder added."""

    docs: np.ndarray  # the changed texts, sorted
    start: np.ndarray
    end: np.ndarray
    owner: np.ndarray  # each span's text
    grow: np.ndarray  # placeholder length minus span length

    @classmethod
    def of(cls, changed: dict[int, list[Span]], widths: dict[str, int]) -> Replaced:
        """From {text index: replaced (type, start, end), sorted} and each type's placeholder length."""
        docs = sorted(changed)
        flat = [span for d in docs for span in changed[d]]
        owner = np.repeat(np.asarray(docs, np.int64), [len(changed[d]) for d in docs])
        start = np.asarray([s for _, s, _ in flat], np.int64) + owner * _STRIDE
        end = np.asarray([e for _, _, e in flat], np.int64) + owner * _STRIDE
        grow = np.asarray([widths[t] - (e - s) for t, s, e in flat], np.int64)
        return cls(np.asarray(docs, np.int64), start, end, owner, grow)

    def around(self, doc: np.ndarray, start: np.ndarray, end: np.ndarray) -> Around:
        """Where matches (in changed texts) lie relative to the replaced spans of their text."""
        s, e = doc * _STRIDE + start, doc * _STRIDE + end
        k = np.searchsorted(self.start, s, side="right") - 1  # the last span starting at or before
        kc = np.maximum(k, 0)
        has_k = (k >= 0) & (self.owner[kc] == doc)
        n = np.minimum(k + 1, len(self.start) - 1)
        has_next = (k + 1 < len(self.start)) & (self.owner[n] == doc)
        return Around(s, e, kc, has_k, n, has_next)


@dataclass(frozen=True)
class Around:
    """Match keys `s`, `e`; `k` the last replaced span of the text starting at or before the match (where
    `has_k`), `n` the next one (where `has_next`)."""

    s: np.ndarray
    e: np.ndarray
    k: np.ndarray
    has_k: np.ndarray
    n: np.ndarray
    has_next: np.ndarray


def needs_recheck(located: dict[str, Matches], replaced: Replaced) -> set[int]:
    """The changed texts (`replaced`) that a re-check pass could find anything in (a sealed plan only).

    The re-check runs the detectors on the regions of the new text within RECHECK_RADIUS of a new
    placeholder, and on nothing else. With sealed region patterns (no match can include a placeholder's
    `<` or `>`, and none uses anchors, word boundaries or look-arounds), each piece of text between
    placeholders is scanned exactly as before, so the new text's regions are the old ones shifted, except
    where an old region ran into replaced text. The re-check therefore has a region to look at only if an
    old region (of any pattern, filtered or not), not wholly inside a replaced span, overlaps a replaced
    span or lies within RECHECK_RADIUS characters of one (the gap between them is the same in old and new
    offsets; checked here in old offsets, which can only over-report).
    """
    hit: set[int] = set()
    for m in located.values():
        sel = members(m.doc, replaced.docs)
        if not sel.any():
            continue
        doc = m.doc[sel]
        a = replaced.around(doc, m.start[sel], m.end[sel])
        inside = a.has_k & (a.e <= replaced.end[a.k])
        after_prev = a.has_k & ~inside & (a.s < replaced.end[a.k] + RECHECK_RADIUS)
        before_next = ~inside & a.has_next & (a.e >= replaced.start[a.n] - RECHECK_RADIUS)
        hit.update(doc[after_prev | before_next].tolist())
    return hit
