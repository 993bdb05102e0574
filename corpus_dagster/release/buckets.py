"""Length buckets: `bucket_width` tokens from `min_tokens`, the top bucket closed at `max_tokens`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus_dagster.core.errors import ConfigError
from corpus_dagster.core.settings import ReleaseSettings

BELOW = -1  # shorter than min_tokens: left out and counted
ABOVE = -2  # longer than max_tokens: cut into segments (never written whole)


@dataclass(frozen=True)
class Buckets:
    """Bucket k holds token counts [low(k), high(k)], inclusive; the last high is max_tokens."""

    min_tokens: int
    max_tokens: int
    width: int

    @classmethod
    def from_settings(cls, settings: ReleaseSettings) -> Buckets:
        b = cls(int(settings.min_tokens), int(settings.max_tokens), int(settings.bucket_width))
        if b.max_tokens <= b.min_tokens:
            raise ConfigError(
                "release", [f"$.release.max_tokens: {b.max_tokens} must be above min_tokens {b.min_tokens}"]
            )
        return b

    @property
    def count(self) -> int:
        return -(-(self.max_tokens - self.min_tokens) // self.width)

    def low(self, k: int) -> int:
        return self.min_tokens + k * self.width

    def high(self, k: int) -> int:
        return min(self.low(k) + self.width - 1, self.max_tokens) if k < self.count - 1 else self.max_tokens

    def folder(self, k: int) -> str:
        """`b{NN}_{low}-{high}`, e.g. b07_8192-9215."""
        return f"b{k:02d}_{self.low(k)}-{self.high(k)}"

    def index(self, n_tokens: np.ndarray) -> np.ndarray:
        """Bucket of each count (int32): BELOW under min_tokens, ABOVE over max_tokens."""
        n = np.asarray(n_tokens, dtype=np.int64)
        k = np.minimum((n - self.min_tokens) // self.width, self.count - 1)
        k = np.where(n < self.min_tokens, BELOW, np.where(n > self.max_tokens, ABOVE, k))
        return k.astype(np.int32)
