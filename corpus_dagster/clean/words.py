"""Word tokenization shared by the Gopher, repetition and FineWeb rules, for a whole batch at once.

Chunks (whitespace-separated) that no tokenizer rule touches, most of any text (words, numbers, times,
hashes, identifiers), are one token; chunks of one prefix character, letters or digits and one suffix
character are split by a polars regex; neither reaches Python. Every other distinct chunk goes through
`tokenize_chunk` (spaCy's English rules, cached per process) once per batch, and numpy puts all tokens
back in text order.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import regex

from corpus_dagster.clean.word_tokens import (
    INFIX_ANYWHERE,
    MULTI_CURRENCY,
    PREFIX_CHARS,
    SPECIAL_CASES,
    SUFFIX_CHARS,
    SUFFIX_UNITS,
    class_chars,
    tokenize_chunk,
)

# Chunks no rule of `tokenize_chunk` touches, one token as they are: a first character no prefix rule
# peels (`+` and `.` have rules of their own), a last one no suffix rule peels, no apostrophe anywhere
# (contractions, 's) and no place an infix could split (INFIX_ANYWHERE). Special cases, `US$`-style
# currencies and a unit right after the last digit (`5km`) are excluded in `_inert`. Most text is such chunks.
_INERT = (rf"^[^'’{class_chars(PREFIX_CHARS | {'+', '.'})}\p{{So}}]"
          rf"(?:[^'’]*[^'’{class_chars(SUFFIX_CHARS | {'+', '.'})}\p{{So}}])?$")
_CURRENCY_START = "^(?:" + "|".join(regex.escape(c) for c in MULTI_CURRENCY) + ")"
_UNIT_AFTER_DIGIT = r"[0-9]([^0-9]+)$"  # the run after the last ASCII digit: a unit there is split off
_SPECIAL_PLAIN = sorted(k for k in SPECIAL_CASES if regex.fullmatch(r"[\p{L}\p{M}]+", k))
# Chunks split without Python: one prefix character, letters or digits, one suffix character (a `.` only
# after a lower-case letter or a digit, where spaCy splits it); special cases excluded.
_CLASS = class_chars(PREFIX_CHARS - {"+"})
_SUFFIX_CLASS = class_chars(SUFFIX_CHARS)
_SHAPED = (rf"^([{_CLASS}]?)([\p{{L}}\p{{M}}]*[\p{{Ll}}\p{{Lo}}]|[\p{{L}}\p{{M}}]+|\p{{N}}+)"
           rf"((?:[{_SUFFIX_CLASS}]|(?:\.))?)$")

# Kept for the symbol/letter statistics of the Gopher rules.
SYMBOL_ONLY_PATTERN = r"^[\p{P}\p{S}]+$"
LETTER_PATTERN = r"\p{L}"


def split_words(texts: pl.Series) -> pl.Series:
    """Tokens of every text as a list column (one list per document, in order)."""
    chunks, doc, offsets = flatten(texts.str.extract_all(r"\S+"))
    n = len(chunks)
    plain = _inert(chunks)
    rest = np.flatnonzero(~plain)
    parts = chunks.gather(rest).str.extract_groups(_SHAPED).struct.unnest()
    pre, core, suf = parts["1"], parts["2"], parts["3"]
    dot_ok = (suf != ".") | core.str.contains(r"[\p{Ll}\p{Lo}\p{N}]$")
    specials = list(SPECIAL_CASES)
    shaped_mask = (core.is_not_null() & dot_ok & ~core.is_in(_SPECIAL_PLAIN) & ~(core + suf).is_in(specials)
                   & ~(pre + core).is_in(specials) & ~chunks.gather(rest).str.ends_with("8)")
                   ).fill_null(False).to_numpy()
    shaped, other = rest[shaped_mask], rest[~shaped_mask]
    pre, core, suf = pre.filter(pl.Series(shaped_mask)), core.filter(pl.Series(shaped_mask)), suf.filter(
        pl.Series(shaped_mask))
    has_pre = (pre.str.len_bytes() > 0).to_numpy()
    has_suf = (suf.str.len_bytes() > 0).to_numpy()

    per_chunk = np.ones(n, dtype=np.int64)
    per_chunk[shaped] += has_pre.astype(np.int64) + has_suf
    mapped = None
    if len(other):
        distinct = chunks.gather(other).unique()
        split = pa.array([tokenize_chunk(c) for c in distinct.to_list()], type=pa.large_list(pa.large_string()))
        table = pl.DataFrame({"c": distinct, "t": pl.Series(split)})
        mapped = pl.DataFrame({"c": chunks.gather(other)}).join(table, on="c", how="left",
                                                                maintain_order="left")["t"]
        per_chunk[other] = mapped.list.len().to_numpy()
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_chunk, out=starts[1:])
    # final token position -> index into [chunks, prefixes, cores, suffixes, other chunks' tokens]
    source = np.empty(starts[-1], dtype=np.int64)
    plain_idx = np.flatnonzero(plain)
    source[starts[plain_idx]] = plain_idx
    m = len(shaped)
    base = starts[shaped]
    source[base[has_pre]] = n + np.flatnonzero(has_pre)
    source[base + has_pre] = n + m + np.arange(m)
    source[(base + has_pre + 1)[has_suf]] = n + 2 * m + np.flatnonzero(has_suf)
    pieces = [chunks, pre, core, suf]
    if mapped is not None:
        counts = per_chunk[other]
        first = np.repeat(starts[other], counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        source[first + within] = n + 3 * m + np.arange(len(first))
        pieces.append(mapped.explode(empty_as_null=False, keep_nulls=False))
    values = pl.concat([x.alias("w") for x in pieces]).gather(source)
    per_doc = np.bincount(doc, weights=per_chunk, minlength=len(offsets) - 1).astype(np.int64)
    list_offsets = np.zeros(len(per_doc) + 1, dtype=np.int64)
    np.cumsum(per_doc, out=list_offsets[1:])
    arr = pa.LargeListArray.from_arrays(pa.array(list_offsets), values.to_arrow())
    return pl.Series("words", arr)


def _inert(chunks: pl.Series) -> np.ndarray:
    """True for chunks `tokenize_chunk` returns unchanged as one token (see `_INERT`)."""
    mask = chunks.str.contains(_INERT).to_numpy()
    pos = np.flatnonzero(mask)
    if len(pos):
        cand = chunks.gather(pos)
        unit = cand.str.extract(_UNIT_AFTER_DIGIT, 1).is_in(list(SUFFIX_UNITS)).fill_null(False)
        bad = (cand.is_in(list(SPECIAL_CASES)) | cand.str.contains(_CURRENCY_START) | unit
               | cand.str.contains(INFIX_ANYWHERE)).to_numpy()
        mask[pos[bad]] = False
    return mask


def flatten(lists: pl.Series) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    """Flat values, the document index of each value and per-document offsets (length n_docs + 1)."""
    lengths = lists.list.len().fill_null(0).to_numpy().astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = lists.explode(empty_as_null=False, keep_nulls=False)
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return flat, doc, offsets
