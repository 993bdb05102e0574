"""Helpers every Dagster definition shares: the one error adapter, the source set of global assets, tables,
previews, the automation condition."""

import base64
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_dagster.core.atomic import storage_error
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source, load_ledger
from corpus_dagster.core.memory import release_memory
from corpus_dagster.core.storage import push_all
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME


@contextmanager
def corpus_failure(step: str) -> Iterator[None]:
    """Turn any CorpusError into a Dagster failure whose description says what and where, with metadata.

    Wraps every step's work, so it is also where a step hands its freed memory back (`release_memory`):
    the steps of a corpus run share one process; and, with an artifacts store (`core.storage`), where what
    the step wrote leaves the machine before the step reports success (a failed push fails the step)."""
    try:
        yield
        push_all()
    except CorpusError as exc:
        raise dg.Failure(
            description=f"{step}: {exc}",
            metadata={"error": type(exc).__name__, "step": step},
        ) from exc
    except OSError as exc:
        # a full or failing disk under a writer that does not go through core.atomic: still one line that
        # names the step and, where the OS said it, the file
        error = storage_error(exc)
        if error is None:
            raise
        raise dg.Failure(description=f"{step}: {error}", metadata={"error": type(error).__name__, "step": step}) from exc
    finally:
        release_memory()


def source_for_partition(layout: Layout, partition_key: str) -> Source:
    """The ledger row of a partition; a clear error when the partition is no longer in the ledger."""
    with corpus_failure("ledger"):
        sources = load_ledger(layout.ledger)
    for src in sources:
        if src.source_id == partition_key:
            return src
    raise dg.Failure(f"source {partition_key!r} is not in the ledger {layout.ledger}; the ledger sensor removes stale partitions")


def materialized_sources(context: dg.AssetExecutionContext, upstream: str, layout: Layout) -> tuple[list[str], list[str]]:
    """(sources to build, sources waiting): the sources in the ledger that are current source partitions and
    whose `upstream` is materialized.

    Dagster says what is built, the ledger what may be published: a source in the ledger that no run has
    materialized yet is left out (and named), never a failure of the global step; a source whose row left the
    ledger is left out even while its partition still exists (a UI launch before the sensor's next tick), so a
    takedown never waits for partition bookkeeping.
    """
    from corpus_dagster.core.reconcile import buildable_sources, read_ledger_rows

    with corpus_failure("ledger"):
        rows = read_ledger_rows(layout.ledger)
    in_ledger = rows.listed
    instance = context.instance
    current = set(instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME))
    done = set(instance.get_materialized_partitions(dg.AssetKey(upstream)))
    ready = buildable_sources(in_ledger, current, done)
    waiting = sorted((current & in_ledger) - done)
    left_out = sorted(current - in_ledger)
    if waiting:
        context.log.warning(f"left out until {upstream} is materialized for them: {', '.join(waiting)}")
    if left_out:
        context.log.warning(f"left out, no longer in the ledger {layout.ledger}: {', '.join(left_out)}")
    return ready, waiting


