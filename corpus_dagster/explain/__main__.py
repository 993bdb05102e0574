"""`python -m corpus_dagster.explain <id or url>`: the command line lives with the other CLIs."""

import sys

from corpus_dagster.cli.explain import main

sys.exit(main())
