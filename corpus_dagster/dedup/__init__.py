"""Dedup and decontamination (data.04): exact dedup, MinHash near-dedup with verified clusters,
n-gram decontamination against protected evaluation sets. No dagster import.

The stage's reading and writing is in `corpus_dagster.dedup.driver`; the logic entry point is
run_dedup(sources, cfg, out_dir, workers): the global step writing dropped/clusters/pairs.parquet from the
clean documents and the signature files of the minhash stage (`corpus_dagster.minhash`).
"""

from corpus_dagster.dedup.corpus_dedup import (
    CLUSTERS_SCHEMA,
    DROPPED_SCHEMA,
    PAIRS_SCHEMA,
    DedupSource,
    run_dedup,
)

__all__ = [
    "CLUSTERS_SCHEMA",
    "DROPPED_SCHEMA",
    "PAIRS_SCHEMA",
    "DedupSource",
    "run_dedup",
]
