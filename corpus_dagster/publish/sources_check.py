"""The published corpus holds only sources the ledger still lists: a takedown that did not take is a failed check."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.reconcile import read_ledger_rows


def published_source_ids(shard_paths: list[Path]) -> list[str]:
    """Distinct `source_id` values of the published shards (reads that one column)."""
    found: set[str] = set()
    for path in shard_paths:
        try:
            column = pq.read_table(path, columns=["source_id"]).column("source_id")
        except OSError as exc:
            raise OSError(f"{path.name}: cannot be read: {type(exc).__name__}: {exc}") from exc
        found.update(str(v) for v in pc.unique(column).to_pylist() if v is not None)
    return sorted(found)


def check_sources_in_ledger(layout: Layout, shard_paths: list[Path]) -> CheckReport:
    """Every source in the shards has a row in the ledger (a row that is invalid but names it counts)."""
    rows = read_ledger_rows(layout.ledger)
    listed = rows.listed
    published = published_source_ids(shard_paths)
    report = CheckReport(metadata={"published_sources": len(published), "ledger_sources": len(listed)})
    for sid in published:
        if sid not in listed:
            report.fail(f"source {sid!r} is published but has no row in {layout.ledger}; rebuild the corpus "
                        f"(`python -m corpus_dagster.run CONFIG`, or materialize shards_and_manifest) to remove it")
    return report
