"""`python -m corpus_dagster.analysis`."""

import sys

from corpus_dagster.analysis.cli import main

sys.exit(main())
