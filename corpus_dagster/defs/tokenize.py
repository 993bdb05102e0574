"""Dagster layer of the token streams (data.07): the `token_streams` asset and its checks. Logic lives in
corpus_dagster.tokenize; this file reads the config, calls it and reports."""

from typing import Any

import dagster as dg

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan
from corpus_dagster.defs.common import (
    check_result,
    corpus_failure,
    table,
    table_metadata,
    timing,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.units import unit_graph
from corpus_dagster.tokenize import driver
from corpus_dagster.tokenize.outputs import stream_counts


def _splits_table(manifest: dict[str, Any]) -> dg.MetadataValue:
    return table(["split", "documents", "tokens", "streams", "bytes"], [
        [split, e["n_docs"], e["n_tokens"], len(e["files"]), sum(p["bin"]["bytes"] for p in e["files"])]
        for split, e in manifest["splits"].items()
    ], {"streams": "Megatron .bin/.idx pairs", "bytes": "bytes of the .bin files"})


def streams_metadata(context: dg.OpExecutionContext, layout: Layout, run: driver.TokensResult,
                     own_seconds: float = 0.0) -> dict:
    """What the UI shows of a token-streams run; the splits appear once, as a table. `own_seconds`: this run's
    time, the `seconds` of a run that reused the build."""
    result, m, cached = run.build, run.manifest, run.cached
    if result is None:  # unchanged inputs and settings: nothing was rebuilt
        context.log.info(f"token streams unchanged (key {run.key}); nothing rebuilt")
        return {**table_metadata(m["n_docs"]), "path": dg.MetadataValue.path(str(layout.tokens)), "cached": True,
                "n_docs": m["n_docs"], "n_tokens": m["n_tokens"], "tokenizer": m["tokenizer"]["name"],
                **stream_counts(m), "split_counts": _splits_table(m), "seconds": timing(own_seconds)}
    mb = result.text_bytes / 1e6
    context.log.info(
        f"tokenized {m['n_docs']} documents ({mb:.1f} MB) into {m['n_tokens']} tokens "
        f"in {result.elapsed_s:.1f}s with {result.workers} worker(s) x {result.threads} thread(s)"
    )
    return {
        **table_metadata(m["n_docs"]),
        "path": dg.MetadataValue.path(str(layout.tokens)),
        "cached": cached,
        "tokenizer": m["tokenizer"]["name"],
        "vocab_size": m["tokenizer"]["vocab_size"],
        "dtype": m["dtype"],
        "eod_id": m["tokenizer"]["special_tokens"]["eod"]["id"],
        "engine": result.engine,
        "n_docs": m["n_docs"],
        "n_tokens": m["n_tokens"],
        "train_tokens": m["splits"]["train"]["n_tokens"],
        "val_tokens": m["splits"]["val"]["n_tokens"],
        **stream_counts(m),
        "bytes": sum(p["bin"]["bytes"] for e in m["splits"].values() for p in e["files"]),
        "seconds": timing(result.elapsed_s),
        "mb_per_s": round(mb / result.elapsed_s, 2) if result.elapsed_s else 0.0,
        "tokens_per_s": round(m["n_tokens"] / result.elapsed_s) if result.elapsed_s else 0,
        "workers": result.workers,
        "threads_per_worker": result.threads,
        "split_counts": _splits_table(m),
    }


def report(context: dg.OpExecutionContext, layout: Layout, settings: Settings, result: driver.TokensResult,
           plan: Plan, seconds: float) -> dict:
    return streams_metadata(context, layout, result, seconds)


def token_streams_asset(fan_out: int = 1) -> dg.AssetsDefinition:
    """Token streams as a graph: plan (one unit per row group of each published shard), tokenizing spread over
    `fan_out` steps, finish (per-split .bin/.idx files in shard order, counts, _TOKENS.json, record)."""
    graph = unit_graph(driver.TOKENS_UNITS, fan_out, ins=("manifest",), report=report, descriptions={
        "plan": "Check the shards' manifest; one unit per row group of each published shard.",
        "finish": "Per-split Megatron files in shard order, token counts, _TOKENS.json, stage record."})

    @dg.graph_asset(
        name="token_streams",
        ins={"manifest": dg.AssetIn(dagster_type=dg.Nothing)},
        group_name="tokenize",
        kinds={"numpy", "parquet"},
        code_version=driver.CODE_VERSION,
        automation_condition=when_inputs_change(),
        description="Megatron-LM .bin/.idx token streams per split, with per-document token counts, from the shards.",
    )
    def token_streams(manifest):
        return graph(manifest=manifest)

    return token_streams


token_streams = token_streams_asset()


@dg.asset_check(asset="token_streams", blocking=True)
def token_counts_consistent(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """_TOKENS.json totals equal the per-document counts and the .idx sizes; files match their sha256."""
    with corpus_failure("token_counts_consistent"):
        return check_result(driver.check_streams_counts(corpus.layout()))


@dg.asset_check(asset="token_streams", blocking=True)
def token_sample_decodes(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """A sample of documents decodes back to exactly their shard text, framed by BOS/EOD as configured."""
    with corpus_failure("token_sample_decodes"):
        settings, layout = corpus.load()
        return check_result(driver.check_streams_decode(layout, settings))


@dg.asset_check(asset="token_streams", blocking=False)
def token_streams_reproducible(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """A rebuild with another worker count gives byte-identical files (off: tokenize.rebuild_check)."""
    settings, layout = corpus.load()
    if not settings.tokenize.rebuild_check:
        return dg.AssetCheckResult(passed=True, metadata={"skipped": "tokenize.rebuild_check is false"})
    with corpus_failure("token_streams_reproducible"):
        return check_result(driver.check_streams_rebuild(layout, settings))


TOKEN_ASSETS = [token_streams]
TOKEN_CHECKS = [token_counts_consistent, token_sample_decodes, token_streams_reproducible]
