"""Vectorized candidate location: polars (Rust regex) finds where PII may be, Python only validates there.

Each detector names one or more Rust-regex region patterns. `locate` runs every pattern over a whole batch
and returns each pattern's matches as numpy arrays of character offsets (spans.Matches), so the Python
detectors never scan text themselves: they run their own regexes inside small windows around the
regions (or anchored at region starts) and spend their time on validation. Most documents have no
region of any type and cost nothing in Python.

Offsets come from Rust too, one of three ways, same matches:
- markers (dense patterns: digit runs, keyword assignments): `str.replace_all` wraps every match in two
  marker bytes, and a numpy scan of the marked texts' UTF-8 buffer finds the markers' byte positions, from
  which the match's own byte offsets follow (each earlier match added two bytes). Texts that already hold
  a marker byte fall back to the next way;
- extract (sparse patterns: most texts have none, so copying every text for markers would be waste):
  `str.extract_all`, then one Python `str.find` per match from the previous match's end;
- anchor bytes (`Anchored`: `@`, `hhh:`, `+digit`): a numpy scan of the texts' UTF-8 buffer for the one
  byte every match holds, then numpy tests of the bytes around it.
Byte positions are read off the Arrow buffer, never from polars' `str.find_many`, whose offsets counted
bytes before polars 2 and count characters since.
One pass over the continuation bytes turns byte offsets into character offsets.

Every detection, single text or batch, goes through this path, so the batch and the single-text results
are the same by construction. Region patterns must not use look-around, anchors or word boundaries:
each match then depends only on its own text (the re-check relies on it), and `str.find` from the previous
match end recovers each match's offset exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from corpus_dagster.scrub.spans import Bytes, Matches, RegionFilter, Regions, Utf8

_OPEN, _CLOSE = "\x01", "\x02"


@dataclass(frozen=True)
class Anchored:
    """A region pattern whose every match holds one given ASCII byte at a known place: found from the
    positions of that byte (a scan of the UTF-8 buffer, no copy of the texts) and a test of the bytes around it.

    `pattern` stays the definition (the Rust regex the plan, the seal test and the tests read); `span`
    takes the bytes around each occurrence of `anchor` (Bytes with reach `reach`) and returns (is a match,
    start, end relative to the anchor byte), which must give exactly the regex's leftmost-first matches
    (tests/scrub/test_scrub_regions.py compares them).
    """

    pattern: str
    anchor: str
    reach: tuple[int, int]
    span: Callable[[Bytes], tuple[np.ndarray, np.ndarray, np.ndarray]]


class TextBatch:
    """A batch of texts as a polars Series for the Rust side, with Python strings fetched only where needed.

    Accepts a list of str or a polars String Series (what a Parquet or JSONL reader yields: no copy then).
    A list becomes a Series only when something scans it (a re-check pass carries its regions over instead).
    """

    def __init__(self, texts: Sequence[str] | pl.Series):
        self._list: list[str] | None = None
        self._find: list[str] | None = None
        self._series: pl.Series | None = None
        self._utf8: Utf8 | None = None
        self._fetched: dict[int, str] = {}
        if isinstance(texts, pl.Series):
            if texts.dtype != pl.String:
                raise TypeError(f"texts is a {texts.dtype} Series, expected String")
            if texts.null_count():
                first = texts.is_null().arg_true()[0]
                raise TypeError(f"texts[{first}] is None, expected str")
            self._series = texts
            return
        self._list = list(texts)
        for i, text in enumerate(self._list):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")

    @property
    def series(self) -> pl.Series:
        """The searchable texts as a polars String Series (lone surrogates masked: same offsets)."""
        if self._series is None:
            assert self._list is not None
            try:
                self._series = pl.Series("text", self._list, dtype=pl.String)
                self._find = self._list
            except UnicodeEncodeError:  # lone surrogates: locate on a copy with U+FFFD, same offsets
                self._find = [_mask_surrogates(t) for t in self._list]
                self._series = pl.Series("text", self._find, dtype=pl.String)
        return self._series

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else len(self.series)

    def originals(self, indices: list[int]) -> dict[int, str]:
        """The given texts as Python strings, as they were passed in."""
        if self._list is not None:
            return {i: self._list[i] for i in indices}
        return self.searchable(indices)

    def searchable(self, indices: list[int]) -> dict[int, str]:
        """The given texts as the Rust side sees them (lone surrogates masked); fetched once each."""
        if self._list is not None:
            self.series  # noqa: B018 - masks surrogates, if any, into _find
            assert self._find is not None
            return {i: self._find[i] for i in indices}
        missing = [i for i in indices if i not in self._fetched]
        if missing:
            self._fetched.update(zip(missing, self.series.gather(missing).to_list(), strict=True))
        return {i: self._fetched[i] for i in indices}

    def sizes(self) -> np.ndarray:
        """Each text's length in characters."""
        if self._list is not None:
            return np.fromiter(map(len, self._list), np.int64, len(self._list))
        return self.series.str.len_chars().to_numpy().astype(np.int64)

    def utf8(self) -> Utf8:
        """The searchable texts' UTF-8 bytes in one buffer (Arrow's large_string layout)."""
        if self._utf8 is None:
            self._utf8 = utf8_of(self.series)
        return self._utf8


