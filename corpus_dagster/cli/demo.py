"""`make demo`: build a ledger of real text on this machine and run the whole graph through Dagster.

Sources (no network): Python's documentation topics (pydoc_data), the license files of the packages
installed in this virtualenv (real near duplicates and e-mail addresses), and /usr/share/doc/*/copyright
where the machine has it (skipped with a message where not).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
from pathlib import Path

from corpus_dagster.cli.run import EXIT_CODES, default_dagster_home, run_pipeline
from corpus_dagster.core.atomic import atomic_write_bytes
from corpus_dagster.core.config import load_config, packaged_config_path
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, write_ledger


def demo_sources(inputs: Path) -> list[Source]:
    """Write the demo inputs that need writing and return the demo ledger rows."""
    from pydoc_data.topics import topics

    lines = "".join(
        json.dumps({"text": topics[name], "url": f"https://docs.python.org/3/reference/#{name}"}, ensure_ascii=False) + "\n"
        for name in sorted(topics)
    )
    topics_file = inputs / "pydoc_topics.jsonl"
    atomic_write_bytes(topics_file, lines.encode("utf-8"))
    sources = [
        Source("pydoc-topics", (f"file://{topics_file}",), "jsonl", "PSF-2.0", url_field="url",
               description="Python documentation topics from pydoc_data"),
    ]
    site = Path(sysconfig.get_paths()["purelib"])
    sources.append(
        Source("pkg-licenses", (f"file://{site}/*.dist-info/LICENSE*", f"file://{site}/*.dist-info/licenses/**/*",
                                f"file://{site}/*.dist-info/COPYING*"),
               "text", "NOASSERTION", description="License files of the packages in the project virtualenv")
    )
    if any(Path("/usr/share/doc").glob("*/copyright")):
        sources.append(Source("debian-copyright", ("file:///usr/share/doc/*/copyright",), "text", "NOASSERTION",
                              description="Debian package copyright files"))
    else:
        print("demo: /usr/share/doc/*/copyright not found on this machine; skipping that source")
    return sources


def main(argv: list[str] | None = None) -> int:
    """Write the demo ledger and run the whole graph; returns the exit code (the same as corpus_dagster.run)."""
    parser = argparse.ArgumentParser(prog="python -m corpus_dagster.cli.demo", epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Write a ledger of real text found on this machine and build it.")
    parser.add_argument("config", nargs="?", default=None, help="corpus config (default: the packaged demo config)")
    parser.add_argument("--keep-going", action="store_true", help="build every source it can; report failures at the end")
    parser.add_argument("--log-file", type=Path, default=None, help="default: ARTIFACTS/logs/run-<time>.log")
    try:
        args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    except SystemExit as exc:
        return int(exc.code or 0)
    log_file = args.log_file.resolve() if args.log_file else None
    config_path = str(Path(args.config).resolve()) if args.config else str(packaged_config_path())
    home = default_dagster_home()
    os.chdir(home.parent)  # artifacts and Dagster state of the demo live in the checkout (or the working folder)
    os.environ.setdefault("DAGSTER_HOME", str(home))
    layout = Layout.from_config(load_config(config_path))
    sources = demo_sources(layout.root / "demo-inputs")
    write_ledger(layout.ledger, sources)
    print(f"demo: ledger {layout.ledger} with {len(sources)} sources: {', '.join(s.source_id for s in sources)}")
    return run_pipeline(config_path, prefix="demo", keep_going=args.keep_going, log_file=log_file)


if __name__ == "__main__":
    sys.exit(main())
