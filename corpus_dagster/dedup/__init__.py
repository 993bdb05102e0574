"""Dedup and decontamination (data.04): exact dedup, MinHash near-dedup with verified clusters,
n-gram decontamination against protected evaluation sets. No dagster import.

The stage runs in `corpus_dagster.dedup.driver` and is read through `corpus_dagster.dedup.outputs`; the logic entry
point is run_dedup(sources, cfg, out_dir, workers): the global step writing dropped/clusters/pairs.parquet from the
clean documents and the signature files of the minhash stage (`corpus_dagster.minhash`).

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.dedup.corpus_dedup": "CLUSTERS_SCHEMA DROPPED_SCHEMA DedupSource PAIRS_SCHEMA run_dedup",
})
