"""`python -m corpus_dagster.explain <id or url> [--config FILE] [--json]`: print one document's journey.

Exit 0 with the journey (up to the stage where the document left the pipeline); exit 2 with one `error:` line
when the id is malformed, names an unknown source or a position no raw part holds, or the url is unknown."""

import argparse
import json
import os
import sys

from corpus_dagster.core.config import load_settings, packaged_config_path
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.storage import StorageError, StoreExtraMissing, sync
from corpus_dagster.explain.journey import explain, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus_dagster.explain", description=__doc__)
    parser.add_argument("document", help="a document id (<source_id>:<k>) or its url")
    parser.add_argument("--config", default=os.environ.get("CORPUS_CONFIG") or str(packaged_config_path()),
                        help="corpus config (default: CORPUS_CONFIG, else the demo config)")
    parser.add_argument("--artifacts", default=os.environ.get("CORPUS_ARTIFACTS"), help="override paths.artifacts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config, {"paths": {"artifacts": args.artifacts}} if args.artifacts else {})
        layout = Layout.from_config(settings.resolved)
        sync(layout.store())  # an artifacts store: this machine's mirror brought up to it first
        answer = explain(layout, settings, args.document)
    except StorageError as exc:  # the store failed (exit 3, as the run CLI's), unless an extra is missing (2)
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, StoreExtraMissing) else 3
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2, default=str) if args.json else render(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
