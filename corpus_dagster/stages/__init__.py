"""Stage drivers: glue between the on-disk layout and the pure stage logic (no dagster imports).

Each driver finds its inputs through `corpus_dagster.store`, caches its work under a key of its
inputs and settings (so reruns and newly added sources redo only what changed), and writes atomically.
"""
