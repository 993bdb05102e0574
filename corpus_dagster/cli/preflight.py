"""Checks of a config that only loading its tools can make, run before any Dagster run starts: the tokenizer
files and their special tokens, the release's buckets. A mistake here would otherwise surface minutes into a
build (a missing end-of-document token at token_streams); as a ConfigError the CLI exits 2 on one line."""

from __future__ import annotations

from corpus_dagster.core.errors import ConfigError, CorpusError
from corpus_dagster.core.settings import Settings


def preflight_problems(settings: Settings) -> list[str]:
    """What would fail later, one line each: the tokenize section's tokenizer with its eod (and bos) token,
    the release's own tokenizer, the release's bucket settings."""
    from corpus_dagster.lib.tokenizers import load_tokenizer, tokenizer_from_config
    from corpus_dagster.release.buckets import Buckets
    from corpus_dagster.release.inputs import release_tokenizer_cfg

    problems = []
    try:
        load_tokenizer(settings.tokenize)  # the file, then eod_token and bos_token as single tokens of it
    except CorpusError as exc:
        problems.append(f"$.tokenize: {exc}")
    if settings.release.enabled:
        try:
            Buckets.from_settings(settings.release)
        except ConfigError as exc:
            problems += list(exc.violations)
        if settings.release.tokenizer is not None:
            try:
                tokenizer_from_config(release_tokenizer_cfg(settings.release, settings.tokenize), section="release.tokenizer")
            except CorpusError as exc:
                problems.append(f"$.release.tokenizer: {exc}")
    return problems


def preflight(settings: Settings, config_path: str) -> None:
    """Raise a ConfigError naming the config file and every problem preflight_problems finds."""
    problems = preflight_problems(settings)
    if problems:
        raise ConfigError(config_path, problems)