def utf8_of(series: pl.Series) -> Utf8:
    """A String Series' UTF-8 bytes in one buffer (Arrow's large_string layout), without a copy when it has one chunk."""
    arr = series.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return Utf8(data, offsets)


def byte_hits(utf8: Utf8, needles: str) -> tuple[np.ndarray, np.ndarray]:
    """Where the given ASCII bytes occur, text by text: (byte positions within their text, in text order;
    offsets: text i's positions are values[offsets[i]:offsets[i + 1]])."""
    hits = utf8.positions_of(needles)
    offsets = np.searchsorted(hits, utf8.offsets).astype(np.int64)
    doc = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return hits - utf8.offsets[doc], offsets


def locate(batch: TextBatch, patterns: dict[str, str], filters: dict[str, RegionFilter] | None = None,
           anchored: dict[str, Anchored] | None = None, sparse: frozenset[str] = frozenset()) -> dict[str, Matches]:
    """Every match of each named pattern in the batch; `filters` set which ones the detectors look at.

    Three ways, one result: the patterns in `anchored` (same regex) are found from their anchor byte; the
    `sparse` ones (few matches in most text: marking them would copy every text for nothing) by
    `str.extract_all` and one `str.find` per match; the others by the markers.
    """
    if not patterns or not len(batch):
        return {name: Matches.empty() for name in patterns}
    filters = filters or {}
    series = batch.series
    fast = {name: a for name, a in (anchored or {}).items() if name in patterns and a.pattern == patterns[name]}
    marked = {name: p for name, p in patterns.items() if name not in fast and name not in sparse}
    bytewise = bool(fast or marked or set(filters) & set(patterns))
    utf8 = batch.utf8() if bytewise else Utf8(np.zeros(0, np.uint8), np.zeros(len(batch) + 1, np.int64))
    clean = ~series.str.contains(f"[{_OPEN}{_CLOSE}]").to_numpy() if marked else np.ones(len(batch), bool)
    extracted = [pl.col("text").str.extract_all(patterns[name]).alias(name) for name in patterns if name in sparse]
    found = pl.DataFrame({"text": series}).select(extracted) if extracted else None
    ascii_docs = (series.str.len_bytes() == series.str.len_chars()).to_numpy() if fast or marked else None
    wide_docs = np.flatnonzero(~ascii_docs) if ascii_docs is not None else None
    cont: np.ndarray | None = None
    out: dict[str, Matches] = {}
    for name, pattern in patterns.items():
        test = filters.get(name)
        if name in fast or name in marked:
            if name in fast:
                doc, start, end = _from_anchor(byte_hits(utf8, fast[name].anchor), fast[name], utf8)
            else:
                marks = utf8_of(series.str.replace_all(pattern, f"{_OPEN}${{0}}{_CLOSE}"))
                doc, start, end = _from_markers(byte_hits(marks, _OPEN + _CLOSE), clean)
            byte = utf8.offsets[doc] + start
            assert ascii_docs is not None and wide_docs is not None
            wide = ~ascii_docs[doc]
            if wide.any():
                if cont is None:  # the bytes from the first text that is not ASCII to the last
                    cont = utf8.continuation_bytes(int(utf8.offsets[wide_docs[0]]), int(utf8.offsets[wide_docs[-1] + 1]))
                start, end = _to_chars(doc, start, end, wide, cont, utf8)
            if name in marked and not clean.all():
                extra = _by_find(batch, _pieces(series, np.flatnonzero(~clean), pattern), name, utf8)
                doc, start, end, byte = _merge_found((doc, start, end, byte), extra)
        else:
            assert found is not None
            rows = found.get_column(name)
            doc, start, end, byte = _by_find(batch, _pieces_of(rows), name, utf8 if test is not None else None)
        look = test(Bytes(utf8, doc, byte)) if test is not None and len(doc) else None
        out[name] = Matches(doc, start, end, look)
    return out


_Found = tuple[np.ndarray, np.ndarray, np.ndarray]
_Pieces = tuple[list[int], list[str]]


def _pieces_of(lists: pl.Series, rows: np.ndarray | None = None) -> _Pieces:
    """(text index, matched string) of every match in an extract_all result (`rows`: the texts' indices)."""
    h = pl.DataFrame({"m": lists}).with_row_index("doc").explode("m").drop_nulls("m")
    docs = h.get_column("doc").to_numpy()
    return (docs if rows is None else rows[docs]).tolist(), h.get_column("m").to_list()


def _pieces(series: pl.Series, rows: np.ndarray, pattern: str) -> _Pieces:
    """(text index, matched string) of every match of `pattern` in the texts `rows`."""
    return _pieces_of(series.gather(rows.tolist()).str.extract_all(pattern), rows)


