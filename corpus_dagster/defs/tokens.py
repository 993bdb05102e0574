"""Dagster layer of the token streams (data.07): the `token_streams` asset and its checks. Logic lives in
corpus_dagster.tokenize; this file reads the config, calls it and reports."""

from typing import Any

import dagster as dg

from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.errors import CorpusError
from corpus_dagster.tokenize import build_token_streams, check_counts, check_decode_sample, check_rebuild
from corpus_dagster.tokenize.verify import CheckReport


def _markdown_table(manifest: dict[str, Any]) -> str:
    rows = ["| split | documents | tokens | files |", "|---|---:|---:|---|"]
    for split, entry in manifest["splits"].items():
        files = ", ".join(f"`{p['prefix']}` ({p['bin']['bytes']:,} B)" for p in entry["files"])
        rows.append(f"| {split} | {entry['n_docs']:,} | {entry['n_tokens']:,} | {files} |")
    return "\n".join(rows)


@dg.asset(
    group_name="tokenize",
    kinds={"numpy", "parquet"},
    deps=["manifest"],
    automation_condition=dg.AutomationCondition.eager(),
)
def token_streams(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Megatron-LM .bin/.idx token streams per split, with per-document token counts, from the shards."""
    cfg, layout = corpus.load()
    try:
        result = build_token_streams(layout.shards, layout.tokens, cfg["tokenize"], workers=cfg["workers"])
    except CorpusError as exc:  # bad input or an unloadable tokenizer: the message says what to do
        raise dg.Failure(description=str(exc)) from exc
    m = result.manifest
    mb = result.text_bytes / 1e6
    context.log.info(
        f"tokenized {m['n_docs']} documents ({mb:.1f} MB) into {m['n_tokens']} tokens "
        f"in {result.elapsed_s:.1f}s with {result.workers} worker(s) x {result.threads} thread(s)"
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(layout.tokens)),
            "tokenizer": m["tokenizer"]["name"],
            "vocab_size": m["tokenizer"]["vocab_size"],
            "dtype": m["dtype"],
            "eod_id": m["tokenizer"]["special_tokens"]["eod"]["id"],
            "engine": result.engine,
            "n_docs": m["n_docs"],
            "n_tokens": m["n_tokens"],
            "train_tokens": m["splits"]["train"]["n_tokens"],
            "val_tokens": m["splits"]["val"]["n_tokens"],
            "files": sum(len(e["files"]) for e in m["splits"].values()),
            "bytes": sum(p["bin"]["bytes"] for e in m["splits"].values() for p in e["files"]),
            "elapsed_s": round(result.elapsed_s, 3),
            "mb_per_s": round(mb / result.elapsed_s, 2) if result.elapsed_s else 0.0,
            "tokens_per_s": round(m["n_tokens"] / result.elapsed_s) if result.elapsed_s else 0,
            "workers": result.workers,
            "threads_per_worker": result.threads,
            "splits": dg.MetadataValue.md(_markdown_table(m)),
        }
    )


def _result(report: CheckReport) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = dict(report.metadata)
    metadata["problems"] = report.n_problems
    if report.problems:
        metadata["details"] = dg.MetadataValue.md("\n".join(f"- {p}" for p in report.problems))
    return dg.AssetCheckResult(passed=report.passed, metadata=metadata)


@dg.asset_check(asset=token_streams, blocking=True)
def token_counts_consistent(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """_TOKENS.json totals equal the per-document counts and the .idx sizes; files match their sha256."""
    return _result(check_counts(corpus.layout().tokens))


@dg.asset_check(asset=token_streams, blocking=True)
def token_sample_decodes(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """A sample of documents decodes back to exactly their shard text, framed by BOS/EOD as configured."""
    cfg, layout = corpus.load()
    return _result(check_decode_sample(layout.shards, layout.tokens, cfg["tokenize"]))


@dg.asset_check(asset=token_streams, blocking=False)
def token_streams_reproducible(corpus: CorpusConfig) -> dg.AssetCheckResult:
    """A rebuild with another worker count gives byte-identical files (off: tokenize.rebuild_check)."""
    cfg, layout = corpus.load()
    if not cfg["tokenize"]["rebuild_check"]:
        return dg.AssetCheckResult(passed=True, metadata={"skipped": "tokenize.rebuild_check is false"})
    return _result(check_rebuild(layout.shards, layout.tokens, cfg["tokenize"], cfg["workers"]))


TOKEN_ASSETS = [token_streams]
TOKEN_CHECKS = [token_counts_consistent, token_sample_decodes, token_streams_reproducible]
