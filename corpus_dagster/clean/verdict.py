"""First-match bookkeeping: one reason code and one measured value per document."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class Verdict:
    """Reasons (None = passed) and tripping values for a batch; the first rule that fires wins."""

    def __init__(self, n: int):
        self.reason: np.ndarray = np.full(n, None, dtype=object)
        self.value: np.ndarray = np.full(n, np.nan, dtype=np.float64)
        self.open: np.ndarray = np.ones(n, dtype=bool)

    def apply(self, code: str, fired: np.ndarray, value: np.ndarray | float) -> None:
        """Record `code` for documents still open where `fired` holds."""
        hit = self.open & fired
        if hit.any():
            self.reason[hit] = code
            self.value[hit] = value[hit] if isinstance(value, np.ndarray) else value
            self.open &= ~hit

    def merge(self, index: np.ndarray, other: Verdict) -> None:
        """Fold the verdict of the sub-batch at `index` (documents still open here) into this one."""
        hit = other.reason != None  # noqa: E711 - elementwise on an object array
        self.reason[index[hit]] = other.reason[hit]
        self.value[index[hit]] = other.value[hit]
        self.open[index[hit]] = False

    def open_index(self) -> np.ndarray:
        """Positions of documents no rule has dropped yet."""
        return np.flatnonzero(self.open)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 where den is 0 (an empty document has no share of anything)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def char_class(chars: Iterable[str]) -> str:
    """A regex character class matching exactly `chars` (escaping what the Rust regex syntax needs)."""
    return "[" + "".join("\\" + c if c.isascii() and not c.isalnum() else c for c in chars) + "]"
