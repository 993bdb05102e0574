"""Word tokenization shared by the Gopher, repetition and FineWeb rules, for a whole batch at once.

`split_words` is one compiled pass over the batch (`word_kernel`). `_split_words_reference` is the
implementation it replaced, kept as the oracle of its tests: text repeats its whitespace-separated
chunks, so each distinct chunk of a batch is split once and the tokens are gathered back in text order.
Chunks that no tokenizer rule touches, most of any text (words, numbers, times, hashes, identifiers), are
one token; chunks of one prefix character and/or one suffix character around letters, digits or any such
inert core (`(foo_bar)`, `docs.c:`) are split by polars regexes; every other distinct chunk goes through
`tokenize_chunk` (spaCy's English rules, cached per process). The kernel decides those fast paths exactly
as these regexes do (with polars' own character classes), so both give the same tokens.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import regex

from corpus_dagster.clean.word_kernel import split_words_arrow
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
from corpus_dagster.core.arrays import concat_ranges

# Chunks no rule of `tokenize_chunk` touches, one token as they are: a first character no prefix rule
# peels (`+` and `.` have rules of their own), a last one no suffix rule peels, no apostrophe anywhere
# (contractions, 's) and no place an infix could split (INFIX_ANYWHERE). Special cases, `US$`-style
# currencies and a unit right after the last digit (`5km`) are excluded in `_inert`. Most text is such chunks.
_INERT = (rf"^[^'’{class_chars(PREFIX_CHARS | {'+', '.'})}\p{{So}}]"
          rf"(?:[^'’]*[^'’{class_chars(SUFFIX_CHARS | {'+', '.'})}\p{{So}}])?$")
_CURRENCY_START = "^(?:" + "|".join(regex.escape(c) for c in MULTI_CURRENCY) + ")"
_UNIT_AFTER_DIGIT = r"[0-9]([^0-9]+)$"  # the run after the last ASCII digit: a unit there is split off
# One prefix and/or one suffix character around any core; `_affixed_inert` keeps the chunks whose core is
# inert (and, for a `.` suffix, letters ending lower-case or digits: where spaCy splits the `.` off).
_CLASS = class_chars(PREFIX_CHARS - {"+"})
_SUFFIX_CLASS = class_chars(SUFFIX_CHARS)
_AFFIXED = rf"^([{_CLASS}]?)(.+?)((?:[{_SUFFIX_CLASS}]|\.)?)$"
_DOT_SPLITS_AFTER = r"^(?:[\p{L}\p{M}]*[\p{Ll}\p{Lo}]|\p{N}+)$"


def split_words(texts: pl.Series) -> pl.Series:
    """Tokens of every text as a list column (one list per document, in order; a null text has none).

    One compiled pass over the batch (`word_kernel`); the same tokens as `_split_words_reference`."""
    return pl.Series("words", split_word_lists(texts))


def split_word_lists(texts: pl.Series) -> pa.LargeListArray:
    """`split_words` as an Arrow list<large_string> array (no polars copy of the tokens)."""
    return split_words_arrow(texts, _fallback_tokens)[0]


def _fallback_tokens(chunks: list[str]) -> list[list[str]]:
    """Tokens of each whitespace-free chunk the kernel leaves to Python, as `_split_words_reference` splits them."""
    counts, values = _chunk_tokens(pl.Series(chunks, dtype=pl.String))
    flat = values.to_list()
    ends = np.cumsum(counts).tolist()
    return [flat[e - c:e] for c, e in zip(counts.tolist(), ends, strict=True)]


def _split_words_reference(texts: pl.Series) -> pl.Series:
    """`split_words` by polars passes and `tokenize_chunk`: the oracle the kernel's tests compare with.

    Each distinct chunk is split once (text repeats its chunks: a 74 MB batch of changelogs has 8.4 M chunks
    and 0.63 M distinct ones), then every chunk's tokens are gathered in text order."""
    chunks, doc, offsets = flatten(texts.str.extract_all(r"\S+"))
    codes, distinct = distinct_values(chunks)
    counts, values = _chunk_tokens(distinct)
    first = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    per_chunk = counts[codes]
    tokens = values.gather(concat_ranges(first[codes], per_chunk))
    per_doc = np.bincount(doc, weights=per_chunk, minlength=len(offsets) - 1).astype(np.int64)
    list_offsets = np.zeros(len(per_doc) + 1, dtype=np.int64)
    np.cumsum(per_doc, out=list_offsets[1:])
    arr = pa.LargeListArray.from_arrays(pa.array(list_offsets), tokens.to_arrow())
    return pl.Series("words", arr)


