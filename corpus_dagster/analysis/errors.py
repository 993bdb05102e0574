"""Errors of the corpus analysis, naming the file or setting to fix."""

from __future__ import annotations

from corpus_dagster.errors import CorpusError


class AnalysisError(CorpusError):
    """The analysis cannot run on its input or settings; the message names the file or key and the fix."""
