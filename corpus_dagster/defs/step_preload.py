"""Imported once by the forkserver of the multiprocess executor, so each step process forks warm.

Dagster imports its storage and execution machinery (sqlalchemy, alembic, the SQLite storages, the step
executor) lazily, on the first instance and the first step of a process. A forked step process paid
that again for every step: about 0.6 s per step, 2.5 s per cached source run. Touching them here once
brings a cached source run to about 1.4 s. Nothing here may fail a run: it only warms imports.
"""

from __future__ import annotations

import importlib
import os

import dagster as dg

# Dagster's internal modules a step process runs (private names: one that moves is skipped, not an error)
STEP_MODULES = (
    "dagster._core.execution.api",
    "dagster._core.execution.plan.execute_plan",
    "dagster._core.executor.child_process_executor",
    "dagster._core.executor.multiprocess",
)


def _warm_imports() -> None:
    for name in STEP_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def _warm_instance() -> None:
    """Open and close the instance the steps will use (loads sqlalchemy, alembic and the storages)."""
    if not os.environ.get("DAGSTER_HOME"):
        return
    try:
        with dg.DagsterInstance.get() as instance:
            instance.get_runs(limit=1)
            instance.get_event_records(dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_START), limit=1)
    except Exception:  # noqa: BLE001 - a cold step is slower, never wrong
        return


_warm_imports()
_warm_instance()
