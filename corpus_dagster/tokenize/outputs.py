"""Reading the tokenize stage's outputs: the only way the analysis and release stages, explain and the
Dagster layer see the token streams.

The per-document token counts file, and the token manifest's names and readers (`read_manifest`,
`stream_counts`, `COUNTS_NAME`, `MANIFEST_NAME`), which load the tokenizers module and so load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from corpus_dagster.core import records
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.lazy import lazy_names

if TYPE_CHECKING:
    from corpus_dagster.tokenize.checks import stream_counts
    from corpus_dagster.tokenize.manifest import COUNTS_NAME, MANIFEST_NAME, read_manifest

__all__ = ["COUNTS_NAME", "MANIFEST_NAME", "STAGE", "read_manifest", "stream_counts", "token_counts_file"]

STAGE = "tokens"
# a token manifest, checked against its schema; the .bin/.idx pairs a manifest names
__getattr__, _ = lazy_names(__name__, {
    "corpus_dagster.tokenize.manifest": "COUNTS_NAME MANIFEST_NAME read_manifest",
    "corpus_dagster.tokenize.checks": "stream_counts",
})


def token_counts_file(layout: Layout) -> Path:
    """The per-document token counts of the current token streams (id, n_tokens, tokenizer, split)."""
    record = records.require_record(layout.stage(STAGE), "token_streams")
    from corpus_dagster.tokenize.manifest import COUNTS_NAME

    streams = records.record_files(layout.stage(STAGE), record, "streams")  # checked against the record
    return next(p for p in streams if p.name == COUNTS_NAME)
