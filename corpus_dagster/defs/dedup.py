"""The global dedup + decontamination step (data.04) over every source's minhash_signatures."""

import time

import dagster as dg
import polars as pl

from corpus_dagster.clean.outputs import clean_record
from corpus_dagster.dedup import driver, outputs
from corpus_dagster.defs.charts import charts_markdown, histogram, stacked_bars
from corpus_dagster.defs.common import (
    corpus_failure,
    materialized_sources,
    ratio,
    step_seconds,
    table,
    table_metadata,
    timing,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.units import (
    after_groups,
    group_ops,
    plan_value,
    seconds_since_plan,
    versioned_output,
    wire_groups,
)


def per_source_outcomes(layout, sources: list[str]) -> dict[str, dict[str, int]]:
    """Per source: documents kept after dedup, dropped by each clean reason, and by each dedup reason."""
    dropped = pl.read_parquet(outputs.dedup_tables(layout)["dropped"], columns=["id", "reason"])
    by = (dropped.with_columns(pl.col("id").str.replace(r":[^:]*$", "").alias("source"))
          .group_by("source", "reason").len().sort("source", "reason").rows())
    dedup_drops: dict[str, dict[str, int]] = {}
    for sid, reason, n in by:
        dedup_drops.setdefault(sid, {})[f"dedup: {reason}"] = n
    out = {}
    for sid in sources:
        stats = clean_record(layout, sid).stats
        gone = dedup_drops.get(sid, {})
        out[sid] = {"kept": stats["kept"] - sum(gone.values()),
                    **{f"clean: {k}": v for k, v in stats.get("reasons", {}).items()}, **gone}
    return out


DEDUP_REASONS = sorted(outputs.REASONS.values())


def drops_table(outcomes: dict[str, dict[str, int]]) -> dg.MetadataValue:
    """Drops per source pivoted to the columns a person compares: the source, what dedup dropped (right after
    the source), what was kept, what clean dropped (all reasons summed; clean_documents has them one by one)."""
    dedup = [f"dedup: {r}" for r in DEDUP_REASONS]  # every reason, zeros too: the columns stay put
    dedup += sorted({r for o in outcomes.values() for r in o if r.startswith("dedup: ")} - set(dedup))
    rows = []
    for sid, o in outcomes.items():
        clean = sum(v for r, v in o.items() if r.startswith("clean: "))
        rows.append([sid, *[o.get(r, 0) for r in dedup], o["kept"], clean])
    return table(["source", *dedup, "kept", "clean: dropped"], rows,
                 {"kept": "documents kept after dedup", "clean: dropped": "every clean reason together"})


def pairs_table(pairs: list[dict], threshold: float) -> dg.MetadataValue:
    """Example pairs of the near-duplicate graph, each labelled against the dedup threshold: the examples span
    the Jaccard range down to the graph's threshold, so some are similar documents that dedup keeps both of
    (and a pair may hold a document decontamination or exact dedup removed first, which dedup never merges)."""
    rows = [[p["id_a"], p["id_b"], ratio(p["jaccard"]),
             f">= {threshold}: near-duplicate pair" if p["jaccard"] >= threshold else f"< {threshold}: both kept"]
            for p in pairs]
    return table(["id_a", "id_b", "jaccard", "vs threshold"], rows,
                 {"vs threshold": f"exact Jaccard against dedup.jaccard_threshold = {threshold}"})


def dedup_metadata(layout, stats: dict, sources: list[str], waiting: list[str], threshold: float,
                   own_seconds: float | None = None) -> dict:
    """What the UI shows of a dedup run: counts, drops per source, clusters, example pairs, charts, timing.
    `own_seconds`: this run's time, the `seconds` of a run that reused the build."""
    outcomes = per_source_outcomes(layout, sources)
    sizes = outputs.clusters(layout).group_by("cluster_min_id").len()["len"].to_list()
    largest = [[c["cluster_min_id"], c["size"]] for c in stats.get("largest_clusters", [])]
    seconds = stats.get("seconds", {})
    per_step = seconds if isinstance(seconds, dict) else {}
    built = sum(per_step.values()) if per_step else float(seconds or 0.0)
    charts = {
        "documents kept and dropped per reason per source": stacked_bars(outcomes, "kept and dropped per source"),
        "near-duplicate cluster sizes": histogram(sizes, "near-duplicate cluster sizes", "documents in cluster",
                                                  bins=min(30, max(1, len(set(sizes))))),
    }
    return {
        **table_metadata(stats.get("docs", 0)),
        "sources": len(sources),
        "sources_waiting": ", ".join(waiting) or "none",
        "exact_dropped": dg.MetadataValue.int(stats["exact_dropped"]),
        "near_dropped": dg.MetadataValue.int(stats["near_dropped"]),
        "decontaminated": dg.MetadataValue.int(stats["decontaminated"]),
        "no_signature": stats.get("no_signature", 0),
        "clusters": stats.get("n_clusters", 0),
        "drops_per_source": drops_table(outcomes),
        "largest_clusters": table(["cluster_min_id", "size"], largest, {"cluster_min_id": "the kept document"}),
        "example_pairs": pairs_table(stats.get("example_pairs", []), threshold),
        "jaccard_threshold": float(threshold),
        "charts": charts_markdown(charts),
        "cached": stats["cached"],
        "stage_key": stats["key"],
        **step_seconds(built if own_seconds is None else own_seconds, built, bool(stats["cached"])),
        "seconds_per_step": table(["step", "seconds"], [[k, timing(v).value] for k, v in per_step.items()]),
        "path": dg.MetadataValue.path(str(layout.stage(outputs.DEDUP))),
    }


def dedup_asset(fan_out: int = 1) -> dg.AssetsDefinition:
    """The global dedup as a graph: plan (scan, decontaminate, exact, band hashes), LSH per band spread over
    `fan_out` steps, verification plan (candidate pairs, shingle store), verification per chunk of pairs over
    `fan_out` steps, finish (clusters, tables, record)."""

    @dg.op(name="dedup_plan", ins={"clean_documents": dg.In(dg.Nothing), "minhash_signatures": dg.In(dg.Nothing)},
           description="Scan, decontaminate, exact-dedup, band hashes; name the LSH units.")
    def plan_op(context: dg.OpExecutionContext, corpus: CorpusConfig) -> dict:
        started = time.time()
        sources, waiting = materialized_sources(context, "minhash_signatures", corpus.layout())
        if not sources:
            raise dg.Failure(
                "dedup: no source partition has materialized minhash_signatures yet "
                f"(waiting: {', '.join(waiting) or 'none; the ledger sensor adds partitions'}); materialize the sources first"
            )
        with corpus_failure("dedup"):
            settings, layout = corpus.load()
            value = plan_value(driver.plan_dedup(layout, settings, sources, log=context.log.info), started)
        value["info"].update(sources=sources, waiting=waiting)
        return value

    lsh_ops = group_ops("dedup", "lsh", driver.run_dedup_unit, fan_out)

    @dg.op(name="dedup_verify_plan", ins={"plan": dg.In(dict), **after_groups(fan_out)},
           description="Merge the bands' candidate pairs, build the shingle store; name the verification units.")
    def verify_plan_op(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict) -> dict:
        if plan["cached"] is not None:
            return plan
        with corpus_failure("dedup"):
            settings, layout = corpus.load()
            value = plan_value(driver.plan_verify(layout, settings, plan["key"], log=context.log.info), plan["started"])
        value["info"] = {**plan["info"], **value["info"]}
        return value

    verify_ops = group_ops("dedup", "verify", driver.run_dedup_unit, fan_out)

    @dg.op(name="dedup_finish", ins={"plan": dg.In(dict), **after_groups(fan_out)}, out=dg.Out(dg.Nothing),
           description="Clusters, dropped/clusters/pairs tables and the stage record.")
    def finish_op(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict):
        with corpus_failure("dedup"):
            settings, layout = corpus.load()
            stats = plan["cached"] if plan["cached"] is not None else driver.finish_dedup(
                layout, settings, plan["key"], log=context.log.info)
            metadata = dedup_metadata(layout, stats, plan["info"]["sources"], plan["info"]["waiting"],
                                      settings.dedup.jaccard_threshold, seconds_since_plan(plan))
        return versioned_output(metadata, stats["key"])

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
        plan = plan_op(clean_documents=clean_documents, minhash_signatures=minhash_signatures)
        verify = verify_plan_op(plan=plan, **wire_groups(lsh_ops, plan))
        return finish_op(plan=verify, **wire_groups(verify_ops, verify))

    return dedup


dedup = dedup_asset()
