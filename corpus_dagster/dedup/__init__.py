"""Dedup and decontamination (data.04): exact dedup, MinHash near-dedup with verified clusters,
n-gram decontamination against protected evaluation sets. No dagster import.

The stage runs in `corpus_dagster.dedup.driver` and is read through `corpus_dagster.dedup.outputs`; the logic entry
point is run_dedup(sources, cfg, out_dir, workers): the global step writing dropped/clusters/pairs.parquet from the
clean documents and the signature files of the minhash stage (`corpus_dagster.minhash`).

The names below load on first use, so importing a light module of this package (its read face,
`outputs`) does not load the rest.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "CLUSTERS_SCHEMA": "corpus_dagster.dedup.corpus_dedup",
    "DROPPED_SCHEMA": "corpus_dagster.dedup.corpus_dedup",
    "PAIRS_SCHEMA": "corpus_dagster.dedup.corpus_dedup",
    "DedupSource": "corpus_dagster.dedup.corpus_dedup",
    "run_dedup": "corpus_dagster.dedup.corpus_dedup",
}
__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
