"""shards + manifest (data.06) and the blocking checks that guard everything downstream of them."""

import dagster as dg
import polars as pl

from corpus_dagster.core.documents import SHARD_SCHEMA
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.parquet import head_rows
from corpus_dagster.core.reconcile import purge_removed_sources, read_ledger_rows
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan
from corpus_dagster.defs.charts import charts_markdown, histogram
from corpus_dagster.defs.common import (
    PREVIEW_ROWS,
    check_result,
    corpus_failure,
    preview_text,
    size,
    step_seconds,
    table,
    table_metadata,
    when_inputs_change,
)
from corpus_dagster.defs.explain_link import DEFAULT_LOCATION, explain_link, location_of
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.units import unit_graph
from corpus_dagster.publish import driver, outputs

DEDUP_COUNTS = ("exact_dropped", "near_dropped", "decontaminated")


def manifest_dedup(dedup: dict) -> dict:
    """The manifest's `dedup` section for the UI: the counts as a small table, the settings as one line."""
    counts = [[k, int(dedup[k])] for k in DEDUP_COUNTS if k in dedup]
    settings = ", ".join(f"{k}={v}" for k, v in dedup.items() if k not in DEDUP_COUNTS)
    return {"dedup": table(["dedup step", "documents dropped"], counts), "dedup_settings": settings or "none"}


def publish_metadata(layout: Layout, result: driver.PublishResult, own_seconds: float | None = None,
                     location: str = DEFAULT_LOCATION) -> tuple[dict, dict]:
    """(shards metadata, manifest metadata) for the UI; `own_seconds`: this run's time, shown as `seconds` when
    the build was reused; `location`: the code location whose explain job the `explain` link opens."""
    files = outputs.published_shards(layout)
    lengths = pl.concat([pl.read_parquet(f, columns=["n_chars"]) for f in files])["n_chars"].to_list() if files else []
    head = head_rows(files[0], ["id", "source_id", "split", "n_chars", "text"], PREVIEW_ROWS) if files else []
    m = result.manifest
    n_bytes = sum((layout.shards / s["name"]).stat().st_size for s in m["shards"])
    rows = [[s["name"], s["rows"], (layout.shards / s["name"]).stat().st_size, s["sha256"][:16]] for s in m["shards"][:50]]
    chart = histogram(lengths, "length of kept documents", "characters (log scale)", log_x=True)
    shards = {
        **table_metadata(m["n_docs"], SHARD_SCHEMA),
        "n_docs": dg.MetadataValue.int(m["n_docs"]),
        "n_shards": m["n_shards"],
        "sources": len(result.sources),
        "bytes": dg.MetadataValue.int(n_bytes),
        "size": size(n_bytes),
        "shards": table(["name", "rows", "bytes", "sha256"], rows),
        "preview": table(["id", "source_id", "split", "n_chars", "preview"],
                         [[r["id"], r["source_id"], r["split"], r["n_chars"], preview_text(r["text"])] for r in head],
                         {"preview": "the start of the text; a cut text ends in its length"}),
        "length_histogram": charts_markdown({"length of kept documents (characters)": chart}),
        **({"explain": explain_link(head[0]["id"], location)} if head else {}),
        "cached": result.cached,
        "stage_key": result.key,
        "path": dg.MetadataValue.path(str(layout.shards)),
        **step_seconds(result.shards.seconds if own_seconds is None else own_seconds, result.shards.seconds,
                       bool(result.cached)),
    }
    manifest = {
        "path": dg.MetadataValue.path(str(layout.manifest)),
        "config_sha256": m["config_sha256"],
        "ledger_ref": m["ledger_ref"],
        "filters": table(["filter", "documents"], [[k, v] for k, v in m["filters"].items()]),
        **manifest_dedup(m["dedup"]),
        "pii": table(["type", "placeholders"], [[k, v] for k, v in m["pii"].items()]),
    }
    return shards, manifest


def purge_after_publish(layout, published: list[str]) -> dict[str, list[str]]:
    """Delete the data of sources that left the ledger, now that a corpus without them is published; nothing
    while an invalid ledger row names no source_id (it may be any of them)."""
    rows = read_ledger_rows(layout.ledger)
    if rows.unnamed_invalid:
        return {}
    return purge_removed_sources(layout, rows.listed, published)


