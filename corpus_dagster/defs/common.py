"""Small helpers shared by the Dagster definitions: sources of a run, markdown tables."""


from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from corpus_dagster.layout import Layout
from corpus_dagster.ledger import Source, load_ledger


def ledger_sources(layout: Layout) -> list[Source]:
    """The validated ledger rows."""
    return load_ledger(layout.ledger)


def ledger_source_ids(layout: Layout) -> list[str]:
    """The source ids of the ledger, in ledger order: the sources a global asset reads."""
    return [s.source_id for s in ledger_sources(layout)]


@contextmanager
def upstream_required(what: str) -> Iterator[None]:
    """Turn a missing upstream output into a Dagster failure that says what to materialize first."""
    try:
        yield
    except FileNotFoundError as exc:
        raise dg.Failure(description=f"{exc}; materialize {what} first") from exc


def source_for_partition(layout: Layout, partition_key: str) -> Source:
    """The ledger row of a partition; a clear error when the partition is no longer in the ledger."""
    for src in ledger_sources(layout):
        if src.source_id == partition_key:
            return src
    raise dg.Failure(f"source {partition_key!r} is not in the ledger {layout.ledger}; the ledger sensor removes stale partitions")


def md_table(header: list[str], rows: list[list[Any]]) -> dg.MetadataValue:
    """A markdown table for the UI."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))
