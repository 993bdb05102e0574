"""Ledger against source partitions: which partitions to add and remove, and which removed sources' data to delete.

One plan serves every entry point (the CLI, the ledger sensor, the refresh schedule, the global assets of a
UI launch), so a row removed from the ledger is gone from the corpus whichever way it is built next.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, load_ledger, parse_ledger_lines
from corpus_dagster.core.records import RECORD


@dataclass
class LedgerRows:
    """The ledger read row by row: valid sources, problems (file, line, JSON path), ids named by bad rows."""

    sources: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    named_by_invalid: set[str] = field(default_factory=set)
    unnamed_invalid: int = 0

    @property
    def ids(self) -> list[str]:
        """Valid rows' source ids, in ledger order."""
        return [s.source_id for s in self.sources]

    @property
    def listed(self) -> set[str]:
        """Every source id a row names, valid or not: a source with a broken row is not taken for removed."""
        return set(self.ids) | self.named_by_invalid

    def plan(self, partitions: Iterable[str]) -> PartitionPlan:
        """The partition changes this ledger asks of `partitions`."""
        return plan_partitions(self.ids, partitions, self.named_by_invalid, self.unnamed_invalid)


def read_ledger_rows(path: Path) -> LedgerRows:
    """Validate each line on its own, so one bad row blocks only itself (a missing file raises LedgerError)."""
    if not path.exists():
        load_ledger(path)  # raises the one error that says where the ledger was expected
    out = LedgerRows()
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            (source,) = parse_ledger_lines([line], str(path))
        except LedgerError as exc:
            out.problems.extend(re.sub(r"^line 1:", f"line {lineno}:", v) for v in exc.violations)
            sid = _raw_source_id(line)
            if sid is None:
                out.unnamed_invalid += 1
            else:
                out.named_by_invalid.add(sid)
            continue
        if source.source_id in first_line:
            out.problems.append(f"line {lineno}: $.source_id: duplicate source_id {source.source_id!r} "
                                f"(first on line {first_line[source.source_id]})")
            continue
        first_line[source.source_id] = lineno
        out.sources.append(source)
    return out


def _raw_source_id(line: str) -> str | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    sid = row.get("source_id") if isinstance(row, dict) else None
    return sid if isinstance(sid, str) else None


@dataclass(frozen=True)
class PartitionPlan:
    """What turns the current source partitions into the ledger's: ids to add and to remove, in a fixed order."""

    add: list[str]
    remove: list[str]
    held_back: list[str]  # would be removed, but an invalid row that names no source_id may be one of them

    @property
    def changed(self) -> bool:
        return bool(self.add or self.remove)


def plan_partitions(ledger_ids: Iterable[str], partitions: Iterable[str], named_by_invalid: Iterable[str] = (),
                    unnamed_invalid: int = 0) -> PartitionPlan:
    """Rows added become partitions, partitions whose row is gone are removed.

    A source whose row is invalid but still names it keeps its partition (fixing a typo must not delete a
    source); while some invalid row names no source_id at all, nothing is removed, since it may be any of them.
    """
    ledger = list(dict.fromkeys(ledger_ids))
    existing = set(partitions)
    add = [sid for sid in ledger if sid not in existing]
    gone = sorted(existing - set(ledger) - set(named_by_invalid))
    if unnamed_invalid:
        return PartitionPlan(add=add, remove=[], held_back=gone)
    return PartitionPlan(add=add, remove=gone, held_back=[])


def buildable_sources(ledger_ids: Iterable[str], partitions: Iterable[str], materialized: Iterable[str]) -> list[str]:
    """The sources a global step builds over: in the ledger, a current partition, and materialized (sorted)."""
    return sorted(set(ledger_ids) & set(partitions) & set(materialized))


def sources_on_disk(layout: Layout) -> list[str]:
    """Source ids that own data under the artifacts root: raw parts, downloads or per-source stage folders."""
    found: set[str] = set()
    for base in (layout.root / "corpus" / "raw", layout.root / "cache" / "downloads"):
        if base.is_dir():
            found.update(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    stages = layout.root / "stages"
    if stages.is_dir():
        for stage in stages.iterdir():
            if stage.is_dir():
                found.update(p.name for p in stage.iterdir() if _is_source_folder(stage, p))
    return sorted(found)


def _is_source_folder(stage: Path, folder: Path) -> bool:
    """A per-source stage folder: it holds a record of its own, or sits in a stage that has no record at its
    top (a global stage keeps one `_RECORD.json` beside its key folders, a per-source stage one per source)."""
    if not folder.is_dir() or folder.name.startswith((".", "_")):
        return False
    return (folder / RECORD).is_file() or not (stage / RECORD).is_file()


def purge_removed_sources(layout: Layout, ledger_ids: Iterable[str], published_ids: Iterable[str]) -> dict[str, list[str]]:
    """Delete the raw parts, downloads and per-source stage outputs of sources that left the ledger.

    Called once a corpus has been published: a source still in the published shards keeps its data (the
    published corpus was built from it); one neither in the ledger nor published loses it. Returns
    {source_id: [deleted folders]}.
    """
    keep = set(ledger_ids) | set(published_ids)
    deleted: dict[str, list[str]] = {}
    for sid in sources_on_disk(layout):
        if sid in keep:
            continue
        folders = layout.source_outputs(sid)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        deleted[sid] = [str(f) for f in folders]
    return deleted
