"""The IO manager of every job: the values passed between steps (the plans, `core.units.Plan.to_json`) as JSON,
checked when loaded.

Dagster's default IO manager pickles step outputs under the instance's storage folder, and unpickling runs
whatever code the bytes name: a value is untrusted input (the artifacts store is shared), so this manager
stores JSON checked against `schemas/step-value.schema.json` (`core.step_values`) instead, under
`<artifacts>/.dagster-io/<run id>/<step key>/<output>.json`: in the artifacts store when the root is one (a
prefix the mirrors never pull), else in the local artifacts folder. A value that does not parse or fit fails
the step that loads it with one line.

Its Dagster config is empty: it reads the corpus resource in the step's process, so the store's URL options
and credentials (`paths.storage_options`) are read at run time and never reach run config, job snapshots or
the UI. Step values of finished runs are removed when a run starts, keeping the newest
`paths.keep_step_values` (a user may re-execute those from the UI); see `prune_step_values`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import dagster as dg

from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.step_values import StepValueError, StepValues, runs_to_remove
from corpus_dagster.defs.resources import CorpusConfig

FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
_PRUNED: set[str] = set()  # runs whose start this process has pruned for already (one prune per run)
_PRUNED_GUARD = threading.Lock()


class StepValueIOManager(dg.IOManager):
    """JSON step values in the artifacts root (see module doc)."""

    def __init__(self, values: StepValues):
        self.values = values

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        # Every edge between assets is Nothing-typed: an asset's own value (None) is never read, so not stored.
        if obj is None:
            return
        try:
            self.values.put(context.get_identifier(), obj)
        except StepValueError as exc:
            raise dg.Failure(description=str(exc), metadata={"error": type(exc).__name__}) from None

    def load_input(self, context: dg.InputContext) -> Any:
        if context.dagster_type.is_nothing:
            return None
        try:
            return self.values.get(context.upstream_output.get_identifier())
        except StepValueError as exc:
            raise dg.Failure(description=str(exc), metadata={"error": type(exc).__name__}) from None


@dg.io_manager(config_schema={}, required_resource_keys={"corpus"},
               description="Step values as JSON in the artifacts root, checked against the step-value schema "
                           "when loaded; the store and its credentials come from the corpus config at run time.")
def step_value_io_manager(init_context: dg.InitResourceContext) -> StepValueIOManager:
    corpus: CorpusConfig = init_context.resources.corpus
    try:
        settings = corpus.settings()
        layout = Layout.from_config(settings.resolved)
        values = StepValues.of(layout)
        run = init_context.run
        if run is not None and init_context.instance is not None:
            prune_once(values, init_context.instance, run.run_id, settings.paths.keep_step_values)
    except CorpusError as exc:
        raise dg.Failure(description=f"step values: {exc}", metadata={"error": type(exc).__name__}) from None
    return StepValueIOManager(values)


def prune_once(values: StepValues, instance: dg.DagsterInstance, run_id: str, keep: int) -> None:
    """`prune_step_values` at most once per run in this process (the IO manager starts for every step of a
    run on an executor that gives each step its own process)."""
    with _PRUNED_GUARD:
        if run_id in _PRUNED:
            return
        _PRUNED.add(run_id)
    prune_step_values(values, instance, keep)


def prune_step_values(values: StepValues, instance: dg.DagsterInstance, keep: int) -> list[str]:
    """Remove the step values of finished runs but the newest `keep` (`core.step_values.runs_to_remove`);
    returns the runs removed."""
    runs = values.runs()
    if not runs:
        return []
    records = instance.get_run_records(dg.RunsFilter(run_ids=sorted(runs)))
    finished = {r.dagster_run.run_id: (r.end_time or r.create_timestamp.timestamp())
                for r in records if r.dagster_run.status in FINISHED}
    unfinished = {r.dagster_run.run_id for r in records if r.dagster_run.status not in FINISHED}
    drop = runs_to_remove(runs, finished, unfinished, keep, time.time())
    for run_id in drop:
        values.remove_run(run_id)
    return drop
