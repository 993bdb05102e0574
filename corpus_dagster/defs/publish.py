"""shards + manifest (data.06) and the blocking checks that guard everything downstream of them."""

import dagster as dg
import polars as pl
import pyarrow.parquet as pq

from corpus_dagster.core.documents import SHARD_SCHEMA
from corpus_dagster.defs.charts import charts_markdown, histogram
from corpus_dagster.defs.common import (
    PREVIEW_ROWS,
    check_result,
    corpus_failure,
    short_text,
    size,
    table,
    table_metadata,
    timing,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.publish import driver


def _spec(key: str, deps: list[str], kind: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key, deps=deps, group_name="publish", kinds={kind}, description=description,
        code_version=driver.CODE_VERSION, automation_condition=when_inputs_change(),
    )


@dg.multi_asset(
    specs=[
        _spec("shards", ["scrubbed", "dedup"], "parquet",
              "Every kept document, sorted by id, in zstd Parquet shards of shard_rows rows."),
        _spec("manifest", ["shards"], "json", "_MANIFEST.json: shards with sha256, stage counts, ledger_ref, config_sha256."),
    ],
    can_subset=False,
)
def shards_and_manifest(context: dg.AssetExecutionContext, corpus: CorpusConfig):
    """Write the shards and manifest of the sources the dedup covered, byte-identical for any worker count."""
    with corpus_failure("shards"):
        resolved, layout = corpus.load()
        result = driver.run_publish(layout, resolved, log=context.log.info)
        files = driver.published_shards(layout)
        lengths = pl.concat([pl.read_parquet(f, columns=["n_chars"]) for f in files])["n_chars"].to_list() if files else []
        head = pq.read_table(files[0], columns=["id", "source_id", "split", "n_chars", "text"]).slice(0, PREVIEW_ROWS).to_pylist() if files else []
    m = result.manifest
    n_bytes = sum((layout.shards / s["name"]).stat().st_size for s in m["shards"])
    rows = [[s["name"], s["rows"], (layout.shards / s["name"]).stat().st_size, s["sha256"][:16]] for s in m["shards"][:50]]
    version = dg.DataVersion(result.key)
    chart = histogram(lengths, "length of kept documents", "characters (log scale)", log_x=True)
    yield dg.MaterializeResult(
        asset_key="shards",
        data_version=version,
        metadata={
            **table_metadata(m["n_docs"], SHARD_SCHEMA),
            "n_docs": dg.MetadataValue.int(m["n_docs"]),
            "n_shards": m["n_shards"],
            "sources": len(result.sources),
            "bytes": dg.MetadataValue.int(n_bytes),
            "size": size(n_bytes),
            "shards": table(["name", "rows", "bytes", "sha256"], rows),
            "preview": table(["id", "source_id", "split", "n_chars", "text"],
                              [[r["id"], r["source_id"], r["split"], r["n_chars"], short_text(r["text"])] for r in head]),
            "length_histogram": charts_markdown({"length of kept documents (characters)": chart}),
            "cached": result.cached,
            "stage_key": result.key,
            "path": dg.MetadataValue.path(str(layout.shards)),
            "seconds": timing(result.shards.seconds),
        },
    )
    yield dg.MaterializeResult(
        asset_key="manifest",
        data_version=version,
        metadata={
            "path": dg.MetadataValue.path(str(layout.manifest)),
            "config_sha256": m["config_sha256"],
            "ledger_ref": m["ledger_ref"],
            "filters": table(["filter", "documents"], [[k, v] for k, v in m["filters"].items()]),
            "dedup": dg.MetadataValue.json(m["dedup"]),
            "pii": table(["type", "placeholders"], [[k, v] for k, v in m["pii"].items()]),
        },
    )


def _check(corpus: CorpusConfig, name: str, run) -> dg.AssetCheckResult:
    with corpus_failure(name):
        resolved, layout = corpus.load()
        report = run(layout, resolved)
        m = driver.read_manifest(layout)
        n_bytes = sum((layout.shards / s["name"]).stat().st_size for s in m["shards"])
        scope = {"checked": ", ".join(s["name"] for s in m["shards"][:3]) + (" ..." if m["n_shards"] > 3 else ""),
                 "files_checked": m["n_shards"], "rows_checked": dg.MetadataValue.int(m["n_docs"]),
                 "bytes_checked": dg.MetadataValue.int(n_bytes), "size_checked": size(n_bytes)}
        return check_result(report, scope)


@dg.asset_check(asset="shards", blocking=True, description="Column names, order and Arrow types; zstd; row groups within 64 MiB.")
def shard_schema(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "shard_schema", lambda layout, _r: driver.check_schema(layout))


@dg.asset_check(asset="manifest", blocking=True, description="Manifest valid against its schema and consistent with the files.")
def manifest_consistent(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "manifest_consistent", lambda layout, _r: driver.check_manifest(layout))


@dg.asset_check(asset="shards", blocking=True, description="Ids strictly increasing in byte order across shards.")
def ids_sorted(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "ids_sorted", lambda layout, _r: driver.check_ids_sorted(layout))


@dg.asset_check(asset="shards", blocking=True, description="split recomputed from sha256 and val_permille.")
def split_matches_sha256(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "split_matches_sha256", driver.check_split)


@dg.asset_check(asset="shards", blocking=True, description="sha256 and n_chars recomputed from text.")
def hashes_match_text(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "hashes_match_text", lambda layout, _r: driver.check_hashes(layout))


@dg.asset_check(
    asset="manifest",
    blocking=True,
    description="Rebuild shards and manifest into a temporary folder with another worker count; every byte equal.",
)
def deterministic_rebuild(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "deterministic_rebuild", driver.check_rebuild)


@dg.asset_check(asset="shards", blocking=True, description="No PII detector fires on the published text.")
def no_pii_in_shards(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _check(corpus, "no_pii_in_shards", driver.check_no_pii)


PUBLISH_CHECKS = [no_pii_in_shards, shard_schema, manifest_consistent, ids_sorted, split_matches_sha256, hashes_match_text, deterministic_rebuild]
