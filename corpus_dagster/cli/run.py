"""`python -m corpus_dagster.cli.run CONFIG`: materialize every source, then the global assets, and report.

The same graph `dagster dev` shows, run in-process against the SQLite instance in DAGSTER_HOME, so the
runs appear in the UI afterwards.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from corpus_dagster.core.config import load_config
from corpus_dagster.core.layout import Layout

CHECKOUT = Path(__file__).resolve().parents[2]


def default_dagster_home() -> Path:
    """`.dagster_home` of the checkout when running from one (make demo, make ui), else of the working folder."""
    base = CHECKOUT if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "corpus_dagster").is_dir() else Path.cwd()
    return base / ".dagster_home"
SHOWN_KEYS = ("documents", "quarantined", "kept", "rejected", "signatures", "no_signature", "redactions")


def ensure_dagster_home(home: Path) -> None:
    """A SQLite-backed instance folder with telemetry off (no network at run time)."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n", encoding="utf-8")


def run_pipeline(config_path: str, prefix: str = "run") -> int:
    """Run everything for a config; prints progress, outputs and check results. Exit code 1 if a check failed."""
    import dagster as dg

    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.defs.resources import CorpusConfig
    from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources

    os.environ.setdefault("DAGSTER_HOME", str(default_dagster_home()))
    ensure_dagster_home(Path(os.environ["DAGSTER_HOME"]))
    start = time.monotonic()
    resolved = load_config(config_path)
    layout = Layout.from_config(resolved)
    sources = [s.source_id for s in load_ledger(layout.ledger)]
    corpus = CorpusConfig(config_path=str(Path(config_path).resolve()))

    def report(sid: str, res: dg.ExecuteInProcessResult) -> None:
        for mat in res.get_asset_materialization_events():
            meta = mat.materialization.metadata
            shown = {k: getattr(meta[k], "value", meta[k]) for k in SHOWN_KEYS if k in meta}
            print(f"{prefix}: {sid:>18} {mat.asset_key.to_user_string():<20} {shown}", flush=True)

    with dg.DagsterInstance.get() as instance:
        materialize_sources(corpus, instance, sources, on_result=report)
        print(f"{prefix}: global assets (dedup, scrub, shards, manifest, tokens, analysis, release)", flush=True)
        result = materialize_global(corpus, instance)
        checks = check_results(result)
    print(f"{prefix}: shards   {layout.shards}")
    for shard in sorted(layout.shards.glob("shard-*.parquet")):
        print(f"{prefix}:   {shard.name}  {shard.stat().st_size:>12,} bytes")
    manifest = json.loads(layout.manifest.read_text())
    print(f"{prefix}: manifest {layout.manifest}  ({manifest['n_docs']} documents in {manifest['n_shards']} shards)")
    for key in ("filters", "repairs", "dedup", "pii"):
        if key in manifest:
            print(f"{prefix}:   {key}: {json.dumps(manifest[key])}")
    tokens = layout.tokens / "_TOKENS.json"
    if tokens.exists():
        info = json.loads(tokens.read_text())
        per_split = ", ".join(f"{k}: {v['n_tokens']:,} tokens / {v['n_docs']:,} docs" for k, v in info["splits"].items())
        print(f"{prefix}: tokens   {layout.tokens}  ({per_split}; tokenizer {info['tokenizer']['name']})")
    report = layout.analysis / "REPORT.md"
    if report.exists():
        print(f"{prefix}: analysis {report}")
    card = layout.release(resolved["release"]["name"] or resolved["dataset"]) / "README.md"
    if card.exists():
        print(f"{prefix}: release  {card.parent}  (dataset card {card})")
    for asset, name, passed, meta in checks:
        print(f"{prefix}: check {asset}/{name}: {'PASSED' if passed else 'FAILED ' + str(meta)}")
    failed = [c for c in checks if not c[2]]
    print(f"{prefix}: done in {time.monotonic() - start:.1f} s; {len(checks) - len(failed)}/{len(checks)} checks passed; "
          f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} (open the UI with `make ui`)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    if len(argv) != 1:
        print("usage: python -m corpus_dagster.run CONFIG.yaml", file=sys.stderr)
        return 2
    return run_pipeline(argv[0])


if __name__ == "__main__":
    sys.exit(main())