def md_table(header: list[str], rows: list[list[Any]], align: list[str] | None = None) -> dg.MetadataValue:
    """A markdown table for the UI; header and cell text are escaped (md_escape) so `<EMAIL>` stays visible and
    no URL or e-mail in a cell becomes a link. `align`: "l" or "r" per column (numbers read best right-aligned)."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in (align or ["l"] * len(header)))
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |", rule]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


# U+2060 WORD JOINER: invisible and never a line break. GFM finds autolink literals twice (remark-gfm: while
# parsing, and again in the text after escapes are resolved), so a backslash escape does not stop the second
# pass; a joiner inside `www.`, `http://` or after an `@` stops both, and the text reads the same.
JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=http)(?=s?:)|(?<=ftp)(?=:)|(?<=mailto)(?=:)|(?<=xmpp)(?=:)|(?<=@)")
_MD_PUNCT = re.compile(r"([\\`*_\[\]{}|~#!$])")
_LINE_START = re.compile(r"^(\s*\d*)([-+=.)])")


def md_escape(value: Any) -> str:
    """Text for markdown metadata (a table cell, a list item) that renders as itself on one line.

    `&`, `<` and `>` become entities (placeholders such as `<EMAIL>` are not HTML); every other character with a
    markdown meaning (emphasis, code, links, images, tables, strike-through, headings, maths) is backslash
    escaped, as is a list or quote marker at the start; autolink literals (`www.`, `http://`, `https://`,
    `x@y.z`) are broken with an invisible joiner (JOINER) so they are neither linkified nor swallow the
    escapes that follow them. Newlines become spaces.
    """
    text = " ".join(str(value).splitlines())
    text = _AUTOLINK.sub(JOINER, text)
    text = _MD_PUNCT.sub(r"\\\1", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _LINE_START.sub(r"\1\\\2", text, count=1)


def check_result(report: CheckReport, scope: dict[str, Any] | None = None) -> dg.AssetCheckResult:
    """The one translation of a CheckReport into a Dagster check result; `scope` says what was checked and how
    much (rows, files, bytes) when the report does not."""
    metadata: dict[str, Any] = {**(scope or {}), **report.metadata}
    metadata["problems"] = report.n_problems
    if report.problems:
        metadata["details"] = dg.MetadataValue.md("\n".join(f"- {md_escape(p)}" for p in report.problems))
        metadata["first_problem"] = dg.MetadataValue.text(report.problems[0])  # plain, for the CLI's one line
    return dg.AssetCheckResult(passed=report.passed, metadata=metadata)


def figures_markdown(paths: list[str], title: str = "") -> dg.MetadataValue:
    """PNG figures embedded in markdown metadata, so the UI shows them on the latest materialization."""
    parts = [f"**{md_escape(title)}**"] if title else []
    for path in paths:
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        parts.append(f"![{md_escape(Path(path).stem)}](data:image/png;base64,{data})")
    return dg.MetadataValue.md("\n\n".join(parts))


PREVIEW_ROWS = 10
PREVIEW_CHARS = 120  # a preview cell (text and its length) fits beside an id and two short columns at 1600 px


def when_inputs_change() -> dg.AutomationCondition:
    """Eager automation that fires on a dependency's new *data version*, not on any new materialization.

    A refetch of unchanged bytes records a materialization with the same data version (the stage key), so
    nothing downstream is requested; a changed source, a new partition or a code change still rebuilds.
    """
    changed = dg.AutomationCondition.any_deps_match(
        (dg.AutomationCondition.data_version_changed() & ~dg.AutomationCondition.executed_with_root_target())
        .with_label("data_version_changed_without_root")
        | dg.AutomationCondition.will_be_requested()
    ).with_label("any_deps_data_version_changed")
    return dg.AutomationCondition.eager().replace("any_deps_updated", changed).with_label("eager_on_new_data")


def _column_type(values: list[Any]) -> str:
    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, bool):
        return "bool"
    if isinstance(sample, int):
        return "int"
    if isinstance(sample, float):
        return "float"
    return "string"


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def table(columns: list[str], rows: list[list[Any]], descriptions: dict[str, str] | None = None) -> dg.MetadataValue:
    """A sortable table for the UI (`MetadataValue.table` with a `TableSchema` typed from the values)."""
    descriptions = descriptions or {}
    schema = dg.TableSchema(columns=[
        dg.TableColumn(name, _column_type([r[i] for r in rows]), description=descriptions.get(name))
        for i, name in enumerate(columns)
    ])
    records = [dg.TableRecord({name: _cell(r[i]) for i, name in enumerate(columns)}) for r in rows]
    return dg.MetadataValue.table(records, schema=schema)


def column_schema(arrow_schema: Any) -> dg.TableSchema:
    """The `dagster/column_schema` of a Parquet/Arrow table: name and Arrow type of every column."""
    return dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in arrow_schema])


def table_metadata(rows: int, arrow_schema: Any | None = None) -> dict[str, Any]:
    """Dagster's standard row count (and column schema) keys, shown on the asset's overview."""
    out: dict[str, Any] = {"dagster/row_count": dg.MetadataValue.int(int(rows))}
    if arrow_schema is not None:
        out["dagster/column_schema"] = column_schema(arrow_schema)
    return out


def preview_text(text: Any, limit: int = PREVIEW_CHARS) -> str:
    """A preview cell: the text on one line, at most `limit` characters; a longer text is cut and ends in
    its full length, e.g. `… (4,211 chars)`."""
    raw = str(text or "")
    flat = " ".join(raw.split())
    if len(flat) <= limit:
        return flat
    suffix = f"… ({len(raw):,} chars)"
    return flat[: max(0, limit - len(suffix))].rstrip() + suffix


def ratio(value: Any) -> float | None:
    """A ratio or share (Jaccard, a filter score), rounded to 3 decimals."""
    return None if value is None else round(float(value), 3)


def measured(value: Any) -> int | float | None:
    """What a filter measured, at the precision it means: whole numbers as ints, ratios and scores to 3
    decimals, large measures (perplexity, lengths) to 1."""
    if value is None or isinstance(value, bool):
        return value
    v = float(value)
    if v.is_integer():
        return int(v)
    return round(v, 3) if abs(v) < 100 else round(v, 1)


def size(n_bytes: int | float) -> str:
    """Bytes as a human size (KiB, MiB, GiB), for labels where Dagster has no byte type."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def timing(seconds: float) -> dg.MetadataValue:
    """A duration in seconds (2 decimals): every timing key of every asset is named `seconds`, `seconds_<step>`
    or `built_seconds`."""
    return dg.MetadataValue.float(round(float(seconds), 2))


def step_seconds(own: float, built: float, cached: bool) -> dict[str, dg.MetadataValue]:
    """The timing keys of a step: `seconds` is always this step's own time; on a cache hit that is the time of
    the hit, and `built_seconds` holds the time of the build whose outputs were reused."""
    if not cached:
        return {"seconds": timing(built)}
    return {"seconds": timing(own), "built_seconds": timing(built)}
