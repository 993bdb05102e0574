"""Per-source MinHash signatures: the input of the global dedup's LSH step and of the analysis. No dagster import.

The stage's reading and writing is in `corpus_dagster.minhash.driver`; the logic entry point is
compute_signatures(doc_files, out_path, cfg, workers): one source's signature file.
"""

from corpus_dagster.minhash.signatures import compute_signatures, signature_schema

__all__ = ["compute_signatures", "signature_schema"]
