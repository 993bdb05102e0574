"""Token streams (data.07): tokenize published shards into Megatron-LM indexed datasets. No dagster here.

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "COUNTS_NAME": "corpus_dagster.tokenize.manifest",
    "MANIFEST_NAME": "corpus_dagster.tokenize.manifest",
    "BuildResult": "corpus_dagster.tokenize.streams",
    "CheckReport": "corpus_dagster.tokenize.checks",
    "LoadedTokenizer": "corpus_dagster.lib.tokenizers",
    "SplitWriter": "corpus_dagster.tokenize.indexed",
    "TokenStreamError": "corpus_dagster.core.errors",
    "TokenizerLoadError": "corpus_dagster.core.errors",
    "build_token_streams": "corpus_dagster.tokenize.streams",
    "check_counts": "corpus_dagster.tokenize.checks",
    "check_decode_sample": "corpus_dagster.tokenize.checks",
    "check_rebuild": "corpus_dagster.tokenize.checks",
    "encode_index": "corpus_dagster.tokenize.indexed",
    "load_tokenizer": "corpus_dagster.lib.tokenizers",
    "read_index": "corpus_dagster.tokenize.indexed",
    "read_manifest": "corpus_dagster.tokenize.manifest",
    "run_token_streams": "corpus_dagster.tokenize.driver",
    "TOKENS_UNITS": "corpus_dagster.tokenize.driver",
    "TokensResult": "corpus_dagster.tokenize.driver",
    "token_dtype": "corpus_dagster.tokenize.indexed",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
