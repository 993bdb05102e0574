"""Token streams (data.07): tokenize published shards into Megatron-LM indexed datasets. No dagster here."""

from corpus_dagster.core.errors import TokenizerLoadError, TokenStreamError
from corpus_dagster.lib.tokenizers import LoadedTokenizer, load_tokenizer
from corpus_dagster.tokenize.checks import CheckReport, check_counts, check_decode_sample, check_rebuild
from corpus_dagster.tokenize.driver import TOKENS_UNITS, TokensResult, run_token_streams
from corpus_dagster.tokenize.indexed import SplitWriter, encode_index, read_index, token_dtype
from corpus_dagster.tokenize.manifest import COUNTS_NAME, MANIFEST_NAME, read_manifest
from corpus_dagster.tokenize.streams import BuildResult, build_token_streams

__all__ = [
    "COUNTS_NAME",
    "MANIFEST_NAME",
    "BuildResult",
    "CheckReport",
    "LoadedTokenizer",
    "SplitWriter",
    "TOKENS_UNITS",
    "TokenStreamError",
    "TokenizerLoadError",
    "TokensResult",
    "build_token_streams",
    "check_counts",
    "check_decode_sample",
    "check_rebuild",
    "encode_index",
    "load_tokenizer",
    "read_index",
    "read_manifest",
    "run_token_streams",
    "token_dtype",
]
