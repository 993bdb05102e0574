"""Errors of the dedup stage, naming the file and what to do about it."""

from __future__ import annotations

from corpus_dagster.errors import CorpusError


class DedupInputError(CorpusError):
    """An input of the dedup stage is missing, malformed or stale; the message names the file."""
