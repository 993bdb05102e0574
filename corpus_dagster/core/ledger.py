"""The ledger: one JSON line per source. Load, validate every row, reject duplicates."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from corpus_dagster.core.config import (
    Violation,
    fill_defaults,
    json_path,
    load_schema,
    locate_violations,
    schema_violations,
)
from corpus_dagster.core.documents import INFO_COLUMNS
from corpus_dagster.core.errors import ConfigError, LedgerError
from corpus_dagster.core.row_predicate import predicate_problem
from corpus_dagster.core.settings import Settings


@dataclass(frozen=True)
class Source:
    """A validated ledger row."""

    source_id: str
    urls: tuple[str, ...]
    format: str
    license_spdx: str
    text_field: str = "text"
    url_field: str | None = None
    sha256: dict[str, str] = field(default_factory=dict)
    description: str = ""
    where: str | None = None
    keep_fields: tuple[str, ...] = ()
    hub_dataset: str | None = None
    homepage: str | None = None  # a web page of the source; the release card links it
    date_field: str | None = None  # the record's date: the release's created_at of new content
    category: str | None = None
    id_field: str | None = None  # the source's own record id: release ids name the row by it

    def to_json(self) -> dict[str, Any]:
        """The ledger row as written to LEDGER.jsonl (keys in schema order)."""
        row: dict[str, Any] = {
            "source_id": self.source_id,
            "urls": list(self.urls),
            "format": self.format,
            "text_field": self.text_field,
            "url_field": self.url_field,
            "license_spdx": self.license_spdx,
            "sha256": dict(self.sha256),
        }
        if self.description:
            row["description"] = self.description
        if self.where is not None:
            row["where"] = self.where
        if self.keep_fields:
            row["keep_fields"] = list(self.keep_fields)
        if self.hub_dataset is not None:
            row["hub_dataset"] = self.hub_dataset
        if self.homepage is not None:
            row["homepage"] = self.homepage
        if self.date_field is not None:
            row["date_field"] = self.date_field
        if self.category is not None:
            row["category"] = self.category
        if self.id_field is not None:
            row["id_field"] = self.id_field
        return row


# Release metadata keys the pipeline fills itself: a kept source field cannot take one (`title` and `url`
# can: a kept `title` is the title, a kept `url` is the url of a source whose url_field it is or that has none).
METADATA_KEYS = ("license", "source_file", "cleaned", "source_id", "doc_id", "parent_id", "segment", "char_span")


def kept_field_clashes(row: dict[str, Any]) -> str:
    """Why the row's keep_fields cannot all be kept (empty when they can): a name the document info table
    or the release metadata uses for its own column, or a `url` that is not the row's url_field."""
    kept = list(row.get("keep_fields") or ())
    own = [f for f in kept if f in INFO_COLUMNS or f in METADATA_KEYS]
    if own:
        return (f"{own} are names the pipeline gives its own columns ({', '.join(INFO_COLUMNS + METADATA_KEYS)}); "
                f"remove them from keep_fields")
    if "url" in kept and row.get("url_field") not in (None, "url"):
        return f"'url' would hide the url_field {row['url_field']!r} in the release metadata; remove it from keep_fields"
    return ""


