"""scrubbed: the kept documents of every source with PII replaced by typed placeholders (data.05)."""

import time

import dagster as dg

from corpus_dagster.core.records import stage_key
from corpus_dagster.defs.common import (
    PREVIEW_ROWS,
    corpus_failure,
    preview_text,
    step_seconds,
    table,
    table_metadata,
    when_inputs_change,
)
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.scrub import driver
from corpus_dagster.scrub.outputs import PII_TYPES


@dg.asset(
    deps=["dedup"],
    group_name="scrub",
    kinds={"parquet"},
    code_version=driver.CODE_VERSION,
    automation_condition=when_inputs_change(),
)
def scrubbed(context: dg.AssetExecutionContext, corpus: CorpusConfig) -> dg.MaterializeResult:
    """Remove what dedup dropped and scrub PII per source (cached per source), recomputing sha256 and n_chars."""
    with corpus_failure("scrubbed"):
        settings, layout = corpus.load()
        start = time.monotonic()
        per_source = driver.run_scrub(layout, settings, log=context.log.info)
        own = time.monotonic() - start
    rows = [[sid, s["docs"], *[s["pii"][t] for t in PII_TYPES], s["cached"]] for sid, s in per_source.items()]
    examples = [[sid, *e[:2], preview_text(e[2]) if len(e) > 2 else ""]
                for sid, s in per_source.items() for e in s["examples"][:3]][:PREVIEW_ROWS]
    totals = {t: sum(s["pii"][t] for s in per_source.values()) for t in PII_TYPES}
    version = stage_key("scrub-all", driver.CODE_VERSION, [[sid, s["key"]] for sid, s in per_source.items()], None)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            **table_metadata(sum(s["docs"] for s in per_source.values())),
            "redactions": dg.MetadataValue.int(sum(totals.values())),
            **{f"pii_{t}": n for t, n in totals.items()},
            "pii_by_type": table(["type", "placeholders"], [[t, n] for t, n in totals.items()]),
            "per_source": table(["source", "docs", *PII_TYPES, "cached"], rows),
            # a table, whatever the examples: the UI shows a table inline and its cells as plain text (a
            # placeholder such as <EMAIL> reads as itself), where markdown flips to a link past 1,000 characters
            "examples": table(["source", "id", "type", "context"], examples,
                              {"context": "the text around the placeholder, after the scrub"}),
            "recomputed_sources": sum(1 for s in per_source.values() if not s["cached"]),
            "cached": all(s["cached"] for s in per_source.values()),
            **step_seconds(own, sum(s["seconds"] for s in per_source.values()),
                           any(s["cached"] for s in per_source.values())),
        },
    )
