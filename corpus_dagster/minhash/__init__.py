"""Per-source MinHash signatures: the input of the global dedup's LSH step and of the analysis. No dagster import.

The stage runs in `corpus_dagster.minhash.driver` and is read through `corpus_dagster.minhash.outputs`; the logic entry
point is compute_signatures(doc_files, out_path, cfg, workers): one source's signature file.

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.minhash.signatures": "compute_signatures signature_schema",
})
