"""Helpers every Dagster definition shares: the one error adapter, the source set of global assets, tables."""

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, load_ledger
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME


@contextmanager
def corpus_failure(step: str) -> Iterator[None]:
    """Turn any CorpusError into a Dagster failure whose description says what and where, with metadata."""
    try:
        yield
    except CorpusError as exc:
        raise dg.Failure(
            description=f"{step}: {exc}",
            metadata={"error": type(exc).__name__, "step": step},
        ) from exc


def source_for_partition(layout: Layout, partition_key: str) -> Source:
    """The ledger row of a partition; a clear error when the partition is no longer in the ledger."""
    with corpus_failure("ledger"):
        sources = load_ledger(layout.ledger)
    for src in sources:
        if src.source_id == partition_key:
            return src
    raise dg.Failure(f"source {partition_key!r} is not in the ledger {layout.ledger}; the ledger sensor removes stale partitions")


def materialized_sources(context: dg.AssetExecutionContext, upstream: str) -> tuple[list[str], list[str]]:
    """(sources to build, sources waiting): the current source partitions whose `upstream` is materialized.

    Dagster is the source of truth: a source in the ledger that no run has materialized yet is left out
    (and named), never a failure of the global step; a removed source has no partition any more.
    """
    instance = context.instance
    current = set(instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    done = instance.get_materialized_partitions(dg.AssetKey(upstream))
    ready = sorted(current & set(done))
    waiting = sorted(current - set(done))
    if waiting:
        context.log.warning(f"left out until {upstream} is materialized for them: {', '.join(waiting)}")
    return ready, waiting


def md_table(header: list[str], rows: list[list[Any]]) -> dg.MetadataValue:
    """A markdown table for the UI; cell text is escaped so `<EMAIL>` stays visible."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def md_escape(value: Any) -> str:
    """Escape text for a markdown cell: HTML-like placeholders, pipes and newlines."""
    text = str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def check_result(report: CheckReport) -> dg.AssetCheckResult:
    """The one translation of a CheckReport into a Dagster check result."""
    metadata: dict[str, Any] = dict(report.metadata)
    metadata["problems"] = report.n_problems
    if report.problems:
        metadata["details"] = dg.MetadataValue.md("\n".join(f"- {md_escape(p)}" for p in report.problems))
    return dg.AssetCheckResult(passed=report.passed, metadata=metadata)


def figures_markdown(paths: list[str], title: str = "") -> dg.MetadataValue:
    """PNG figures embedded in markdown metadata, so the UI shows them on the latest materialization."""
    parts = [f"**{md_escape(title)}**"] if title else []
    for path in paths:
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        parts.append(f"![{md_escape(Path(path).stem)}](data:image/png;base64,{data})")
    return dg.MetadataValue.md("\n\n".join(parts))
