"""Sections of typed settings for tests of one stage's logic, built as a config file's would be (validated
against the schema, defaults filled in): `make_settings` in conftest.py for whole settings."""

from __future__ import annotations

from typing import Any

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import PiiSettings


def pii_settings(overrides: dict[str, Any] | None = None) -> PiiSettings:
    """The `pii` settings of a config with these overrides, e.g. `pii_settings({"phones": {"enabled": False}})`;
    no argument gives the defaults."""
    return load_settings(None, {"pii": overrides} if overrides else None).pii
