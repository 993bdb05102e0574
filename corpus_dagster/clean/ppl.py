"""CCNet-style perplexity filter: a KenLM model scores each document line by line.

doc perplexity = 10 ** (-(sum of log10 p(line </s> | <s>)) / (sum of (words + 1))), summed over the
non-blank lines (CCNet's "paragraphs"), as in CCNet's perplexity.py. Lines are normalized like
CCNet's text_normalizer when `normalize` is on (lower case, accents stripped, digits -> 0, whitespace
collapsed); the model must have been trained on text normalized the same way. Off by default.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.declare import Filter, Measures, rule
from corpus_dagster.clean.verdict import Verdict
from corpus_dagster.core.errors import PerplexityModelError
from corpus_dagster.core.settings import CleanPplSettings

_DIGITS = re.compile(r"\d")
_MODELS: dict[str, Any] = {}


def load_model(path: str | None) -> Any:
    """The KenLM model at `path` (ARPA or binary), loaded once per process."""
    try:
        import kenlm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PerplexityModelError(
            "clean.ppl is enabled but the `kenlm` package is not installed: "
            "pip install kenlm (or the corpus_dagster[ppl] extra); it compiles KenLM, so it needs a C++ "
            "compiler and cmake"
        ) from exc
    if not path:
        raise PerplexityModelError("clean.ppl is enabled but clean.ppl.model_path is not set")
    resolved = str(Path(path).expanduser().resolve())
    if resolved not in _MODELS:
        if not Path(resolved).is_file():
            raise PerplexityModelError(f"clean.ppl.model_path: KenLM model file not found: {resolved}")
        _MODELS[resolved] = kenlm.Model(resolved)
    return _MODELS[resolved]


def normalize_line(line: str) -> str:
    """CCNet's normalization: lower case, accents stripped, every digit 0, single spaces."""
    line = unicodedata.normalize("NFD", line.lower())
    line = "".join(c for c in line if unicodedata.category(c) != "Mn")
    return " ".join(_DIGITS.sub("0", line).split())


def doc_perplexity(text: str, model: Any, normalize: bool = True) -> float | None:
    """Perplexity of a document over its non-blank lines; None when it has no words."""
    log_score, length = 0.0, 0
    for line in text.split("\n"):
        line = normalize_line(line) if normalize else " ".join(line.split())
        if not line:
            continue
        log_score += model.score(line, bos=True, eos=True)
        length += len(line.split()) + 1
    if length == 0:
        return None
    return float(10.0 ** (-log_score / length))


class PplMeasures(Measures):
    @cached_property
    def perplexity(self) -> np.ndarray:
        """Perplexity per document, NaN for a document without words (which no limit drops)."""
        model = load_model(self.cfg.model_path)
        values = [doc_perplexity(t, model, self.cfg.normalize) for t in self.batch.texts]
        return np.array([np.nan if x is None else x for x in values], dtype=np.float64)


PPL = Filter("ppl", (
    rule("ppl", "perplexity over the non-blank lines", (">", "max_perplexity", "perplexity"), also=("normalize",)),
), measures=PplMeasures, base=True, enabled=False)


def perplexity_filter(batch: DocBatch, cfg: CleanPplSettings) -> Verdict:
    """Drop documents whose perplexity is over `max_perplexity`."""
    return PPL.verdict(batch, cfg)
