"""A link from an asset page to the Launchpad of `explain_document_job`, pre-filled with one document id.

The UI opens `/locations/<location>/jobs/<job>/playground/setup?config=<run config YAML>` as a new Launchpad tab
holding that config, then redirects to the job's `playground` (the webserver's LaunchpadSetupRoot route; it
reads the `config` query parameter as the tab's run config YAML). The path is relative to the UI root, so the
link works whatever host and port serve the UI. `<location>` is the code location name: for the default
repository of a `Definitions` object it is the location alone (no `__repository__@`), and the workspace's
`python_module: corpus_dagster.definitions` names the location after its module.
"""

from __future__ import annotations

from urllib.parse import quote

import dagster as dg
import yaml

from corpus_dagster.defs.common import md_escape

EXPLAIN_JOB = "explain_document_job"
EXPLAIN_OP = "explain_document"
DEFAULT_LOCATION = "corpus_dagster.definitions"  # workspace.yaml loads this module; no location_name is set
DEFAULT_REPOSITORY = "__repository__"  # the repository name of a Definitions object


def explain_run_config(document: str) -> dict:
    """The run config of explain_document_job for one document id or url."""
    return {"ops": {EXPLAIN_OP: {"config": {"document": document}}}}


def launchpad_path(document: str, location: str = DEFAULT_LOCATION, repository: str = DEFAULT_REPOSITORY) -> str:
    """The UI path (from the UI root) that opens explain_document_job's Launchpad with `document` filled in."""
    repo = quote(location, safe="") if repository == DEFAULT_REPOSITORY else f"{repository}@{quote(location, safe='')}"
    config = yaml.safe_dump(explain_run_config(document), sort_keys=False)
    return f"/locations/{repo}/jobs/{EXPLAIN_JOB}/playground/setup?config={quote(config, safe='')}"


def location_of(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> str:
    """The code location a run belongs to (DEFAULT_LOCATION when the run has no remote origin, e.g. in tests)."""
    origin = getattr(context.run, "remote_job_origin", None)
    return origin.location_name if origin is not None else DEFAULT_LOCATION


def explain_link(document: str, location: str = DEFAULT_LOCATION, repository: str = DEFAULT_REPOSITORY) -> dg.MetadataValue:
    """Asset metadata: a link (relative to the UI root) to the Launchpad of explain_document_job, pre-filled
    with `document`; one click on Launch explains it.

    A markdown link with a short label, not a url value: the UI shows a url value as its whole text, one
    unbreakable word that widened the asset's metadata table past the page (its tables then scrolled sideways).
    """
    label = md_escape(f"explain {document}")
    return dg.MetadataValue.md(f"[{label}]({launchpad_path(document, location, repository)})")


def link_target(value: dg.MetadataValue) -> str:
    """The path an `explain_link` value points to."""
    text = value.value if isinstance(value, dg.MarkdownMetadataValue) else str(value.value)
    return text[text.rindex("](") + 2 : -1]
