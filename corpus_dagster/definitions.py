"""The Definitions that `dagster dev` (workspace.yaml) loads: built from CORPUS_CONFIG when the location loads."""

import dagster as dg

from corpus_dagster.defs import build_definitions
from corpus_dagster.defs.resources import default_corpus_config


@dg.definitions
def defs() -> dg.Definitions:
    """Load the corpus config named by CORPUS_CONFIG (else the packaged demo config) and build every definition."""
    return build_definitions(default_corpus_config())
