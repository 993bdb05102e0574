"""`python -m corpus_dagster.run CONFIG`: the stable entry point; the command lives in corpus_dagster.cli.run."""

import sys

from corpus_dagster.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
