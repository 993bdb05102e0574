"""`python -m corpus_dagster.run CONFIG [--keep-going] [--log-file PATH]`: the stable entry point (see cli/run.py)."""

import sys

from corpus_dagster.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
