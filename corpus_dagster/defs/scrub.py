"""scrubbed: the kept documents of every source with PII replaced by typed placeholders (data.05)."""

import dagster as dg

from corpus_dagster.defs.common import ledger_source_ids, md_table, upstream_required
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.scrub.api import PII_TYPES
from corpus_dagster.stages.dedup import dropped_ids
from corpus_dagster.stages.scrub import run_scrub


@dg.asset(
    deps=["dedup"],
    group_name="scrub",
    kinds={"parquet"},
    automation_condition=dg.AutomationCondition.eager(),
)
def scrubbed(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Remove what dedup dropped and scrub PII per source (cached per source), recomputing sha256 and n_chars."""
    resolved, layout = corpus.load()
    with upstream_required("the upstream assets"):
        per_source = run_scrub(layout, resolved, ledger_source_ids(layout), dropped_ids(layout))
    rows = [[sid, s["docs"], *[s["pii"][t] for t in PII_TYPES], s["cached"]] for sid, s in per_source.items()]
    examples = [[sid, *e] for sid, s in per_source.items() for e in s["examples"][:3]]
    totals = {t: sum(s["pii"][t] for s in per_source.values()) for t in PII_TYPES}
    return dg.MaterializeResult(
        metadata={
            "redactions": sum(totals.values()),
            **{f"pii_{t}": n for t, n in totals.items()},
            "per_source": md_table(["source", "docs", *PII_TYPES, "cached"], rows),
            "examples": md_table(["source", "id", "type", "context"], examples),
            "seconds": round(sum(s["seconds"] for s in per_source.values()), 3),
        }
    )
