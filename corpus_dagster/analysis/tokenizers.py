"""Tokenizers for length counts, loaded offline by name or local tokenizer.json path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.lib.tokenizers import (
    ENCODING_ALIASES,
    TokenizerLoadError,
    tokenizer_from_config,
    tokenizer_spec_config,
)


class LengthTokenizer:
    """Counts text tokens (no BOS/EOD) of a batch of documents; `name` stands beside every count."""

    def __init__(self, spec: str) -> None:
        try:
            cfg = tokenizer_spec_config(spec)
            if cfg is None:
                raise AnalysisError(
                    f"analysis.tokenizers: {spec!r} is neither a known encoding ({sorted(ENCODING_ALIASES)}) nor "
                    "an existing tokenizer.json or folder; fix the name or the path"
                )
            self.impl = tokenizer_from_config(cfg, section="analysis.tokenizers")
        except TokenizerLoadError as exc:
            raise AnalysisError(f"analysis.tokenizers: cannot load {spec!r}: {exc}") from exc
        self.name: str = self.impl.name

    def count(self, texts: Sequence[str]) -> np.ndarray:
        """Token count of each text (int64)."""
        return np.asarray(self.impl.count_texts(list(texts)), dtype=np.int64).reshape(len(texts))


def load_tokenizers(specs: Sequence[str]) -> list[LengthTokenizer]:
    """Every configured tokenizer, refusing two that resolve to the same name."""
    toks = [LengthTokenizer(s) for s in specs]
    names = [t.name for t in toks]
    if len(set(names)) != len(names):
        raise AnalysisError(f"analysis.tokenizers: two entries resolve to the same tokenizer name: {names}")
    return toks
