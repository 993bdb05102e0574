"""One document's journey through the stages, read from stage outputs only (`journey.py`);
`python -m corpus_dagster.explain` is its command line (`cli/explain.py`).

Its names load on first use (`core.lazy`): importing its read face (`outputs`) loads nothing else.
"""

from corpus_dagster.core.lazy import lazy_names

__getattr__, __all__ = lazy_names(__name__, {
    "corpus_dagster.explain.journey": "DocumentNotFound explain first_published_id rejection render",
})
