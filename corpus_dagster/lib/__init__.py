"""Algorithms more than one stage uses: text normalization and words, word and shingle hashes, MinHash,
LSH banding, exact Jaccard over an on-disk shingle store, and tokenizers built from config.

Imports `core` only; every stage may import it. No dagster, no file layout.
"""
