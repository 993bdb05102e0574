"""One document's journey through the stages, read from stage outputs only (`journey.py`);
`python -m corpus_dagster.explain` is its command line (`cli/explain.py`)."""

from corpus_dagster.explain.journey import DocumentNotFound, explain, first_published_id, rejection, render

__all__ = ["DocumentNotFound", "explain", "first_published_id", "rejection", "render"]
