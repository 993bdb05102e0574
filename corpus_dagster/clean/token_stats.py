"""Per-document token statistics of the Gopher quality rules, as one compiled pass over the token buffer.

The Gopher rules need, per document, its tokens, its words (tokens that are not punctuation or symbols
only), their characters, the tokens holding a letter and the distinct stop words among the tokens. As
polars passes over the exploded token column (three regex passes, an `is_in`, and five `bincount`s over
every token) they cost more than the word split itself; here one loop reads each token's UTF-8 bytes
once. Character classes are polars' own (`word_kernel.char_classes`, the same table the split reads), so
the statistics are those of `^[\\p{P}\\p{S}]+$` and `\\p{L}` as polars evaluates them: the table covers
the BMP, and the rare token with an astral code point is classified by polars itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from corpus_dagster.clean.word_kernel import _RL, _RPS, _byte_set, _lookup, char_classes
from corpus_dagster.core.jit import compiled, decode_utf8, string_buffers

SYMBOL_ONLY_PATTERN = r"^[\p{P}\p{S}]+$"  # a token of punctuation and symbols only is not a word
LETTER_PATTERN = r"\p{L}"  # a token with a letter counts as an alphabetic word


@dataclass(frozen=True)
class TokenStats:
    """Per document (int64 arrays of the batch's length)."""

    n_tokens: np.ndarray
    n_words: np.ndarray  # tokens that are not punctuation/symbols only
    word_chars: np.ndarray  # code points of those words
    n_alpha: np.ndarray  # tokens holding a letter
    n_stop: np.ndarray  # distinct stop words among the tokens (case-sensitive)


def _buffers(words: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(UTF-8 bytes, token offsets into them, per-document offsets into the tokens) of a list<string> array."""
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks()
    if words.type != pa.large_list(pa.large_string()):
        words = words.cast(pa.large_list(pa.large_string()))
    list_off = np.asarray(words.offsets, dtype=np.int64)  # accounts for a sliced list array
    data, str_off = string_buffers(words.values)  # the values unsliced: list_off indexes all of them
    return data, str_off, list_off


@compiled
def _stats(data, str_off, list_off, cls, ps_bit, l_bit, stop_keys, stop_index, stop_first, min_stop, max_stop):  # noqa: ANN001, ANN202
    """Per-document sums over the tokens whose code points are all in the BMP; `astral` marks the others
    (left out of the sums except the stop words, whose test is on bytes). A token is looked up among the
    stop words only when its length and first byte could be one (`stop_first`: 256 flags)."""
    n_docs = list_off.shape[0] - 1
    n_words = np.zeros(n_docs, dtype=np.int64)
    word_chars = np.zeros(n_docs, dtype=np.int64)
    n_alpha = np.zeros(n_docs, dtype=np.int64)
    n_stop = np.zeros(n_docs, dtype=np.int64)
    astral = np.zeros(max(list_off[n_docs] - list_off[0], 0), dtype=np.bool_)
    seen = np.full(stop_index[0], -1, dtype=np.int64)
    base = list_off[0]
    for d in range(n_docs):
        for t in range(list_off[d], list_off[d + 1]):
            s = str_off[t]
            e = str_off[t + 1]
            if min_stop <= e - s <= max_stop and stop_first[data[s]]:
                k = _lookup(data, s, e, stop_keys, stop_index)
                if k >= 0 and seen[k] != d:
                    seen[k] = d
                    n_stop[d] += 1
            chars = 0
            symbols_only = e > s
            letter = False
            odd = False
            i = s
            while i < e:
                cp, size = decode_utf8(data, i)
                chars += 1
                if cp >= 0x10000:
                    odd = True
                else:
                    c = cls[cp]
                    if not (c & ps_bit):
                        symbols_only = False
                    if c & l_bit:
                        letter = True
                i += size
            if odd:
                astral[t - base] = True
                continue
            if not symbols_only:
                n_words[d] += 1
                word_chars[d] += chars
            if letter:
                n_alpha[d] += 1
    return n_words, word_chars, n_alpha, n_stop, astral


def token_stats(words: pa.Array, stop_words: Sequence[str]) -> TokenStats:
    """The Gopher token statistics of every document of a list<string> array of tokens (one list per
    document); `stop_words` are matched exactly, each counted once per document."""
    data, str_off, list_off = _buffers(words)
    stops = list(dict.fromkeys(stop_words))
    keys, index = _byte_set(stops)
    encoded = [w.encode() for w in stops]
    first_byte = np.zeros(256, dtype=np.bool_)
    first_byte[[w[0] for w in encoded if w]] = True
    min_stop = min((len(w) for w in encoded), default=1)  # an empty stop word is no token
    max_stop = max((len(w) for w in encoded), default=0)
    n_words, word_chars, n_alpha, n_stop, astral = _stats(
        data, str_off, list_off, char_classes(), _RPS, _RL, keys, index, first_byte, max(min_stop, 1), max_stop)
    odd = np.flatnonzero(astral)
    if len(odd):  # classified by polars itself; the table covers the BMP only
        at = list_off[0] + odd  # `astral` counts from the first document's first token
        tokens = pl.Series([bytes(data[str_off[t]:str_off[t + 1]]).decode() for t in at.tolist()], dtype=pl.String)
        doc = np.searchsorted(list_off, at, side="right") - 1
        word = ~tokens.str.contains(SYMBOL_ONLY_PATTERN).to_numpy()
        np.add.at(n_words, doc, word)
        np.add.at(word_chars, doc, np.where(word, tokens.str.len_chars().to_numpy(), 0))
        np.add.at(n_alpha, doc, tokens.str.contains(LETTER_PATTERN).to_numpy())
    return TokenStats(np.diff(list_off), n_words, word_chars, n_alpha, n_stop)
