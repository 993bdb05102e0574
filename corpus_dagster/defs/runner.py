"""Run the whole graph in-process through Dagster: every source partition, then the global assets."""

from collections.abc import Callable

import dagster as dg

from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig


def per_source_assets() -> list[dg.AssetsDefinition]:
    """Assets partitioned by source, in graph order."""
    from corpus_dagster.defs import ASSETS

    return [a for a in ASSETS if a.partitions_def is not None]


def global_assets() -> list[dg.AssetsDefinition]:
    """Unpartitioned assets (whole-corpus steps)."""
    from corpus_dagster.defs import ASSETS

    return [a for a in ASSETS if a.partitions_def is None]


def all_checks() -> list:
    from corpus_dagster.defs import CHECKS

    return list(CHECKS)


def sync_partitions(instance: dg.DagsterInstance, source_ids: list[str]) -> None:
    """Add missing source partitions (what the ledger sensor does on a schedule)."""
    existing = set(instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    new = [s for s in source_ids if s not in existing]
    if new:
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, new)


def materialize_sources(
    corpus: CorpusConfig, instance: dg.DagsterInstance, source_ids: list[str] | None = None,
    on_result: Callable[[str, dg.ExecuteInProcessResult], None] | None = None,
) -> dict[str, dg.ExecuteInProcessResult]:
    """Materialize the per-source assets of each source partition (one run per source)."""
    ids = source_ids if source_ids is not None else [s.source_id for s in load_ledger(corpus.layout().ledger)]
    sync_partitions(instance, ids)
    results = {}
    assets = per_source_assets()
    for sid in ids:
        res = dg.materialize(assets, partition_key=sid, instance=instance, resources={"corpus": corpus}, raise_on_error=True)
        results[sid] = res
        if on_result:
            on_result(sid, res)
    return results


def materialize_global(corpus: CorpusConfig, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """Materialize the whole-corpus assets with their checks (sources must be materialized first)."""
    parts = per_source_assets()
    glob = global_assets()
    selection = dg.AssetSelection.assets(*[k for a in glob for k in a.keys])
    return dg.materialize(
        [*parts, *glob, *all_checks()],
        selection=selection,
        instance=instance,
        resources={"corpus": corpus},
        raise_on_error=True,
    )


def check_results(result: dg.ExecuteInProcessResult) -> list[tuple[str, str, bool, dict]]:
    """(asset, check name, passed, metadata) for every check evaluated in a run."""
    out = []
    for ev in result.get_asset_check_evaluations():
        meta = {k: getattr(v, "value", v) for k, v in ev.metadata.items()}
        out.append((ev.asset_key.to_user_string(), ev.check_name, ev.passed, meta))
    return out