def report(context: dg.OpExecutionContext, layout: Layout, settings: Settings, result: driver.PublishResult,
           plan: Plan, seconds: float) -> tuple[dict, dict]:
    """The shards' and the manifest's metadata; then the data of sources that left the ledger is deleted."""
    shards, manifest = publish_metadata(layout, result, seconds, location_of(context))
    purged = purge_after_publish(layout, result.sources)
    for sid, folders in purged.items():
        context.log.info(f"source {sid!r} is neither in the ledger nor published: deleted {len(folders)} folder(s) "
                         f"of its data ({', '.join(folders)})")
    manifest["purged_sources"] = ", ".join(purged) or "none"
    return shards, manifest


def shards_asset(fan_out: int = 1) -> dg.AssetsDefinition:
    """Shards and manifest as a graph: plan (row plan, one unit per shard), shard writing spread over
    `fan_out` steps, finish (manifest, atomic replacement of the published folder, record)."""
    graph = unit_graph(driver.PUBLISH_UNITS, fan_out, ins=("scrubbed", "dedup"), outs=("shards", "manifest"),
                       report=report, descriptions={
                           "plan": "Plan the rows of every shard; one unit per shard.",
                           "finish": "Manifest, atomic replacement of the published folder, stage record."})

    @dg.graph_multi_asset(
        name="shards_and_manifest",
        group_name="publish",
        ins={"scrubbed": dg.AssetIn(dagster_type=dg.Nothing), "dedup": dg.AssetIn(dagster_type=dg.Nothing)},
        outs={
            "shards": dg.AssetOut(
                kinds={"parquet"}, code_version=driver.CODE_VERSION,
                automation_condition=when_inputs_change(), dagster_type=dg.Nothing,
                description="Every kept document, sorted by id, in zstd Parquet shards of shard_rows rows."),
            "manifest": dg.AssetOut(
                kinds={"json"}, code_version=driver.CODE_VERSION,
                automation_condition=when_inputs_change(), dagster_type=dg.Nothing,
                description="_MANIFEST.json: shards with sha256, stage counts, ledger_ref, config_sha256."),
        },
        can_subset=False,
    )
    def shards_and_manifest(scrubbed, dedup):
        shards, manifest = graph(scrubbed=scrubbed, dedup=dedup)
        return {"shards": shards, "manifest": manifest}

    return shards_and_manifest


shards_and_manifest = shards_asset()


def _check(corpus: CorpusConfig, name: str) -> dg.AssetCheckResult:
    """The published-folder check `name`, computed alone by the driver, with what it covered."""
    with corpus_failure(name):
        settings, layout = corpus.load()
        report = driver.publish_check(layout, settings, name)
        scope = driver.check_scope(layout)
        return check_result(report, {**scope, "rows_checked": dg.MetadataValue.int(scope["rows_checked"]),
                                     "bytes_checked": dg.MetadataValue.int(scope["bytes_checked"]),
                                     "size_checked": size(scope["bytes_checked"])})


def _published_check(name: str, asset: str, description: str) -> dg.AssetChecksDefinition:
    """The blocking asset check `name` on `asset`, computed by the publish driver (`_check`)."""

    @dg.asset_check(name=name, asset=asset, blocking=True, description=description)
    def check(corpus: CorpusConfig) -> dg.AssetCheckResult:
        return _check(corpus, name)

    return check


PUBLISH_CHECKS = [_published_check(*spec) for spec in (
    ("no_pii_in_shards", "shards",
     "No PII detector fires on the published text."),
    ("shard_schema", "shards",
     "Column names, order and Arrow types; zstd; row groups within 64 MiB."),
    ("manifest_consistent", "manifest",
     "Manifest valid against its schema and consistent with the files."),
    ("sources_in_ledger", "manifest",
     "Every source in the published shards still has a row in the ledger (takedowns took)."),
    ("ids_sorted", "shards",
     "Ids strictly increasing in byte order across shards."),
    ("split_matches_sha256", "shards",
     "split recomputed from sha256 and val_permille."),
    ("hashes_match_text", "shards",
     "sha256 and n_chars recomputed from text."),
    ("deterministic_rebuild", "manifest",
     "Rebuild shards and manifest into a temporary folder with another worker count; every byte equal."),
)]
