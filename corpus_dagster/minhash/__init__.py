"""Per-source MinHash signatures: the input of the global dedup's LSH step and of the analysis. No dagster import.

The stage runs in `corpus_dagster.minhash.driver` and is read through `corpus_dagster.minhash.outputs`; the logic entry
point is compute_signatures(doc_files, out_path, cfg, workers): one source's signature file.

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "compute_signatures": "corpus_dagster.minhash.signatures",
    "signature_schema": "corpus_dagster.minhash.signatures",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
