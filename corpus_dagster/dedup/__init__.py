"""Dedup and decontamination (data.04): exact dedup, MinHash near-dedup with verified clusters,
n-gram decontamination against protected evaluation sets. Pure logic: no dagster import.

Entry points for the Dagster layer:
- compute_signatures(doc_files, out_path, cfg, workers): one source's signature file (cached per source);
- run_dedup(sources, cfg, out_dir, workers): the global step writing dropped/clusters/pairs.parquet;
- minhash_cluster(kept_ids, clusters_path): the shards' minhash_cluster column from clusters.parquet.
"""

from corpus_dagster.dedup.annotate import minhash_cluster
from corpus_dagster.dedup.pipeline import (
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
    "minhash_cluster",
    "run_dedup",
    "signature_schema",
]