def parse_ledger_lines(lines: list[str], ledger_name: str) -> list[Source]:
    """Validate ledger lines; raise LedgerError naming the file, line and JSON path of every problem."""
    schema = load_schema("ledger.schema.json")
    violations: list[str] = []
    sources: list[Source] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            violations.append(f"line {lineno}: not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        row_violations = schema_violations(row, schema)
        if row_violations:
            violations.extend(f"line {lineno}: {v}" for v in row_violations)
            continue
        row = fill_defaults(row, schema)
        sid = row["source_id"]
        if sid in first_line:
            violations.append(f"line {lineno}: $.source_id: duplicate source_id {sid!r} (first on line {first_line[sid]})")
            continue
        first_line[sid] = lineno
        clash = kept_field_clashes(row)
        if clash:
            violations.append(f"line {lineno}: $.keep_fields: {clash}")
            continue
        if row.get("id_field") is not None and row["id_field"] not in row["keep_fields"]:
            # the release reads the value from the kept fields (ingest stores nothing else per record)
            violations.append(f"line {lineno}: $.id_field: {row['id_field']!r} must also be listed in keep_fields")
            continue
        if row.get("date_field") is not None and row["date_field"] not in row["keep_fields"]:
            violations.append(f"line {lineno}: $.date_field: {row['date_field']!r} must also be listed in keep_fields")
            continue
        refused = predicate_problem(row["where"]) if row.get("where") is not None else None
        if refused is not None:  # before any run: polars never sees a `where` outside the row-predicate grammar
            violations.append(f"line {lineno}: $.where: {refused} (see docs/sources.md, Selecting records)")
            continue
        sources.append(
            Source(
                source_id=sid,
                urls=tuple(row["urls"]),
                format=row["format"],
                license_spdx=row["license_spdx"],
                text_field=row["text_field"],
                url_field=row["url_field"],
                sha256=dict(row["sha256"]),
                description=row.get("description", ""),
                where=row.get("where"),
                keep_fields=tuple(row["keep_fields"]),
                hub_dataset=row.get("hub_dataset"),
                homepage=row.get("homepage"),
                date_field=row.get("date_field"),
                category=row.get("category"),
                id_field=row.get("id_field"),
            )
        )
    if violations:
        raise LedgerError(ledger_name, violations)
    return sources


def load_ledger(path: str | Path) -> list[Source]:
    """Read and validate a ledger file. A missing file is an error that says where it was expected."""
    path = Path(path)
    if not path.exists():
        raise LedgerError(str(path), ["$: ledger file not found; write one JSON object per source (see docs/sources.md)"])
    return list(_parse_ledger_cached(path.read_bytes(), str(path)))


@lru_cache(maxsize=8)
def _parse_ledger_cached(data: bytes, name: str) -> tuple[Source, ...]:
    """The validated rows of one ledger's bytes, kept per process: every step of every source run reads
    the ledger, and validating all N rows each time made a run cost O(N) (0.4 s at 100 sources)."""
    return tuple(parse_ledger_lines(data.decode("utf-8").splitlines(), name))


def ledger_sha256(path: str | Path) -> str:
    """SHA-256 of the ledger file bytes: the manifest's ledger_ref pins the exact ledger a build used."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_ledger(path: str | Path, sources: list[Source]) -> None:
    """Write a ledger atomically, one row per source, in the order given."""
    from corpus_dagster.core.atomic import atomic_write_bytes

    body = "".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in sources)
    atomic_write_bytes(Path(path), body.encode("utf-8"))


def ledger_line(path: str | Path, source_id: str) -> int | None:
    """The 1-based line of the ledger row of `source_id` (None if no row names it): errors found after loading,
    when the Source is all there is, still send a person to the row."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError):
        return None
    for lineno, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("source_id") == source_id:
            return lineno
    return None


MAX_IDS_SHOWN = 20


def source_lists(settings: Settings) -> list[tuple[tuple[str | int, ...], list[Any]]]:
    """Every `sources` list the config sets (JSON path parts, ids), wherever the schema has a `sources` key
    (read from the resolved dict, whose paths are the JSON paths an error names)."""
    out = []
    for parts in _sources_keys(load_schema("corpus-config.schema.json"), ()):
        node: Any = settings.resolved
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, list):
            out.append((parts, node))
    return out


def _sources_keys(schema: dict[str, Any], prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = []
    for key, sub in schema.get("properties", {}).items():
        if key == "sources":
            found.append((*prefix, key))
        elif isinstance(sub, dict):
            found.extend(_sources_keys(sub, (*prefix, key)))
    return found


def check_config_against_ledger(settings: Settings, sources: list[Source] | list[str],
                                config_path: str | Path | None) -> None:
    """Raise ConfigError for every `sources` entry of the config that names no ledger row.

    The schema cannot know the ledger, and a rule limited to a misspelt id would silently apply to no source;
    the message names the config file, line and JSON path, and the ids the ledger has.
    """
    known = [s if isinstance(s, str) else s.source_id for s in sources]
    known_set = set(known)
    problems: list[Violation] = []
    for parts, ids in source_lists(settings):
        for i, sid in enumerate(ids):
            if sid not in known_set:
                where = (*parts, i)
                problems.append((where, f"{json_path(where)}: unknown source {sid!r} ({_known_ids(sid, known)})"))
    if problems:
        where = str(config_path) if config_path is not None else "<config>"
        raise ConfigError(where, locate_violations(config_path, problems), [p for p, _ in problems])


def _known_ids(sid: Any, known: list[str]) -> str:
    """The ledger's ids for the message: all of them, or the closest ones when there are many."""
    if not known:
        return "the ledger has no sources"
    if len(known) <= MAX_IDS_SHOWN:
        return "the ledger has: " + ", ".join(known)
    import difflib

    close = difflib.get_close_matches(str(sid), known, n=5, cutoff=0.5)
    return f"the ledger has {len(known)} sources" + (f"; closest: {', '.join(close)}" if close else "")
