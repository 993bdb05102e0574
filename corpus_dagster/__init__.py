"""corpus-dagster: deterministic pretraining corpora as a Dagster asset graph."""

# Part of every stage cache key: bump it when a change to stage logic must invalidate cached outputs.
__version__ = "0.1.0"
