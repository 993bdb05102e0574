"""`make demo`: build a ledger of real text on this machine and run the whole graph through Dagster.

Sources (no network): Python's documentation topics (pydoc_data), the license files of the packages
installed in this virtualenv (real near duplicates and e-mail addresses), and /usr/share/doc/*/copyright
where the machine has it (skipped with a message where not).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import time
from pathlib import Path

from corpus_dagster.atomic import atomic_write_bytes
from corpus_dagster.config import load_config
from corpus_dagster.layout import Layout
from corpus_dagster.ledger import Source, write_ledger

PROJECT = Path(__file__).resolve().parent.parent


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


def ensure_dagster_home(home: Path) -> None:
    """A SQLite-backed instance folder with telemetry off (no network at run time)."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the demo end to end; returns the exit code."""
    import dagster as dg

    from corpus_dagster.defs.resources import CorpusConfig
    from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources

    argv = argv if argv is not None else sys.argv[1:]
    config_path = argv[0] if argv else str(PROJECT / "configs" / "demo.yaml")
    os.environ.setdefault("DAGSTER_HOME", str(PROJECT / ".dagster_home"))
    ensure_dagster_home(Path(os.environ["DAGSTER_HOME"]))
    start = time.monotonic()
    os.chdir(PROJECT)
    resolved = load_config(config_path)
    layout = Layout.from_config(resolved)
    sources = demo_sources(layout.root / "demo-inputs")
    write_ledger(layout.ledger, sources)
    print(f"demo: ledger {layout.ledger} with {len(sources)} sources: {', '.join(s.source_id for s in sources)}")
    corpus = CorpusConfig(config_path=config_path)
    with dg.DagsterInstance.get() as instance:
        def report(sid: str, res: dg.ExecuteInProcessResult) -> None:
            for mat in res.get_asset_materialization_events():
                key = mat.asset_key.to_user_string()
                meta = mat.materialization.metadata
                keys = ("documents", "quarantined", "kept", "rejected", "signatures", "redactions")
                shown = {k: getattr(meta[k], "value", meta[k]) for k in keys if k in meta}
                print(f"demo: {sid:>18} {key:<20} {shown}")

        materialize_sources(corpus, instance, [s.source_id for s in sources], on_result=report)
        result = materialize_global(corpus, instance)
        checks = check_results(result)
    print(f"demo: shards   {layout.shards}")
    for shard in sorted(layout.shards.glob("shard-*.parquet")):
        print(f"demo:   {shard.name}  {shard.stat().st_size:>10,} bytes")
    manifest = json.loads(layout.manifest.read_text())
    print(f"demo: manifest {layout.manifest}  ({manifest['n_docs']} documents in {manifest['n_shards']} shards)")
    for asset, name, passed, meta in checks:
        print(f"demo: check {asset}/{name}: {'PASSED' if passed else 'FAILED'}" + ("" if passed else f" {meta}"))
    failed = [c for c in checks if not c[2]]
    print(f"demo: done in {time.monotonic() - start:.1f} s; {len(checks) - len(failed)}/{len(checks)} checks passed; "
          f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} (open the UI with `make ui`)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
