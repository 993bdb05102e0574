"""Shared fixtures: generated corpora, configs, an ephemeral Dagster instance."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def setup_dir(tmp_path: Path) -> Path:
    """A generated three-source corpus with its ledger and config; returns the config path."""
    from corpus_factory import write_setup

    return write_setup(tmp_path)
