"""Run every stage driver of a generated corpus in graph order, outside Dagster: the tests of cache keys and
of the sampled checks build with it."""

from pathlib import Path

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.dedup import driver as dedup_driver
from corpus_dagster.ingest import driver as ingest_driver
from corpus_dagster.minhash import driver as minhash_driver
from corpus_dagster.publish import driver as publish_driver
from corpus_dagster.scrub import driver as scrub_driver
from corpus_dagster.tokenize import driver as tokens_driver

STAGES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokens")


def run_all(config_path: Path) -> dict[str, bool]:
    """Run every stage driver in graph order; returns, per stage, whether any unit of it was recomputed."""
    settings = load_settings(config_path)
    layout = Layout.from_config(settings.resolved)
    sources = load_ledger(layout.ledger)
    ran = dict.fromkeys(STAGES, False)
    for src in sources:
        ran["ingest"] |= not ingest_driver.fetch_source(src, layout, settings.ingest).unchanged
        ran["clean"] |= not clean_driver.run_clean_source(layout, settings, src.source_id)["cached"]
        ran["minhash"] |= not minhash_driver.run_signatures(layout, settings, src.source_id)["cached"]
    ran["dedup"] = not dedup_driver.run_global_dedup(layout, settings, [s.source_id for s in sources]).cached
    ran["scrub"] = any(not s["cached"] for s in scrub_driver.run_scrub(layout, settings).values())
    published = publish_driver.run_publish(layout, settings)
    ran["publish"] = not published.cached and published.shards_rewritten
    ran["tokens"] = not tokens_driver.run_token_streams(layout, settings).cached
    return ran
