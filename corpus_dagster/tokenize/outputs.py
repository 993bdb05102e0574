"""Reading the tokenize stage's outputs: the only way the analysis and release stages, explain and the
Dagster layer see the token streams.

The per-document token counts file, and the token manifest's names and readers (`read_manifest`,
`stream_counts`, `COUNTS_NAME`, `MANIFEST_NAME`), which load the tokenizers module and so load on first use.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout

if TYPE_CHECKING:
    from corpus_dagster.tokenize.checks import stream_counts
    from corpus_dagster.tokenize.manifest import COUNTS_NAME, MANIFEST_NAME, read_manifest

__all__ = ["COUNTS_NAME", "MANIFEST_NAME", "STAGE", "read_manifest", "stream_counts", "token_counts_file"]

STAGE = "tokens"
_LAZY = {
    "COUNTS_NAME": "corpus_dagster.tokenize.manifest",
    "MANIFEST_NAME": "corpus_dagster.tokenize.manifest",
    "read_manifest": "corpus_dagster.tokenize.manifest",  # a token manifest, checked against its schema
    "stream_counts": "corpus_dagster.tokenize.checks",  # the .bin/.idx pairs a manifest names
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def token_counts_file(layout: Layout) -> Path:
    """The per-document token counts of the current token streams (id, n_tokens, tokenizer, split)."""
    record = records.require_record(layout.stage(STAGE), "token_streams")
    from corpus_dagster.tokenize.manifest import COUNTS_NAME

    streams = records.record_files(layout.stage(STAGE), record, "streams")  # checked against the record
    return next(p for p in streams if p.name == COUNTS_NAME)
