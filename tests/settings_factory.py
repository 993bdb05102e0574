"""Sections of typed settings for tests of one stage's logic, built as a config file's would be (validated
against the schema, defaults filled in): `make_settings` in conftest.py for whole settings."""

from __future__ import annotations

from typing import Any

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import NearDupSettings, PiiSettings


def pii_settings(overrides: dict[str, Any] | None = None) -> PiiSettings:
    """The `pii` settings of a config with these overrides, e.g. `pii_settings({"phones": {"enabled": False}})`;
    no argument gives the defaults."""
    return load_settings(None, {"pii": overrides} if overrides else None).pii


def near_dup_settings(overrides: dict[str, Any] | None = None) -> NearDupSettings:
    """The `near_dup` settings of a config with these overrides, e.g. `near_dup_settings({"num_perm": 16})`."""
    return load_settings(None, {"near_dup": overrides} if overrides else None).near_dup
