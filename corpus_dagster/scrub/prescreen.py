"""Vectorized candidate location: polars (Rust regex) finds where PII may be, Python only validates there.

Each detector names one or more Rust-regex region patterns. `candidate_regions` runs every pattern over a
whole batch with `str.extract_all` and turns the matches back into character offsets, so the Python
detectors never scan text themselves: they run their own regexes inside small windows around the
regions (or anchored at region starts) and spend their time on validation. Most documents have no
region of any type and cost nothing in Python.

Every detection, single text or batch, goes through this path, so the batch and the single-text results
are the same by construction. Region patterns must not use look-around, anchors or word boundaries:
that keeps `str.find` from the previous match end an exact way to recover each match's offset.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

Regions = list[tuple[int, int]]


class TextBatch:
    """A batch of texts as a polars Series for the Rust side, with Python strings fetched only where needed.

    Accepts a list of str or a polars String Series (what a Parquet or JSONL reader yields: no copy then).
    """

    def __init__(self, texts: Sequence[str] | pl.Series):
        self._list: list[str] | None = None
        self._find: list[str] | None = None
        if isinstance(texts, pl.Series):
            if texts.dtype != pl.String:
                raise TypeError(f"texts is a {texts.dtype} Series, expected String")
            if texts.null_count():
                first = texts.is_null().arg_true()[0]
                raise TypeError(f"texts[{first}] is None, expected str")
            self.series = texts
            return
        self._list = list(texts)
        for i, text in enumerate(self._list):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
        try:
            self.series = pl.Series("text", self._list, dtype=pl.String)
            self._find = self._list
        except UnicodeEncodeError:  # lone surrogates: locate on a copy with U+FFFD, same offsets
            self._find = [_mask_surrogates(t) for t in self._list]
            self.series = pl.Series("text", self._find, dtype=pl.String)

    def __len__(self) -> int:
        return len(self.series)

    def strings(self, indices: list[int]) -> tuple[dict[int, str], dict[int, str]]:
        """(original, searchable) Python strings of the given texts; they differ only around surrogates."""
        if self._list is not None and self._find is not None:
            return {i: self._list[i] for i in indices}, {i: self._find[i] for i in indices}
        values = self.series.gather(indices).to_list() if indices else []
        got = dict(zip(indices, values, strict=True))
        return got, got


def locate(batch: TextBatch, patterns: dict[str, str]) -> tuple[dict[str, dict[int, Regions]], dict[int, str]]:
    """For each pattern name, {text index: match spans} where the pattern matches, and the Python strings
    of every text that has a region (the only texts the detectors ever look at)."""
    out: dict[str, dict[int, Regions]] = {name: {} for name in patterns}
    if not patterns or not len(batch):
        return out, {}
    found = pl.DataFrame({"text": batch.series}).select(
        [pl.col("text").str.extract_all(pattern).alias(name) for name, pattern in patterns.items()]
    )
    hits = {}
    for name in patterns:
        # one row per match with its text index; texts without a match drop out before Python sees them
        h = found.select(pl.col(name)).with_row_index("doc").explode(name).drop_nulls(name)
        hits[name] = (h.get_column("doc").to_list(), h.get_column(name).to_list())
    needed = sorted({d for docs, _ in hits.values() for d in docs})
    originals, searchable = batch.strings(needed)
    for name, (docs, pieces) in hits.items():
        per_doc = out[name]
        spans: Regions = []
        pos = 0
        for k, (doc, piece) in enumerate(zip(docs, pieces, strict=True)):
            if k == 0 or doc != docs[k - 1]:
                pos = 0
                spans = per_doc[doc] = []
            i = searchable[doc].find(piece, pos)
            if i < 0 or not piece:  # a context-dependent or empty pattern: a programming error
                raise RuntimeError(f"region {piece!r} of {name} not found in order; patterns must be context-free")
            pos = i + len(piece)
            spans.append((i, pos))
    return out, originals


def candidate_regions(texts: Sequence[str] | pl.Series, patterns: dict[str, str]) -> dict[str, dict[int, Regions]]:
    """For each pattern name, {text index: match spans} for the texts where the pattern matches."""
    return locate(TextBatch(texts), patterns)[0]


def _mask_surrogates(text: str) -> str:
    """text with each lone surrogate replaced by U+FFFD: encodable, and aligned character for character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def windows(regions: Regions, before: int, after: int, size: int) -> Regions:
    """Regions widened by `before`/`after` characters (clipped to [0, size]), overlapping ones merged."""
    merged: Regions = []
    for start, end in regions:
        lo, hi = max(0, start - before), min(size, end + after)
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged
