"""corpus_analysis: token lengths, two views of duplication, clusters, figures and a report, verified independently."""

import dagster as dg

from corpus_dagster.analysis import driver
from corpus_dagster.defs.common import (
    check_result,
    corpus_failure,
    figures_markdown,
    materialized_sources,
    table,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig

PREVIEW_LIMIT = 6000  # characters of REPORT.md shown inline; the whole file is the `report` path


def _pct(value) -> float | None:
    """A percentage to 2 decimals (what the report prints)."""
    return None if value is None else round(float(value), 2)


def _level(line: str) -> int:
    """The level of a markdown ATX heading (`## x` -> 2), 0 for any other line."""
    hashes = len(line) - len(line.lstrip("#"))
    return hashes if 0 < hashes <= 6 and line[hashes:hashes + 1] in (" ", "") else 0


def report_preview(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """REPORT.md for the UI: without its figure lines (the `figures` entry embeds the PNGs), without a heading
    left with nothing under it (the figures' own), cut at a line boundary within `limit` characters."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("![")]
    kept: list[str] = []
    for i, line in enumerate(lines):
        level = _level(line)
        if level:
            after = next((ln for ln in lines[i + 1:] if ln.strip()), "")
            if not after or 0 < _level(after) <= level:
                continue  # an empty section: nothing before the next heading of its level or higher
        if line.strip() or (kept and kept[-1].strip()):
            kept.append(line)
    out: list[str] = []
    size = 0
    for line in kept:
        if size + len(line) + 1 > limit:
            out += ["", "*(cut here: the whole report is the `report` file)*"]
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out).strip() + "\n"


@dg.asset(
    deps=["clean_documents", "minhash_signatures", "shards", "token_streams"],
    group_name="analysis",
    kinds={"parquet", "matplotlib"},
    code_version=driver.CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def corpus_analysis(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Measure the clean (pre-dedup) documents and the published shards: lengths per tokenizer, duplicates, clusters."""
    with corpus_failure("corpus_analysis"):
        settings, layout = corpus.load()
    sources, waiting = materialized_sources(context, "clean_documents", layout)
    with corpus_failure("corpus_analysis"):
        stats = driver.run_analysis_stage(layout, settings, sources, log=context.log.info)
    report = layout.analysis / "REPORT.md"
    overall = stats.get("steps", {}).get("clusters", {}).get("overall", {})
    views = [[view, _pct(v.get("affected_pct")), _pct(v.get("removable_pct"))] for view, v in overall.items()]
    figures = [str(layout.analysis / f) for f in stats.get("figures", []) if str(f).endswith(".png")]
    metadata = {
        "sources": len(sources),
        "sources_waiting": ", ".join(waiting) or "none",
        # what it measured: the clean documents of every source, before dedup (so duplicates can be counted)
        "clean_documents_measured": stats.get("steps", {}).get("scan", {}).get("docs", 0),
        "with_exact_duplicates": stats.get("steps", {}).get("duplicates", {}).get("docs_with_exact", 0),
        "with_near_duplicates": stats.get("steps", {}).get("duplicates", {}).get("docs_with_near", 0),
        "views": table(["view", "affected %", "removable % (lower bound)"], views),
        "cached": stats["cached"],
        "stage_key": stats["key"],
        "report": dg.MetadataValue.path(str(report)),
        "path": dg.MetadataValue.path(str(layout.analysis)),
    }
    if report.exists():
        metadata["report_preview"] = dg.MetadataValue.md(report_preview(report.read_text(encoding="utf-8")))
    if figures:
        metadata["figures"] = figures_markdown(figures)
    return dg.MaterializeResult(data_version=dg.DataVersion(stats["key"]), metadata=metadata)


def _verify(corpus: CorpusConfig, which: str) -> dg.AssetCheckResult:
    with corpus_failure(f"analysis check {which}"):
        settings, layout = corpus.load()
        return check_result(driver.verify_analysis(layout, settings, which))


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="Clusters' min Jaccard recomputed from the texts by verify/ (a seeded sample per build) >= the threshold.")
def clusters_complete_linkage(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "clusters")


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="Exact duplicate groups recounted by hashing the corpus directly (verify/).")
def exact_groups_recounted(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "exact_groups")


@dg.asset_check(asset=corpus_analysis, blocking=True,
                description="A seeded sample of doc_duplicates records re-scored by exact Jaccard (verify/).")
def duplicates_sample_rescored(corpus: CorpusConfig) -> dg.AssetCheckResult:
    return _verify(corpus, "duplicates_sample")


ANALYSIS_ASSETS = [corpus_analysis]
ANALYSIS_CHECKS = [clusters_complete_linkage, exact_groups_recounted, duplicates_sample_rescored]
