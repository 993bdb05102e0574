"""What the compiled kernels (numba) of every stage share: how they are compiled and cached, and UTF-8 decoding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

KERNELS: list = []
"""Every kernel `compiled` made, in import order: what the warm-up (`cli.warm`) must reach."""


def compiled(fn):  # noqa: ANN001, ANN201
    """njit with the machine code cached on disk; without a writable cache location (a read-only install
    and no user cache folder) numba refuses to cache, and each process compiles once instead."""
    try:
        kernel = njit(cache=True, nogil=True, boundscheck=False)(fn)
    except RuntimeError:
        kernel = njit(nogil=True, boundscheck=False)(fn)
    KERNELS.append(kernel)
    return kernel


def string_buffers(strings: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, offsets into them, one more than the strings) of a string array, as large_string
    buffers a kernel can read; no copy when the array is one large_string chunk already. Offsets keep the
    array's own slice; a null reads as its (empty) slot."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if strings.type != pa.large_string():
        strings = strings.cast(pa.large_string())
    _, off_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size else \
        np.zeros(1, dtype=np.uint8)
    return data, offsets


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