def distinct_values(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(code of every value, the distinct values in order of first appearance): values[i] == distinct[code[i]]."""
    encoded = pc.dictionary_encode(values.to_arrow())
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), pl.Series(encoded.dictionary)


def _chunk_tokens(chunks: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(tokens per chunk, every chunk's tokens laid end to end in chunk order) of whitespace-free chunks."""
    n = len(chunks)
    plain = _inert(chunks)
    shaped, other, (pre, core, suf) = _affixed_inert(chunks, np.flatnonzero(~plain), list(SPECIAL_CASES))
    has_pre = (pre.str.len_bytes() > 0).to_numpy()
    has_suf = (suf.str.len_bytes() > 0).to_numpy()

    per_chunk = np.ones(n, dtype=np.int64)
    per_chunk[shaped] += has_pre.astype(np.int64) + has_suf
    split = [tokenize_chunk(c) for c in chunks.gather(other).to_list()]
    per_chunk[other] = [len(t) for t in split]
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_chunk, out=starts[1:])
    # token position -> index into [chunks, prefixes, cores, suffixes, other chunks' tokens]
    source = np.empty(starts[-1], dtype=np.int64)
    plain_idx = np.flatnonzero(plain)
    source[starts[plain_idx]] = plain_idx
    m = len(shaped)
    base = starts[shaped]
    source[base[has_pre]] = n + np.flatnonzero(has_pre)
    source[base + has_pre] = n + m + np.arange(m)
    source[(base + has_pre + 1)[has_suf]] = n + 2 * m + np.flatnonzero(has_suf)
    flat_other = [t for tokens in split for t in tokens]
    source[concat_ranges(starts[other], per_chunk[other])] = n + 3 * m + np.arange(len(flat_other))
    pieces = [chunks, pre, core, suf, pl.Series(flat_other, dtype=pl.String)]
    return per_chunk, pl.concat([x.alias("w") for x in pieces]).gather(source)


def _affixed_inert(chunks: pl.Series, candidates: np.ndarray, specials: list[str]
                   ) -> tuple[np.ndarray, np.ndarray, tuple[pl.Series, pl.Series, pl.Series]]:
    """Of the `candidates` (indices into chunks), those made of one prefix character and/or one suffix
    character around a core `tokenize_chunk` leaves whole (`_inert`), such as `(word)`, `word.`, `(foo_bar)`,
    `docs.c:`, `51.7]`: their tokens are the affixes and the core. A `.` suffix only after letters ending
    lower-case or digits; no special case may form on the way (the chunk, prefix + core, core + suffix).
    Returns (those indices, the other candidates, their parts)."""
    cand = chunks.gather(candidates)
    parts = cand.str.extract_groups(_AFFIXED).struct.unnest()
    pre, core, suf = parts["1"], parts["2"], parts["3"]
    ok = (core.is_not_null() & ((pre.str.len_bytes() > 0) | (suf.str.len_bytes() > 0)) & ~cand.is_in(specials)
          & ~(core + suf).is_in(specials) & ~(pre + core).is_in(specials) & ~cand.str.ends_with("8)")
          & ((suf != ".") | core.str.contains(_DOT_SPLITS_AFTER))).fill_null(False).to_numpy()
    at = np.flatnonzero(ok)
    ok[at[~_inert(core.gather(at))]] = False
    keep = pl.Series(ok)
    return candidates[ok], candidates[~ok], (pre.filter(keep), core.filter(keep), suf.filter(keep))


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
