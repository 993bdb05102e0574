"""shards + manifest (data.06) and the blocking checks that guard everything downstream of them."""

import dagster as dg

from corpus_dagster.defs.common import check_result, corpus_failure, md_table
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.publish import driver


def _spec(key: str, deps: list[str], kind: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key, deps=deps, group_name="publish", kinds={kind}, description=description,
        code_version=driver.CODE_VERSION, automation_condition=dg.AutomationCondition.eager(),
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
        result = driver.run_publish(layout, resolved)
    m = result.manifest
    rows = [[s["name"], s["rows"], s["sha256"][:16]] for s in m["shards"][:20]]
    version = dg.DataVersion(result.key)
    yield dg.MaterializeResult(
        asset_key="shards",
        data_version=version,
        metadata={
            "n_docs": m["n_docs"],
            "n_shards": m["n_shards"],
            "sources": len(result.sources),
            "bytes": sum((layout.shards / s["name"]).stat().st_size for s in m["shards"]),
            "shards": md_table(["name", "rows", "sha256"], rows),
            "cached": result.cached,
            "path": dg.MetadataValue.path(str(layout.shards)),
            "seconds": round(result.shards.seconds, 3),
        },
    )
    yield dg.MaterializeResult(
        asset_key="manifest",
        data_version=version,
        metadata={
            "path": dg.MetadataValue.path(str(layout.manifest)),
            "config_sha256": m["config_sha256"],
            "ledger_ref": m["ledger_ref"],
            "filters": dg.MetadataValue.json(m["filters"]),
            "dedup": dg.MetadataValue.json(m["dedup"]),
            "pii": dg.MetadataValue.json(m["pii"]),
        },
    )


def _check(corpus: CorpusConfig, name: str, run) -> dg.AssetCheckResult:
    with corpus_failure(name):
        resolved, layout = corpus.load()
        return check_result(run(layout, resolved))


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
