"""Dedup and decontamination (data.04): exact dedup, MinHash near-dedup with verified clusters,
n-gram decontamination against protected evaluation sets. No dagster import.

The stage's reading and writing is in `corpus_dagster.dedup.driver`; the logic entry points are
- compute_signatures(doc_files, out_path, cfg, workers): one source's signature file;
- run_dedup(sources, cfg, out_dir, workers): the global step writing dropped/clusters/pairs.parquet.
"""

from corpus_dagster.dedup.corpus_dedup import (
    CLUSTERS_SCHEMA,
    DROPPED_SCHEMA,
    PAIRS_SCHEMA,
    DedupSource,
    run_dedup,
)
from corpus_dagster.dedup.signatures import compute_signatures, signature_schema

__all__ = [
    "CLUSTERS_SCHEMA",
    "DROPPED_SCHEMA",
    "PAIRS_SCHEMA",
    "DedupSource",
    "compute_signatures",
    "run_dedup",
    "signature_schema",
]
