"""Token streams (data.07): tokenize published shards into Megatron-LM indexed datasets. No dagster here.

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.core.errors": "TokenStreamError TokenizerLoadError",
    "corpus_dagster.lib.tokenizers": "LoadedTokenizer load_tokenizer",
    "corpus_dagster.tokenize.checks": "CheckReport check_counts check_decode_sample check_rebuild",
    "corpus_dagster.tokenize.driver": "TOKENS_UNITS TokensResult run_token_streams",
    "corpus_dagster.tokenize.indexed": "SplitWriter encode_index read_index token_dtype",
    "corpus_dagster.tokenize.manifest": "COUNTS_NAME MANIFEST_NAME read_manifest",
    "corpus_dagster.tokenize.streams": "BuildResult build_token_streams",
})
