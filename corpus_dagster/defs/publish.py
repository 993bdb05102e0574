"""shards + manifest (data.06) and the blocking checks that guard everything downstream of them."""


import shutil
import tempfile
from pathlib import Path

import dagster as dg

from corpus_dagster.defs.common import ledger_source_ids, md_table, upstream_required
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.publish import verify
from corpus_dagster.publish.build import publish, write_publish

UPSTREAM = ["scrubbed", "dedup"]


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "shards",
            deps=UPSTREAM,
            group_name="publish",
            kinds={"parquet"},
            description="Every kept document, sorted by id, in zstd Parquet shards of shard_rows rows.",
            automation_condition=dg.AutomationCondition.eager(),
        ),
        dg.AssetSpec(
            "manifest",
            deps=["shards"],
            group_name="publish",
            kinds={"json"},
            description="_MANIFEST.json: shards with sha256, stage counts, ledger_ref, config_sha256.",
            automation_condition=dg.AutomationCondition.eager(),
        ),
    ],
    can_subset=False,
)
def shards_and_manifest(context: dg.AssetExecutionContext, corpus: CorpusConfig):
    """Write the shards and manifest of every ledger source, byte-identical for any worker count."""
    resolved, layout = corpus.load()
    source_ids = ledger_source_ids(layout)
    with upstream_required("every source partition"):
        result = publish(layout, resolved, source_ids)
    m = result.manifest
    rows = [[s["name"], s["rows"], s["sha256"][:16]] for s in m["shards"][:20]]
    yield dg.MaterializeResult(
        asset_key="shards",
        metadata={
            "n_docs": m["n_docs"],
            "n_shards": m["n_shards"],
            "sources": len(source_ids),
            "bytes": sum((layout.shards / s["name"]).stat().st_size for s in m["shards"]),
            "shards": md_table(["name", "rows", "sha256"], rows),
            "path": dg.MetadataValue.path(str(layout.shards)),
            "seconds": round(result.shards.seconds, 3),
        },
    )
    yield dg.MaterializeResult(
        asset_key="manifest",
        metadata={
            "path": dg.MetadataValue.path(str(layout.manifest)),
            "config_sha256": m["config_sha256"],
            "ledger_ref": m["ledger_ref"],
            "filters": dg.MetadataValue.json(m["filters"]),
            "dedup": dg.MetadataValue.json(m["dedup"]),
            "pii": dg.MetadataValue.json(m["pii"]),
        },
    )


def _result(problems: list[str], **metadata) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={"problems": len(problems), "details": "\n".join(problems[:20]) or "none", **metadata},
    )


@dg.asset_check(asset="shards", blocking=True, description="Column names, order and Arrow types; zstd; row groups within 64 MiB.")
def shard_schema(corpus: CorpusConfig) -> dg.AssetCheckResult:
    paths = verify.shard_paths(corpus.layout().shards)
    return _result(verify.check_schema(paths), shards=len(paths))


@dg.asset_check(asset="manifest", blocking=True, description="Manifest valid against its schema and consistent with the files.")
def manifest_consistent(corpus: CorpusConfig) -> dg.AssetCheckResult:
    layout = corpus.layout()
    return _result(verify.check_manifest(layout.shards, layout.manifest))


@dg.asset_check(asset="shards", blocking=True, description="Ids strictly increasing in byte order across shards.")
def ids_sorted(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _result(verify.check_ids_sorted(verify.shard_paths(corpus.layout().shards)))


@dg.asset_check(asset="shards", blocking=True, description="split recomputed from sha256 and val_permille.")
def split_matches_sha256(corpus: CorpusConfig) -> dg.AssetCheckResult:
    resolved, layout = corpus.load()
    return _result(verify.check_split(verify.shard_paths(layout.shards), resolved["val_permille"]))


@dg.asset_check(asset="shards", blocking=True, description="sha256 and n_chars recomputed from text.")
def hashes_match_text(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _result(verify.check_hashes(verify.shard_paths(corpus.layout().shards)))


@dg.asset_check(
    asset="manifest",
    blocking=True,
    description="Rebuild shards and manifest into a temporary folder with another worker count; every byte equal.",
)
def deterministic_rebuild(corpus: CorpusConfig) -> dg.AssetCheckResult:
    resolved, layout = corpus.load()
    other_workers = 2 if resolved["workers"] == 1 else 1
    source_ids = ledger_source_ids(layout)
    tmp = Path(tempfile.mkdtemp(prefix="corpus-rebuild-", dir=layout.root))
    try:
        write_publish(layout, resolved, source_ids, tmp, other_workers)
        problems = verify.compare_folders(layout.shards, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _result(problems, rebuild_workers=other_workers, build_workers=resolved["workers"])


@dg.asset_check(asset="shards", blocking=True, description="No PII detector fires on the published text.")
def no_pii_in_shards(corpus: CorpusConfig) -> dg.AssetCheckResult:
    resolved, layout = corpus.load()
    return _result(verify.check_no_pii(verify.shard_paths(layout.shards), resolved["pii"]))


PUBLISH_CHECKS = [no_pii_in_shards, shard_schema, manifest_consistent, ids_sorted, split_matches_sha256, hashes_match_text, deterministic_rebuild]
