"""The global dedup + decontamination step (data.04) over every source's minhash_signatures: the asset hands
its stage (`dedup.driver.DEDUP_UNITS`) to the one unit-graph builder and shapes the driver's report."""

import dagster as dg

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan
from corpus_dagster.dedup import driver, outputs
from corpus_dagster.defs.charts import charts_markdown, histogram, stacked_bars
from corpus_dagster.defs.common import (
    materialized_sources,
    ratio,
    step_seconds,
    table,
    table_metadata,
    timing,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.units import unit_graph


def drops_table(outcomes: dict[str, dict[str, int]]) -> dg.MetadataValue:
    """Drops per source pivoted to the columns a person compares (`outputs.drops_per_source`); clean_documents
    has clean's reasons one by one."""
    columns, rows = outputs.drops_per_source(outcomes)
    return table(columns, rows, {"kept": "documents kept after dedup", "clean: dropped": "every clean reason together"})


def pairs_table(pairs: list[dict], threshold: float) -> dg.MetadataValue:
    """Example pairs of the near-duplicate graph, each labelled against the dedup threshold: the examples span
    the Jaccard range down to the graph's threshold, so some are similar documents that dedup keeps both of
    (and a pair may hold a document decontamination or exact dedup removed first, which dedup never merges)."""
    rows = [[p["id_a"], p["id_b"], ratio(p["jaccard"]),
             f">= {threshold}: near-duplicate pair" if p["jaccard"] >= threshold else f"< {threshold}: both kept"]
            for p in pairs]
    return table(["id_a", "id_b", "jaccard", "vs threshold"], rows,
                 {"vs threshold": f"exact Jaccard against dedup.jaccard_threshold = {threshold}"})


def dedup_metadata(layout: Layout, result: driver.DedupResult, sources: list[str], waiting: list[str],
                   threshold: float, own_seconds: float | None = None) -> dict:
    """What the UI shows of a dedup run: counts, drops per source, clusters, example pairs, charts, timing.
    `own_seconds`: this run's time, the `seconds` of a run that reused the build."""
    report = outputs.dedup_report(layout, sources)
    outcomes, sizes = report.outcomes, report.cluster_sizes
    largest = [[c["cluster_min_id"], c["size"]] for c in result.largest_clusters]
    per_step = result.seconds if isinstance(result.seconds, dict) else {}
    built = result.built_seconds
    charts = {
        "documents kept and dropped per reason per source": stacked_bars(outcomes, "kept and dropped per source"),
        "near-duplicate cluster sizes": histogram(sizes, "near-duplicate cluster sizes", "documents in cluster",
                                                  bins=min(30, max(1, len(set(sizes))))),
    }
    return {
        **table_metadata(result.docs),
        "sources": len(sources),
        "sources_waiting": ", ".join(waiting) or "none",
        "exact_dropped": dg.MetadataValue.int(result.exact_dropped),
        "near_dropped": dg.MetadataValue.int(result.near_dropped),
        "decontaminated": dg.MetadataValue.int(result.decontaminated),
        "no_signature": result.no_signature,
        "clusters": result.n_clusters,
        "drops_per_source": drops_table(outcomes),
        "largest_clusters": table(["cluster_min_id", "size"], largest, {"cluster_min_id": "the kept document"}),
        "example_pairs": pairs_table(list(result.example_pairs), threshold),
        "jaccard_threshold": float(threshold),
        "charts": charts_markdown(charts),
        "cached": result.cached,
        "stage_key": result.key,
        **step_seconds(built if own_seconds is None else own_seconds, built, result.cached),
        "seconds_per_step": table(["step", "seconds"], [[k, timing(v).value] for k, v in per_step.items()]),
        "path": dg.MetadataValue.path(str(layout.stage(outputs.DEDUP))),
    }


def bind_sources(context: dg.OpExecutionContext, corpus: CorpusConfig) -> tuple[driver.DedupStage, dict]:
    """The dedup over every source whose minhash_signatures are materialized (a failure while there is none)."""
    sources, waiting = materialized_sources(context, "minhash_signatures", corpus.layout())
    if not sources:
        raise dg.Failure(
            "dedup: no source partition has materialized minhash_signatures yet "
            f"(waiting: {', '.join(waiting) or 'none; the ledger sensor adds partitions'}); materialize the sources first"
        )
    return driver.DedupStage(tuple(sorted(sources))), {"sources": sources, "waiting": waiting}


def report(context: dg.OpExecutionContext, layout: Layout, settings: Settings, result: driver.DedupResult,
           plan: Plan, seconds: float) -> dict:
    return dedup_metadata(layout, result, plan.info["sources"], plan.info["waiting"],
                          settings.dedup.jaccard_threshold, seconds)


def dedup_asset(fan_out: int = 1) -> dg.AssetsDefinition:
    """The global dedup as a graph: plan (scan, decontaminate, exact, band hashes), LSH per band spread over
    `fan_out` steps, verification plan (candidate pairs, shingle store), verification per chunk of pairs over
    `fan_out` steps, finish (clusters, tables, record)."""
    graph = unit_graph(driver.DEDUP_UNITS, fan_out, ins=("clean_documents", "minhash_signatures"), report=report,
                       bind=bind_sources, descriptions={
                           "plan": "Scan, decontaminate, exact-dedup, band hashes; name the LSH units.",
                           "verify_plan": "Merge the bands' candidate pairs, build the shingle store; name the "
                                          "verification units.",
                           "finish": "Clusters, dropped/clusters/pairs tables and the stage record."})

    @dg.graph_asset(
        name="dedup",
        ins={"clean_documents": dg.AssetIn(dagster_type=dg.Nothing), "minhash_signatures": dg.AssetIn(dagster_type=dg.Nothing)},
        group_name="dedup",
        kinds={"parquet", "scipy"},
        code_version=outputs.DEDUP_CODE_VERSION,
        automation_condition=when_inputs_change(),
        description="Decontaminate, exact-dedup and near-dedup (verified Jaccard) across every materialized source.",
    )
    def dedup(clean_documents, minhash_signatures):
        return graph(clean_documents=clean_documents, minhash_signatures=minhash_signatures)

    return dedup


dedup = dedup_asset()
