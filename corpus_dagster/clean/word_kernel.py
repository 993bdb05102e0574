"""`words.split_words` (spaCy's English rules) over a whole batch as one compiled pass (numba).

Python per distinct chunk and several polars regex passes per batch cost most of the clean stage; this
kernel walks the Arrow UTF-8 buffer once, cuts every text into chunks at Unicode White_Space (as polars'
`\\S+` does) and splits each chunk as `words._split_words_reference` does: its two polars fast paths
(inert chunks, one affix around an inert core) decided with polars' own character classes, then the
rules of `tokenize_chunk` (the prefix/suffix loop, special cases, contractions, the URL pattern, the infix
pattern, the merge of punctuation special cases). Character classes are per-code-point tables of the
BMP built from the very regexes and sets the rules use; a chunk with an astral code point, or with a
character Python's `\\s` counts as space (the URL pattern reads `\\S`), is left to the caller
("fallback", about 1 chunk in 3 million here). Tokens concatenate to their chunk, so every token is a
byte range of the input and the output buffers are built without Python strings. The first use compiles
for about 15 s; the machine code is cached beside this file as in `lib.kernels`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import polars as pl
import pyarrow as pa
import regex
from numba import njit
from numba.core import cgutils
from numba.extending import intrinsic

from corpus_dagster.clean import word_tokens as wt
from corpus_dagster.core.jit import compiled as _compiled
from corpus_dagster.core.jit import decode_utf8, string_buffers

# per-code-point class bits (tables of the BMP)
_PRE = 1 << 0  # PREFIX_CHARS
_SUF = 1 << 1  # SUFFIX_CHARS
_ICON = 1 << 2  # _is_icon (unicodedata So, not ASCII)
_SO = 1 << 3  # regex \p{So} (the infix pattern)
_L = 1 << 4  # regex \p{L}
_LOW = 1 << 5  # regex [\p{Ll}\p{Lo}]
_UP = 1 << 6  # regex [\p{Lu}\p{Lo}]
_QUOTE = 1 << 7  # _QUOTES
_UD_LOW = 1 << 8  # unicodedata Ll / Lo (the suffix rules)
_UD_UP = 1 << 9  # unicodedata Lu / Lo
_DOT_AFTER = 1 << 10  # _DOT_AFTER
_W = 1 << 11  # regex \w (contractions)
_URLW = 1 << 12  # regex [\w\u00a1-\uffff] (URL labels)
_LL = 1 << 13  # regex \p{Ll} (URL top-level domain)
_DIG = 1 << 14  # regex \d (URL port)
_PYSPACE = 1 << 15  # regex \s: the URL pattern's \S would stop there -> fallback
_WS = 1 << 16  # polars (Rust regex) \s: separates chunks
# the same classes as polars (Rust regex) reads them, for the fast paths of `words._split_words_reference`
_RSO = 1 << 17  # \p{So}
_RL = 1 << 18  # \p{L}
_RLOW = 1 << 19  # [\p{Ll}\p{Lo}]
_RUP = 1 << 20  # [\p{Lu}\p{Lo}]
_RM = 1 << 21  # \p{M}
_RN = 1 << 22  # \p{N}
_RPS = 1 << 23  # [\p{P}\p{S}] (the Gopher word statistics, `token_stats`)
_BMP = 0x10000


def _inline(fn):  # noqa: ANN001, ANN202
    """A helper numba inlines into its caller: a call passes every array as 7 words plus reference-count
    calls, which costs more than most rules (inlining all helpers runs 1.3x faster still but compiles 3x longer)."""
    return njit(inline="always", boundscheck=False)(fn)


def _helper(fn):  # noqa: ANN001, ANN202
    """A helper called rarely, or small enough per call (the hash lookups): left a call, to compile faster."""
    return njit(boundscheck=False, nogil=True)(fn)


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """The class bits of every BMP code point (uint32), from the same regexes and sets the rules use."""
    cps = [c for c in range(_BMP) if not 0xD800 <= c <= 0xDFFF]
    chars = "".join(map(chr, cps))
    table = np.zeros(_BMP, dtype=np.uint32)
    where = np.array(cps, dtype=np.int64)

    def by_regex(pattern: str, bit: int) -> None:
        hits = [m.start() for m in regex.finditer(pattern, chars)]
        table[where[hits]] |= bit

    def by_set(chars_: frozenset[str] | str, bit: int) -> None:
        for c in set(chars_):
            table[ord(c)] |= bit

    by_set(wt.PREFIX_CHARS, _PRE)
    by_set(wt.SUFFIX_CHARS, _SUF)
    by_set(wt._QUOTES, _QUOTE)
    by_set(wt._DOT_AFTER, _DOT_AFTER)
    by_regex(r"\p{So}", _SO)
    by_regex(r"\p{L}", _L)
    by_regex("[" + wt._LOWER + "]", _LOW)
    by_regex("[" + wt._UPPER + "]", _UP)
    by_regex(r"\w", _W)
    by_regex(r"[\w\u00a1-\uffff]", _URLW)
    by_regex(r"\p{Ll}", _LL)
    by_regex(r"\d", _DIG)
    by_regex(r"\s", _PYSPACE)
    for c, ch in zip(cps, chars, strict=True):
        if wt._is_icon(ch):
            table[c] |= _ICON
        cat = unicodedata.category(ch)
        if cat in ("Ll", "Lo"):
            table[c] |= _UD_LOW
        if cat in ("Lu", "Lo"):
            table[c] |= _UD_UP
    # chunk separators exactly as polars' `\S+` sees them, and polars' own classes
    probe = pl.Series([f"a{ch}b" for ch in chars]).str.extract_all(r"\S+").list.len().to_numpy()
    table[where[probe != 1]] |= _WS
    single = pl.Series(list(chars))
    for pattern, bit in ((r"\p{So}", _RSO), (r"\p{L}", _RL), (r"[\p{Ll}\p{Lo}]", _RLOW), (r"[\p{Lu}\p{Lo}]", _RUP),
                         (r"\p{M}", _RM), (r"\p{N}", _RN), (r"[\p{P}\p{S}]", _RPS)):
        table[where[single.str.contains("^" + pattern + "$").to_numpy()]] |= bit
    return table


@intrinsic
def _borrow(typingctx, arr):  # noqa: ANN001, ANN202
    """A view of arr without its reference count: each helper call would otherwise take and drop a
    reference (an atomic increment and decrement) to every array it is passed, 6x the cost of the rules.
    Only for arrays the caller keeps alive (the kernel's arguments)."""
    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        out = context.make_array(signature.return_type)(context, builder)
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        out.nitems = ary.nitems
        out.itemsize = ary.itemsize
        out.data = ary.data
        out.shape = ary.shape
        out.strides = ary.strides
        return out._getvalue()
    return arr(arr), codegen


# ---------------------------------------------------------------- hash sets of byte strings


@_helper
def _hash(data, s, e):  # noqa: ANN001, ANN202
    h = np.uint64(0xCBF29CE484222325)
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    return h


@_helper
def _lookup(data, s, e, keys, index):  # noqa: ANN001, ANN202
    """Index of data[s:e] among the keys, or -1 (index: table size, table of key numbers, key offsets)."""
    size = index[0]
    slot = np.int64(_hash(data, s, e) & np.uint64(size - 1))
    n = e - s
    while True:
        k = index[1 + slot]
        if k < 0:
            return -1
        ks = index[1 + size + k]
        if index[2 + size + k] - ks == n:
            same = True
            for j in range(n):
                if keys[ks + j] != data[s + j]:
                    same = False
                    break
            if same:
                return k
        slot = (slot + 1) & (size - 1)


def _py_hash(key: bytes) -> int:
    """`_hash` in Python, to build the tables without compiling it for Python callers."""
    h = 0xCBF29CE484222325
    for byte in key:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _byte_set(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(key bytes, index) for `_lookup`: the index holds the table size, an open-addressing table of key
    numbers and the key offsets (one array: each array a helper is passed costs on every call)."""
    raw = [w.encode() for w in words]
    keys = np.frombuffer(b"".join(raw), dtype=np.uint8).copy() if raw else np.zeros(0, dtype=np.uint8)
    key_off = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=key_off[1:])
    size = 16
    while size < 4 * len(raw):
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    for i in range(len(raw)):
        slot = _py_hash(raw[i]) & (size - 1)
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = i
    return keys, np.concatenate([[size], table, key_off]).astype(np.int64)


@lru_cache(maxsize=1)
def _tables() -> tuple:
    """Everything the kernel reads besides the text: classes, special cases (with their parts' lengths in
    code points), units, punctuation special cases to merge, and the longest unit / merge piece."""
    specials = list(wt.SPECIAL_CASES)
    part_len = [len(p) for k in specials for p in wt.SPECIAL_CASES[k]]
    part_off = np.zeros(len(specials) + 1, dtype=np.int64)
    np.cumsum([len(wt.SPECIAL_CASES[k]) for k in specials], out=part_off[1:])
    max_special = max(len(k.encode()) for k in specials)
    return (char_classes(), *_byte_set(specials), part_off, np.array(part_len, dtype=np.int64), max_special,
            *_byte_set(sorted(wt.SUFFIX_UNITS)), *_byte_set(sorted(wt._MERGE)), wt._MAX_UNIT, wt._MAX_MERGE)


# ---------------------------------------------------------------- the rules, on code points cps[a:b]


@_inline
def _is_digit(c):  # noqa: ANN001, ANN202
    return 48 <= c <= 57


@_inline
def _is_ascii_alnum(c):  # noqa: ANN001, ANN202
    return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122


@_inline
def _prefix_len(cps, a, b, cls):  # noqa: ANN001, ANN202
    c = cps[a]
    if cls[c] & _PRE:
        return 1
    if c == 43:  # +
        return 0 if b - a > 1 and _is_digit(cps[a + 1]) else 1
    if c == 46:  # .
        run = 0
        while a + run < b and cps[a + run] == 46:
            run += 1
        return run if run >= 2 else 0
    if c == 85 and b - a >= 3 and cps[a + 1] == 83 and cps[a + 2] == 36:  # US$
        return 3
    if (c == 67 or c == 65) and b - a >= 2 and cps[a + 1] == 36:  # C$ A$
        return 2
    if cls[c] & _ICON:
        return 1
    return 0


@_inline
def _suffix_len(cps, bpos, data, a, b, cls, un_keys, un_idx, max_unit):  # noqa: ANN001, ANN202
    n = b - a
    best = n
    c = cps[b - 1]
    if _is_ascii_alnum(c):
        if n >= 2 and (c == 115 or c == 83) and (cps[b - 2] == 39 or cps[b - 2] == 0x2019):
            best = n - 2
    else:
        if cls[c] & (_SUF | _ICON):
            best = n - 1
        if c == 46:
            run = 0
            while run < n and cps[b - 1 - run] == 46:
                run += 1
            if run >= 2:
                best = min(best, n - run)
            elif n >= 2:
                bb = cps[b - 2]
                if (_is_digit(bb) or cls[bb] & (_UD_LOW | _DOT_AFTER)
                        or (n >= 3 and cls[bb] & _UD_UP and cls[cps[b - 3]] & _UD_UP)
                        or (n >= 3 and cps[b - 3] == 0xB0
                            and (bb == 70 or bb == 102 or bb == 67 or bb == 99 or bb == 75 or bb == 107))):
                    best = min(best, n - 1)
        elif c == 43 and n >= 2 and _is_digit(cps[b - 2]):
            best = min(best, n - 1)
    for k in range(1, min(max_unit, n - 1) + 1):
        if _is_digit(cps[b - k - 1]):
            if _lookup(data, bpos[b - k], bpos[b], un_keys, un_idx) >= 0:
                best = min(best, n - k)
            break
    return n - best


@_helper
def _contraction(cps, a, b, cls):  # noqa: ANN001, ANN202
    """Where `^(\\w+?)(n['’]t|['’](?:re|ve|ll|d|m|RE|VE|LL|D|M))$` splits cps[a:b], or -1."""
    for j in (b - 3, b - 2):
        if j < a + 1:
            continue
        ok = False
        if j == b - 3:
            c0, c1, c2 = cps[j], cps[j + 1], cps[j + 2]
            if c0 == 110 and (c1 == 39 or c1 == 0x2019) and c2 == 116:  # n't
                ok = True
            elif c0 == 39 or c0 == 0x2019:
                if ((c1 == 114 and c2 == 101) or (c1 == 118 and c2 == 101) or (c1 == 108 and c2 == 108)
                        or (c1 == 82 and c2 == 69) or (c1 == 86 and c2 == 69) or (c1 == 76 and c2 == 76)):
                    ok = True
        else:
            c0, c1 = cps[j], cps[j + 1]
            if (c0 == 39 or c0 == 0x2019) and (c1 == 100 or c1 == 109 or c1 == 68 or c1 == 77):
                ok = True
        if ok:
            for x in range(a, j):
                if not cls[cps[x]] & _W:
                    ok = False
                    break
            if ok:
                return j
    return -1


@_helper
def _url_rest(cps, p, b, cls):  # noqa: ANN001, ANN202
    """Does `(?:label\\.)+\\p{Ll}{2,63}(?::\\d{2,5})?(?:[/?#]\\S*)?$` match cps[p:b] (no Python space in it)?"""
    seg = p
    for x in range(p, b):
        c = cps[x]
        if c == 46:
            size = x - seg
            if size < 1 or size > 64 or not cls[cps[seg]] & _URLW or not cls[cps[x - 1]] & _URLW:
                return False
            k = x + 1
            m = k
            while m < b and cls[cps[m]] & _LL:
                m += 1
            t = m - k
            if 2 <= t <= 63:
                if m == b:
                    return True
                c2 = cps[m]
                if c2 == 47 or c2 == 63 or c2 == 35:  # / ? #
                    return True
                if c2 == 58:  # :port
                    r = m + 1
                    while r < b and cls[cps[r]] & _DIG:
                        r += 1
                    if 2 <= r - m - 1 <= 5 and (r == b or cps[r] == 47 or cps[r] == 63 or cps[r] == 35):
                        return True
            seg = x + 1
        elif not (cls[c] & _URLW or c == 45):
            return False
    return False


@_helper
def _is_url(cps, a, b, cls):  # noqa: ANN001, ANN202
    """`_URL_RE.match(cps[a:b])`: an optional scheme, an optional user part up to any `@`, then `_url_rest`."""
    q = a
    while q < b and (cls[cps[q]] & _W or cps[q] == 43 or cps[q] == 45 or cps[q] == 46):
        q += 1
    scheme = q - a >= 2 and q + 2 < b and cps[q] == 58 and cps[q + 1] == 47 and cps[q + 2] == 47
    for s in (a, q + 3 if scheme else a):
        if _url_rest(cps, s, b, cls):
            return True
        for r in range(s + 1, b):
            if cps[r] == 64 and _url_rest(cps, r + 1, b, cls):  # user@ (\S+ before it)
                return True
    return False


@_inline
def _infix_at(cps, a, p, b, cls):  # noqa: ANN001, ANN202
    """Length of the `_INFIX_RE` match at p in cps[a:b] (alternatives in order), 0 for none."""
    c = cps[p]
    nxt = cps[p + 1] if p + 1 < b else -1
    if c == 46 and nxt == 46:
        q = p
        while q < b and cps[q] == 46:
            q += 1
        return q - p
    if c == 0x2026 or cls[c] & _SO:
        return 1
    if p == a:
        return 0
    prev = cps[p - 1]
    prev_digit = _is_digit(prev)
    if prev_digit and (c == 43 or c == 45 or c == 42 or c == 94) and nxt >= 0 and (_is_digit(nxt) or nxt == 45):
        return 1
    if c == 46 and cls[prev] & (_LOW | _QUOTE) and nxt >= 0 and cls[nxt] & (_UP | _QUOTE):
        return 1
    prev_l = cls[prev] & _L
    if c == 44 and prev_l and nxt >= 0 and cls[nxt] & _L:
        return 1
    if not (prev_l or prev_digit):
        return 0
    if c == 45 or c == 0x2013 or c == 0x2014 or c == 126:  # - – — -- --- —— ~
        for size in (1, 2, 3):
            if p + size > b:
                break
            if size == 1:
                good = True
            elif size == 2:
                good = (c == 45 or c == 0x2014) and cps[p + 1] == c
            else:
                good = c == 45 and cps[p + 1] == 45 and cps[p + 2] == 45
            if not good:
                if size == 1:
                    return 0
                continue
            if p + size < b and cls[cps[p + size]] & _L:
                return size
        return 0
    if (c == 58 or c == 60 or c == 62 or c == 61 or c == 47) and nxt >= 0 and cls[nxt] & _L:
        return 1
    return 0


@_inline
def _is_apostrophe(c):  # noqa: ANN001, ANN202
    return c == 39 or c == 0x2019


@_inline
def _rust_inert(cps, bpos, data, a, b, cls, sp_keys, sp_idx, sp_max, un_keys, un_idx):  # noqa: ANN001, ANN202
    """`words._inert` of cps[a:b] (polars' classes): no rule of `tokenize_chunk` could touch it."""
    n = b - a
    c = cps[a]
    if _is_apostrophe(c) or c == 43 or c == 46 or cls[c] & (_PRE | _RSO):
        return False
    if n >= 2:
        c = cps[b - 1]
        if _is_apostrophe(c) or c == 43 or c == 46 or cls[c] & (_SUF | _RSO):
            return False
        for x in range(a + 1, b - 1):
            if _is_apostrophe(cps[x]):
                return False
    if bpos[b] - bpos[a] <= sp_max and _lookup(data, bpos[a], bpos[b], sp_keys, sp_idx) >= 0:
        return False
    c = cps[a]
    if (c == 85 and n >= 3 and cps[a + 1] == 83 and cps[a + 2] == 36) or \
            ((c == 67 or c == 65) and n >= 2 and cps[a + 1] == 36):  # US$ C$ A$
        return False
    x = b - 1
    while x >= a and not _is_digit(cps[x]):
        x -= 1
    if a <= x < b - 1 and _lookup(data, bpos[x + 1], bpos[b], un_keys, un_idx) >= 0:
        return False
    for x in range(a, b):  # INFIX_ANYWHERE
        c = cps[x]
        if c == 0x2026 or cls[c] & _RSO:
            return False
        if x + 1 >= b:
            break
        c1 = cps[x + 1]
        if c == 46 and c1 == 46:
            return False
        if x + 2 >= b:
            continue
        c2 = cps[x + 2]
        lc = cls[c]
        if _is_digit(c) and (c1 == 43 or c1 == 45 or c1 == 42 or c1 == 94) and (_is_digit(c2) or c2 == 45):
            return False
        if lc & (_RLOW | _QUOTE) and c1 == 46 and cls[c2] & (_RUP | _QUOTE):
            return False
        if lc & _RL and c1 == 44 and cls[c2] & _RL:
            return False
        if lc & _RL or _is_digit(c):
            if (c1 == 58 or c1 == 60 or c1 == 62 or c1 == 61 or c1 == 47) and cls[c2] & _RL:
                return False
            if c1 == 45 or c1 == 0x2013 or c1 == 0x2014 or c1 == 126:
                if cls[c2] & _RL:
                    return False
                if (c1 == 45 or c1 == 0x2014) and c2 == c1 and x + 3 < b and cls[cps[x + 3]] & _RL:
                    return False
                if c1 == 45 and c2 == 45 and x + 4 < b and cps[x + 3] == 45 and cls[cps[x + 4]] & _RL:
                    return False
    return True


@_inline
def _dot_splits_after(cps, a, b, cls):  # noqa: ANN001, ANN202
    """polars' `^(?:[\\p{L}\\p{M}]*[\\p{Ll}\\p{Lo}]|\\p{N}+)$` on cps[a:b]."""
    letters = cls[cps[b - 1]] & _RLOW
    digits = True
    for x in range(a, b):
        k = cls[cps[x]]
        if not k & _RN:
            digits = False
        if x < b - 1 and not k & (_RL | _RM):
            letters = False
    return digits or letters != 0


@_inline
def _tokenize(cps, bpos, data, n, cuts, work, cls, sp_keys, sp_idx, sp_part_off, sp_part_len, sp_max,
              un_keys, un_idx, mg_keys, mg_idx, max_unit, max_merge):  # noqa: ANN001, ANN202
    """Token boundaries of chunk cps[0:n] into cuts (0 = c_0 < .. < c_k = n); returns k. For chunks not
    `_rust_inert`: the other fast path of `words._split_words_reference` first (one affix around an inert
    core), as it decides, then the rules of `tokenize_chunk`."""
    k = 0
    cuts[0] = 0
    pre = 1 if n >= 2 and cls[cps[0]] & _PRE else 0
    suf = 1 if n - 1 >= pre + 1 and (cls[cps[n - 1]] & _SUF or cps[n - 1] == 46) else 0
    if (pre or suf) and not (n >= 2 and cps[n - 2] == 56 and cps[n - 1] == 41) \
            and (not suf or cps[n - 1] != 46 or _dot_splits_after(cps, pre, n - 1, cls)) \
            and not (bpos[n] - bpos[0] <= sp_max and _lookup(data, bpos[0], bpos[n], sp_keys, sp_idx) >= 0) \
            and not (bpos[n] - bpos[pre] <= sp_max and _lookup(data, bpos[pre], bpos[n], sp_keys, sp_idx) >= 0) \
            and not (bpos[n - suf] - bpos[0] <= sp_max
                     and _lookup(data, bpos[0], bpos[n - suf], sp_keys, sp_idx) >= 0) \
            and _rust_inert(cps, bpos, data, pre, n - suf, cls, sp_keys, sp_idx, sp_max, un_keys, un_idx):
        if pre:
            k += 1
            cuts[k] = 1
        if suf:
            k += 1
            cuts[k] = n - 1
        k += 1
        cuts[k] = n
        return k
    whole = _lookup(data, bpos[0], bpos[n], sp_keys, sp_idx) if bpos[n] - bpos[0] <= sp_max else -1
    if whole >= 0:
        pos = 0
        for j in range(sp_part_off[whole], sp_part_off[whole + 1]):
            pos += sp_part_len[j]
            k += 1
            cuts[k] = pos
        return k
    # the prefix/suffix loop; suffix boundaries go to work[] (peeled right to left)
    a, b, last, nr = 0, n, -1, 0
    while b > a and b - a != last:
        if bpos[b] - bpos[a] <= sp_max and _lookup(data, bpos[a], bpos[b], sp_keys, sp_idx) >= 0:
            break
        last = b - a
        pre = _prefix_len(cps, a, b, cls)
        if pre and bpos[b] - bpos[a + pre] <= sp_max and \
                _lookup(data, bpos[a + pre], bpos[b], sp_keys, sp_idx) >= 0:
            a += pre
            k += 1
            cuts[k] = a
            break
        suf = _suffix_len(cps, bpos, data, a + pre, b, cls, un_keys, un_idx, max_unit) if b - a > pre else 0
        if suf and bpos[b - suf] - bpos[a] <= sp_max and \
                _lookup(data, bpos[a], bpos[b - suf], sp_keys, sp_idx) >= 0:
            b -= suf
            work[nr] = b
            nr += 1
            break
        if pre and suf and pre + suf <= b - a:
            a += pre
            k += 1
            cuts[k] = a
            b -= suf
            work[nr] = b
            nr += 1
        elif pre:
            a += pre
            k += 1
            cuts[k] = a
        elif suf:
            b -= suf
            work[nr] = b
            nr += 1
    if a < b:
        core = _lookup(data, bpos[a], bpos[b], sp_keys, sp_idx) if bpos[b] - bpos[a] <= sp_max else -1
        if core >= 0:
            pos = a
            for j in range(sp_part_off[core], sp_part_off[core + 1] - 1):
                pos += sp_part_len[j]
                k += 1
                cuts[k] = pos
        else:
            split = -1
            for x in range(a, b):
                if cps[x] == 39 or cps[x] == 0x2019:
                    split = _contraction(cps, a, b, cls)
                    break
            if split >= 0:
                k += 1
                cuts[k] = split
            else:
                k0 = k
                has_dot = False
                start = a
                p = a
                while p < b:
                    if cps[p] == 46:
                        has_dot = True
                    size = _infix_at(cps, a, p, b, cls)
                    if size == 0:
                        p += 1
                        continue
                    if p != a:
                        if p != start:
                            k += 1
                            cuts[k] = p
                        if p + size < b:
                            k += 1
                            cuts[k] = p + size
                        start = p + size
                    p += size
                if k > k0 and has_dot and _is_url(cps, a, b, cls):
                    k = k0
        if b < n:  # the core ends where the suffixes start
            k += 1
            cuts[k] = b
    for j in range(nr - 1, -1, -1):
        if work[j] != cuts[k]:
            k += 1
            cuts[k] = work[j]
    if cuts[k] != n:
        k += 1
        cuts[k] = n
    if k > 1:  # merge runs of 2-3 tokens that spell a punctuation special case
        m = 0
        i = 0
        while i < k:
            if cuts[i + 1] - cuts[i] <= max_merge and i + 1 < k:
                if i + 2 < k and _lookup(data, bpos[cuts[i]], bpos[cuts[i + 3]], mg_keys, mg_idx) >= 0:
                    m += 1
                    work[m] = cuts[i + 3]
                    i += 3
                    continue
                if _lookup(data, bpos[cuts[i]], bpos[cuts[i + 2]], mg_keys, mg_idx) >= 0:
                    m += 1
                    work[m] = cuts[i + 2]
                    i += 2
                    continue
            m += 1
            work[m] = cuts[i + 1]
            i += 1
        for j in range(1, m + 1):
            cuts[j] = work[j]
        k = m
    return k


@_compiled
def _sizes(data, offsets, cls):  # noqa: ANN001, ANN202
    """(code points outside whitespace: at most that many tokens, the longest chunk, chunks with an astral
    or Python-space code point): the kernel allocates once (growing arrays in its loop slows it 3x)."""
    total = 0
    longest = 0
    odd_chunks = 0
    for d in range(offsets.shape[0] - 1):
        n = 0
        odd = False
        for i in range(offsets[d], offsets[d + 1] + 1):
            if i < offsets[d + 1]:
                lead = data[i]
                if lead & 0xC0 == 0x80:  # a continuation byte
                    continue
                cp, size = decode_utf8(data, i)
                sep = cp < 0x10000 and (cls[cp] & _WS) != 0
            else:
                sep = True
                cp = 0
            if not sep:
                n += 1
                if cp >= 0x10000 or cls[cp] & _PYSPACE:
                    odd = True
            elif n:
                total += n
                longest = max(longest, n)
                odd_chunks += odd
                n = 0
                odd = False
    return total, longest, odd_chunks


@_compiled
def _split(data, offsets, cls, sp_keys, sp_idx, sp_part_off, sp_part_len, sp_max, un_keys, un_idx,  # noqa: ANN001, ANN202
           mg_keys, mg_idx, max_unit, max_merge, cps, bpos, cuts, work, most_tokens, odd_chunks):
    """Tokens of every text as byte ranges (tok_s, tok_e); a fallback chunk is one entry with
    tok_s = -1 - its index in (fb_s, fb_e). doc_tok[d] is the first entry of document d. cps, bpos,
    cuts and work are scratch arrays of one chunk (longest + 2 entries)."""
    n_docs = offsets.shape[0] - 1
    tok_s = np.empty(most_tokens, dtype=np.int64)
    tok_e = np.empty(most_tokens, dtype=np.int64)
    fb_s = np.empty(odd_chunks, dtype=np.int64)
    fb_e = np.empty(odd_chunks, dtype=np.int64)
    doc_tok = np.empty(n_docs + 1, dtype=np.int64)
    data, offsets, cls = _borrow(data), _borrow(offsets), _borrow(cls)
    sp_keys, sp_idx, sp_part_off, sp_part_len = _borrow(sp_keys), _borrow(sp_idx), _borrow(sp_part_off), \
        _borrow(sp_part_len)
    un_keys, un_idx, mg_keys, mg_idx = _borrow(un_keys), _borrow(un_idx), _borrow(mg_keys), _borrow(mg_idx)
    cps, bpos, cuts, work = _borrow(cps), _borrow(bpos), _borrow(cuts), _borrow(work)
    nt = 0
    nf = 0
    for d in range(n_docs):
        doc_tok[d] = nt
        i, stop = offsets[d], offsets[d + 1]
        n = 0
        odd = False
        while True:
            if i < stop:
                cp, size = decode_utf8(data, i)
                sep = cp < 0x10000 and (cls[cp] & _WS) != 0
            else:
                sep = True
                size = 0
                cp = 0
            if not sep:
                cps[n] = cp
                bpos[n] = i
                n += 1
                if cp >= 0x10000 or cls[cp] & _PYSPACE:
                    odd = True
            elif n:  # a chunk ends at i
                bpos[n] = i
                if odd:
                    fb_s[nf] = bpos[0]
                    fb_e[nf] = i
                    tok_s[nt] = -1 - nf
                    tok_e[nt] = i
                    nt += 1
                    nf += 1
                elif _rust_inert(cps, bpos, data, 0, n, cls, sp_keys, sp_idx, sp_max, un_keys, un_idx):
                    tok_s[nt] = bpos[0]
                    tok_e[nt] = i
                    nt += 1
                else:  # the fast paths of `words._split_words_reference` decide first, as they did there
                    k = _tokenize(cps, bpos, data, n, cuts, work, cls, sp_keys, sp_idx, sp_part_off,
                                  sp_part_len, sp_max, un_keys, un_idx, mg_keys, mg_idx,
                                  max_unit, max_merge)
                    for j in range(k):
                        tok_s[nt] = bpos[cuts[j]]
                        tok_e[nt] = bpos[cuts[j + 1]]
                        nt += 1
                n = 0
                odd = False
            if i >= stop:
                break
            i += size
    doc_tok[n_docs] = nt
    return tok_s[:nt], tok_e[:nt], doc_tok, fb_s[:nf], fb_e[:nf]


@_compiled
def _assemble(data, tok_s, tok_e, doc_tok, fb_s, fb_off, fb_len):  # noqa: ANN001, ANN202
    """The token bytes laid end to end, their offsets and the per-document list offsets."""
    n_docs = doc_tok.shape[0] - 1
    n_out = 0
    n_bytes = 0
    for t in range(tok_s.shape[0]):
        if tok_s[t] >= 0:
            n_out += 1
        else:
            f = -1 - tok_s[t]
            n_out += fb_off[f + 1] - fb_off[f]
        n_bytes += tok_e[t] - (tok_s[t] if tok_s[t] >= 0 else fb_s[-1 - tok_s[t]])
    out = np.empty(n_bytes, dtype=np.uint8)
    out_off = np.empty(n_out + 1, dtype=np.int64)
    list_off = np.empty(n_docs + 1, dtype=np.int64)
    j = 0
    pos = 0
    out_off[0] = 0
    for d in range(n_docs):
        list_off[d] = j
        for t in range(doc_tok[d], doc_tok[d + 1]):
            if tok_s[t] >= 0:
                for x in range(tok_s[t], tok_e[t]):
                    out[pos] = data[x]
                    pos += 1
                j += 1
                out_off[j] = pos
            else:
                f = -1 - tok_s[t]
                x = fb_s[f]
                for q in range(fb_off[f], fb_off[f + 1]):
                    for _ in range(fb_len[q]):
                        out[pos] = data[x]
                        pos += 1
                        x += 1
                    j += 1
                    out_off[j] = pos
    list_off[n_docs] = j
    return out, out_off, list_off


def split_words_arrow(texts: pl.Series, split_chunks: Callable[[list[str]], list[list[str]]]
                      ) -> tuple[pa.LargeListArray, int, int]:
    """(tokens of every text as an Arrow list<large_string> array, chunks left to `split_chunks`, tokens).

    split_chunks gives the tokens of each of the distinct chunks the tables cannot read (astral code
    points, Python-only spaces). Nulls count as empty texts. Arrow, not a polars series: a series costs a
    copy of every token (polars' string layout), which the Gopher statistics do not need."""
    data, offsets = string_buffers(texts.fill_null("").rechunk().to_arrow())
    tables = _tables()
    most_tokens, longest, odd_chunks = _sizes(data, offsets, tables[0])
    scratch = [np.empty(longest + 2, dtype=np.int64) for _ in range(4)]
    tok_s, tok_e, doc_tok, fb_s, fb_e = _split(data, offsets, *tables, *scratch, most_tokens, odd_chunks)
    raw = memoryview(data)
    chunks = [bytes(raw[s:e]).decode() for s, e in zip(fb_s.tolist(), fb_e.tolist(), strict=True)]
    distinct = list(dict.fromkeys(chunks))
    lens = {c: [len(t.encode()) for t in tokens] for c, tokens in zip(distinct, split_chunks(distinct), strict=True)}
    lengths = [n for c in chunks for n in lens[c]]
    counts = np.zeros(len(chunks) + 1, dtype=np.int64)
    counts[1:] = [len(lens[c]) for c in chunks]
    fb_off = np.cumsum(counts)
    out, out_off, list_off = _assemble(data, tok_s, tok_e, doc_tok, fb_s, fb_off, np.array(lengths, dtype=np.int64))
    strings = pa.LargeStringArray.from_buffers(len(out_off) - 1, pa.py_buffer(out_off), pa.py_buffer(out))
    return pa.LargeListArray.from_arrays(pa.array(list_off), strings), len(fb_s), len(out_off) - 1
