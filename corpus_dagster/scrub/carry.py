"""The region matches of texts after a pass replaced spans in them, carried over from before the pass.

A re-check pass needs the regions of every changed text; scanning those texts again cost a third of the
scrub on changelogs (an address per entry: most texts change). With sealed region patterns (no match can
include a placeholder's `<` or `>`, no anchors, word boundaries or look-arounds), a placeholder splits the
new text into pieces that are scanned exactly as the same text was before, as long as no old match ran
across the edge of a replaced span: a match depends only on its own text, the scan enters each piece at
rest (nothing matches across the `<`...`>` before it) and leaves it at rest. So the new matches are the old
ones that lie outside the replaced spans, shifted by what the placeholders added or removed before them;
a text where an old match straddled a span edge (a digit run that went on past a replaced number: 56 of
the 1,023 re-checked texts of the bench corpus, 8 more for IPv6) is scanned again, whole, for that pattern.

A byte filter's verdict (spans.Matches.look) is carried too where the bytes it read are unchanged; a match
within FILTER_BEFORE / FILTER_AFTER characters of replaced text is simply looked at (a filter only ever
spares work).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from corpus_dagster.scrub.prescreen import TextBatch
from corpus_dagster.scrub.recheck import Replaced, members
from corpus_dagster.scrub.spans import FILTER_AFTER, FILTER_BEFORE, Matches, merge


def carry(located: dict[str, Matches], replaced: Replaced, again: list[int], batch: TextBatch,
          locate: Callable[[TextBatch, set[str]], dict[str, Matches]]) -> dict[str, Matches]:
    """The matches of every pattern in `batch`: the new texts of the changed texts `again` (sorted), in
    that order. `located`: the matches before the pass; `replaced`: what it replaced; `locate`: how the
    plan scans a batch for some of its patterns (for the texts scanned again)."""
    olds = np.asarray(again, np.int64)
    if not len(olds):
        return {name: Matches.empty() for name in located}
    before = np.concatenate([[0], np.cumsum(replaced.grow)])  # total growth of the spans before each span
    kept: dict[str, Matches] = {}
    dirty: dict[str, np.ndarray] = {}
    for name, m in located.items():
        sel = members(m.doc, olds)
        doc, s, e = m.doc[sel], m.start[sel], m.end[sel]
        a = replaced.around(doc, s, e)
        starts_in = a.has_k & (a.s < replaced.end[a.k])
        inside = starts_in & (a.e <= replaced.end[a.k])
        straddles = (starts_in & ~inside) | (~starts_in & a.has_next & (a.e > replaced.start[a.n]))
        dirty[name] = np.unique(doc[straddles])
        keep = ~inside & ~members(doc, dirty[name])
        doc, s, e, s_key = doc[keep], s[keep], e[keep], a.s[keep]
        first = np.searchsorted(replaced.start, s_key - s)  # the text's first span: its key base is s_key - s
        shift = before[np.searchsorted(replaced.end, s_key, side="right")] - before[first]
        look = None
        if m.look is not None:
            k, n = a.k[keep], a.n[keep]
            near = a.has_k[keep] & (replaced.end[k] > s_key - FILTER_BEFORE)
            near |= a.has_next[keep] & (replaced.start[n] < s_key + FILTER_AFTER)
            look = m.look[sel][keep] | near
        kept[name] = Matches(np.searchsorted(olds, doc), s + shift, e + shift, look)
    return _rescan(kept, dirty, olds, batch, locate)


def _rescan(kept: dict[str, Matches], dirty: dict[str, np.ndarray], olds: np.ndarray, batch: TextBatch,
            locate: Callable[[TextBatch, set[str]], dict[str, Matches]]) -> dict[str, Matches]:
    """`kept` plus the matches of the texts that are dirty for a pattern, found by scanning them again."""
    redo = np.unique(np.concatenate([np.zeros(0, np.int64), *dirty.values()]))
    if not len(redo):
        return kept
    new_index = np.searchsorted(olds, redo)
    texts = batch.originals(new_index.tolist())
    again = locate(TextBatch([texts[i] for i in new_index.tolist()]), {n for n, d in dirty.items() if len(d)})
    out = dict(kept)
    for name, m in again.items():
        mine = np.isin(redo[m.doc], dirty[name])
        found = m.take(mine)
        found = Matches(new_index[found.doc], found.start, found.end, found.look)
        out[name] = merge([kept[name], found])
    return out
