"""The corpus config as a Dagster resource: one YAML file, validated, with execution overrides."""

import logging
import os
from typing import Any

import dagster as dg

from corpus_dagster.core.config import load_config, packaged_config_path
from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import check_config_against_ledger, load_ledger, source_lists
from corpus_dagster.core.parallel import prestart_pool
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.storage import sync

CORPUS_JOB = "build_corpus"
SOURCE_JOB = "build_source"  # the per-source job: fetch, clean and sign one source partition
# The modules whose functions the corpus stages map in the pool, imported by each pool process up front.
CORPUS_POOL_MODULES = (
    "corpus_dagster.dedup.driver",
    "corpus_dagster.scrub.driver",
    "corpus_dagster.publish.shards",
    "corpus_dagster.publish.checks",
    "corpus_dagster.tokenize.streams",
    "corpus_dagster.analysis.steps.registry",
    "corpus_dagster.release.jobs",
)


class CorpusConfig(dg.ConfigurableResource):
    """Loads the corpus config (validated against the packaged corpus-config schema) for every asset.

    `artifacts` and `workers` override the file, so a test or a rebuild can point the same config at
    another folder or worker count without editing it.
    """

    config_path: str
    artifacts: str | None = None
    workers: int | None = None

    def resolved(self) -> dict[str, Any]:
        """The resolved config (defaults filled, overrides applied); ConfigError names file and JSON path."""
        overrides: dict[str, Any] = {}
        if self.artifacts is not None:
            overrides["paths"] = {"artifacts": self.artifacts}
        if self.workers is not None:
            overrides["workers"] = self.workers
        return load_config(self.config_path, overrides)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """A corpus run on the local executor starts its `workers` pool now (see `prestart_pool`): every
        corpus stage maps in it, and its processes import the stages while the first step reads its inputs."""
        run = context.dagster_run
        if run is None or run.job_name != CORPUS_JOB:
            return
        settings = self.settings()
        if settings.executor.kind == "local":
            prestart_pool(settings.workers, CORPUS_POOL_MODULES)

    def settings(self) -> Settings:
        """The typed view of `resolved()`: what assets, jobs and drivers read."""
        return Settings.from_resolved(self.resolved())

    def load(self) -> tuple[Settings, Layout]:
        """The typed config and its layout, from one read and validation of the file.

        Every asset starts here, so a config `sources` list naming an id the ledger lacks fails each of them
        with the ConfigError the CLI gives. An unreadable or invalid ledger is left to the steps that read it
        (their LedgerError says what is wrong with it).
        """
        settings = self.settings()
        layout = Layout.from_config(settings.resolved)
        sync(layout.store())
        if source_lists(settings) and layout.ledger.is_file():
            try:
                sources = load_ledger(layout.ledger)
            except LedgerError:
                sources = None
            if sources is not None:
                check_config_against_ledger(settings, sources, self.config_path)
        return settings, layout

    def layout(self) -> Layout:
        """The artifact layout of the resolved config, without the ledger check of `load`, so a step that needs
        no more than paths never fails on a config that disagrees with the ledger. With an artifacts store,
        the mirror is brought up to it first, as `load` does."""
        layout = Layout.from_config(self.resolved())
        sync(layout.store())
        return layout

    def ledger_layout(self) -> Layout:
        """The layout for code that reads only the ledger (the sensors, the schedule): with an artifacts store,
        only the ledger is pulled, so a daemon never mirrors the whole build."""
        layout = Layout.from_config(self.resolved())
        if layout.store_url is not None and layout.ledger_override is None:
            sync(layout.store(), only=layout.ledger.relative_to(layout.root).as_posix())
        return layout


def default_corpus_config() -> CorpusConfig:
    """The resource as `dagster dev` builds it: CORPUS_CONFIG (else the packaged demo config), CORPUS_ARTIFACTS."""
    return CorpusConfig(
        config_path=os.environ.get("CORPUS_CONFIG") or str(packaged_config_path()),
        artifacts=os.environ.get("CORPUS_ARTIFACTS") or None,
    )


class RunLogHandler(logging.Handler):
    """Lines the stage drivers log on `corpus_dagster.*` loggers (e.g. a damaged stage output being rebuilt)
    go to the Dagster log of the step that emitted them, so the UI and the CLI's log file show them.

    Outside a step (a driver called directly) the line propagates to Python logging as before.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            context = dg.OpExecutionContext.get()
        except dg.DagsterInvariantViolationError:
            return
        try:
            context.log.log(record.levelno, record.getMessage())
        except Exception:  # noqa: BLE001 - a log line must never fail the step that logged it
            self.handleError(record)


def forward_driver_logs() -> None:
    """Install RunLogHandler on the `corpus_dagster` logger once per process (every asset module imports this)."""
    logger = logging.getLogger("corpus_dagster")
    if not any(isinstance(h, RunLogHandler) for h in logger.handlers):
        logger.addHandler(RunLogHandler(level=logging.WARNING))


forward_driver_logs()
