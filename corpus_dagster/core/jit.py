"""What the compiled kernels (numba) of every stage share: how they are compiled and cached, and UTF-8 decoding."""

from __future__ import annotations

import numpy as np
from numba import njit


def compiled(fn):  # noqa: ANN001, ANN201
    """njit with the machine code cached on disk; without a writable cache location (a read-only install
    and no user cache folder) numba refuses to cache, and each process compiles once instead."""
    try:
        return njit(cache=True, nogil=True, boundscheck=False)(fn)
    except RuntimeError:
        return njit(nogil=True, boundscheck=False)(fn)


@njit(inline="always")
def decode_utf8(data, i):  # noqa: ANN001, ANN201 - numba infers the types
    """(code point, byte size) of the valid UTF-8 sequence at data[i] (Arrow strings are valid UTF-8)."""
    lead = np.int64(data[i])
    if lead < 0x80:
        return lead, 1
    if lead >= 0xF0:
        return ((lead & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) \
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F), 4
    if lead >= 0xE0:
        return ((lead & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return ((lead & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
