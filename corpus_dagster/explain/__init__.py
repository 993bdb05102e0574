"""One document's journey through the stages, read from stage outputs only (`journey.py`);
`python -m corpus_dagster.explain` is its command line (`cli/explain.py`).

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "DocumentNotFound": "corpus_dagster.explain.journey",
    "explain": "corpus_dagster.explain.journey",
    "first_published_id": "corpus_dagster.explain.journey",
    "rejection": "corpus_dagster.explain.journey",
    "render": "corpus_dagster.explain.journey",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