def _from_anchor(hits: tuple[np.ndarray, np.ndarray], anchored: Anchored, utf8: Utf8) -> _Found:
    """(text index, byte start, byte end) of every match of an anchored pattern, from its anchor bytes."""
    values, offsets = hits
    doc = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    ok, lo, hi = anchored.span(Bytes(utf8, doc, utf8.offsets[doc] + values, anchored.reach))
    return doc[ok], (values + lo)[ok], (values + hi)[ok]


def _from_markers(hits: tuple[np.ndarray, np.ndarray], clean: np.ndarray) -> _Found:
    """(text index, byte start, byte end) of every match, from the marker positions of each text (open,
    close, open, close ...); texts not `clean` (they held a marker byte) are left out."""
    values, offsets = hits
    counts = np.diff(offsets)
    if not clean.all():  # their own marker bytes would pair up wrongly
        values = values[np.repeat(clean, counts)]
        counts = np.where(clean, counts, 0)
        offsets = np.concatenate([[0], np.cumsum(counts)])
    pairs = counts // 2
    doc = np.repeat(np.arange(len(pairs), dtype=np.int64), pairs)
    k = np.arange(len(doc), dtype=np.int64) - (offsets[:-1] // 2)[doc]
    start = values[0::2] - 2 * k
    end = values[1::2] - 2 * k - 1
    if len(doc) and (end <= start).any():
        raise RuntimeError("a region pattern matched the empty string: patterns must consume text")
    return doc, start, end


def _by_find(batch: TextBatch, pieces: _Pieces, name: str, utf8: Utf8 | None) -> tuple[np.ndarray, ...]:
    """(text index, start, end, first byte or -1) of matches given as their strings in text order: each is
    found with str.find from the previous match's end (the patterns are context-free, so the first
    occurrence there is the match). First byte positions are counted only with `utf8` (a filter reads them)."""
    docs, strings = pieces
    texts = batch.searchable(sorted(set(docs)))
    starts: list[int] = []
    ends: list[int] = []
    bytes_at: list[int] = []
    pos = 0
    prev = -1
    size = 0
    for doc, piece in zip(docs, strings, strict=True):
        text = texts[doc]
        if doc != prev:
            pos, prev, size = 0, doc, 0
        i = text.find(piece, pos)
        if i < 0 or not piece:
            raise RuntimeError(f"region {piece!r} of {name} not found in order; patterns must be context-free")
        if utf8 is not None:
            size += len(text[pos:i].encode("utf-8"))
            bytes_at.append(int(utf8.offsets[doc]) + size)
            size += len(piece.encode("utf-8"))
        pos = i + len(piece)
        starts.append(i)
        ends.append(pos)
    d = np.asarray(docs, np.int64)
    byte = np.asarray(bytes_at, np.int64) if utf8 is not None else np.full(len(d), -1, np.int64)
    return d, np.asarray(starts, np.int64), np.asarray(ends, np.int64), byte


def _merge_found(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Both sets of (text index, start, end, byte) matches, sorted by text, then start."""
    doc, start, end, byte = (np.concatenate([x, y]) for x, y in zip(a, b, strict=True))
    order = np.lexsort((start, doc))
    return doc[order], start[order], end[order], byte[order]


def _to_chars(doc: np.ndarray, start: np.ndarray, end: np.ndarray, wide: np.ndarray, cont: np.ndarray,
              utf8: Utf8) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets turned into character offsets in the texts that are not ASCII (`wide`)."""
    base = utf8.offsets[doc[wide]]
    lo = np.searchsorted(cont, base)
    start, end = start.copy(), end.copy()
    start[wide] -= np.searchsorted(cont, base + start[wide]) - lo
    end[wide] -= np.searchsorted(cont, base + end[wide]) - lo
    return start, end


def candidate_regions(texts: Sequence[str] | pl.Series, patterns: dict[str, str]) -> dict[str, dict[int, Regions]]:
    """For each pattern name, {text index: match spans} for the texts where the pattern matches (by
    extract_all: a caller without a plan cannot know which patterns are dense)."""
    found = locate(TextBatch(texts), patterns, sparse=frozenset(patterns))
    return {name: m.by_doc() for name, m in found.items()}


def _mask_surrogates(text: str) -> str:
    """text with each lone surrogate replaced by U+FFFD: encodable, and aligned character for character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def windows(regions: Regions, before: int, after: int, size: int) -> Regions:
    """Regions widened by `before`/`after` characters (clipped to [0, size]), overlapping ones merged.

    Regions come sorted by start; called for every text with a region, so it keeps to local variables."""
    merged: Regions = []
    cur_lo = cur_hi = -1
    for start, end in regions:
        lo = start - before if start > before else 0
        hi = end + after
        if hi > size:
            hi = size
        if lo <= cur_hi:
            if hi > cur_hi:
                cur_hi = hi
        else:
            if cur_hi >= 0:
                merged.append((cur_lo, cur_hi))
            cur_lo, cur_hi = lo, hi
    if cur_hi >= 0:
        merged.append((cur_lo, cur_hi))
    return merged
