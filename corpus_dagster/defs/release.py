"""release: length-bucketed release folder with a dataset card, figures and its blocking checks."""

import re

import dagster as dg

from corpus_dagster.defs.common import (
    check_result,
    corpus_failure,
    figures_markdown,
    md_table,
    table,
    table_metadata,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.release import driver, outputs


@dg.asset(
    # corpus_analysis too: the card's Construction section names the analysis run, so the release (and the
    # rebuild check right after it) must not race it on a parallel executor
    deps=["manifest", "token_streams", "corpus_analysis"],
    group_name="release",
    kinds={"parquet", "huggingface"},
    code_version=driver.CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def release(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Bucket the published documents by token length (segments for long ones, caps per source) with a card."""
    with corpus_failure("release"):
        settings, layout = corpus.load()
        stats = driver.run_release_stage(layout, settings, log=context.log.info)
    if stats.get("enabled") is False:
        return dg.MaterializeResult(metadata={"enabled": False})
    out = layout.release(outputs.release_name(settings))
    buckets = [[k, v] for k, v in sorted(stats.get("docs_per_bucket", {}).items())]
    card = out / "README.md"
    metadata = {
        # first: the card as the Hub shows it (front matter left out; its figures are under `figures`)
        "card_rendered": dg.MetadataValue.md(card_body(card.read_text(encoding="utf-8"))) if card.is_file() else "",
        **table_metadata(stats.get("docs", 0)),
        "documents": stats.get("docs", 0),
        "tokens": stats.get("tokens", 0),
        "segments": stats.get("segments", 0),
        "docs_per_bucket": table(["bucket", "documents"], buckets),
        "headline": md_table(["", ""], [list(map(str, row)) for row in stats.get("headline", [])]),
        "cached": stats["cached"],
        "stage_key": stats["key"],
        "card": dg.MetadataValue.path(str(out / "README.md")),
        "path": dg.MetadataValue.path(str(out)),
    }
    figures = [str(out / "assets" / p) if "/" not in str(p) else str(p) for p in stats.get("figures", [])]
    figures = [f for f in figures if f.endswith(".png")]
    if figures:
        metadata["figures"] = figures_markdown(figures)
    return dg.MaterializeResult(data_version=dg.DataVersion(stats["key"]), metadata=metadata)


def card_body(card: str) -> str:
    """The card's Markdown without its YAML front matter; image links (relative to the release folder, so
    broken in the UI) become their alt text."""
    if card.startswith("---\n") and "\n---\n" in card[4:]:
        card = card[4:].split("\n---\n", 1)[1]
    return re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"*(figure: \1, under figures)*", card)


def _release_check(corpus: CorpusConfig, name: str) -> dg.AssetCheckResult:
    with corpus_failure(f"release check {name}"):
        settings, layout = corpus.load()
        if not settings.release.enabled:
            return dg.AssetCheckResult(passed=True, metadata={"skipped": "release.enabled is false"})
        return check_result(driver.release_check(layout, settings, name))


@dg.asset_check(asset=release, blocking=True, description="Every row's token count lies in its bucket's range.")
def release_bucket_bounds(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "bucket_bounds")


@dg.asset_check(asset=release, blocking=True, description="No source exceeds its cap in any bucket.")
def release_source_caps(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "source_caps")


@dg.asset_check(asset=release, blocking=True, description="Release ids (UUIDv5) are unique.")
def release_unique_ids(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "unique_ids")


@dg.asset_check(asset=release, blocking=True, description="Every number in the dataset card equals the data's.")
def release_card_matches_data(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "card_matches_data")


@dg.asset_check(asset=release, blocking=True,
                description="Every row's created_at, cleaned and kept fields equal its document's ingest and clean tables.")
def release_metadata_matches_ingest(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "metadata_matches_ingest")


@dg.asset_check(asset=release, blocking=True,
                description="No file of the release names a file:// URL or a folder of the build machine.")
def release_no_machine_paths(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _release_check(corpus, "no_machine_paths")


@dg.asset_check(asset=release, blocking=True,
                description="A rebuild with another worker count is byte-identical: a seeded sample of "
                            "release.rebuild_check_units units (counts, segments) and files, plus the plan, README.md "
                            "and _RELEASE.json; 0 rebuilds every file; off: release.rebuild_check.")
def release_reproducible(corpus: CorpusConfig) -> dg.AssetCheckResult:
    with corpus_failure("release check reproducible"):
        settings, layout = corpus.load()
        if not (settings.release.enabled and settings.release.rebuild_check):
            return dg.AssetCheckResult(passed=True, metadata={"skipped": "release.enabled or release.rebuild_check is false"})
        return check_result(driver.release_rebuild_check(layout, settings))


RELEASE_ASSETS = [release]
RELEASE_CHECKS = [release_bucket_bounds, release_source_caps, release_unique_ids, release_card_matches_data,
                  release_metadata_matches_ingest, release_no_machine_paths, release_reproducible]
