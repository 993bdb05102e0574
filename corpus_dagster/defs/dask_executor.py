"""Dagster's dask executor, made to run partitioned runs on current dask.

`dagster_dask.dask_executor` hands the run (a Dagster record) to `Client.submit` as a plain argument;
dask >= 2024.12 walks tuple arguments looking for futures, and the partitions subset inside a
partitioned run's record refuses iteration ("Iteration is not allowed on `@record`
KeyRangesPartitionsSubset"), so every `build_source` run fails before its first step. Here the
arguments travel wrapped in one opaque object, and only the dependency futures are left for dask to see.
Everything else (the step per dask task, `query_on_dask_worker`, the config schema, the resource
requirements tag) is dagster-dask's own.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import dask
import dask.distributed
from dagster._core.definitions.executor_definition import multiple_process_executor_requirements
from dagster._core.errors import raise_execution_interrupts
from dagster._core.events import DagsterEvent
from dagster._utils import iterate_with_context
from dagster_dask.executor import (
    DaskExecutor,
    dask_executor,
    get_dask_resource_requirements,
    query_on_dask_worker,
)


class _Opaque:
    """Arguments dask must pass through untouched (it only looks into lists, tuples, dicts and sets)."""

    def __init__(self, *args: Any) -> None:
        self.args = args


def _run_step(dependencies: list[Any], payload: _Opaque) -> _Opaque:
    """On a dask worker: run one step (after its dependency futures) and return its events (wrapped too:
    dask cannot size a list of Dagster records and warns on every task)."""
    return _Opaque(*query_on_dask_worker(dependencies, *payload.args))


class OpaqueArgsDaskExecutor(DaskExecutor):
    """dagster-dask's executor for `existing` and `local` clusters, arguments wrapped (see module doc)."""

    def execute(self, plan_context, execution_plan) -> Iterator[DagsterEvent]:
        if not plan_context.instance.is_persistent:
            raise dg.DagsterInvariantViolationError("Dask execution requires a persistent DagsterInstance")
        if self.cluster_type == "existing":
            cluster: Any = self.cluster_configuration["address"]
        elif self.cluster_type == "local":
            # Non-daemonic workers, so a step can start its `workers` processes (core.parallel).
            with dask.config.set({"distributed.worker.daemon": False}):
                cluster = dask.distributed.LocalCluster(**self.build_dict(plan_context.job_name))
        else:
            raise dg.DagsterInvariantViolationError(
                f"executor.kind dask supports a scheduler address or a local cluster, not {self.cluster_type!r}")
        instance_ref = plan_context.instance.get_ref()
        with dask.distributed.Client(cluster) as client:
            futures: dict[str, Any] = {}
            for level in execution_plan.get_steps_to_execute_by_level():
                for step in level:
                    dependencies = [futures[key] for step_input in step.step_inputs
                                    for key in step_input.dependency_keys]
                    payload = _Opaque(plan_context.reconstructable_job, plan_context.dagster_run,
                                      plan_context.run_config, [step.key], instance_ref, execution_plan.known_state)
                    futures[step.key] = client.submit(
                        _run_step, dependencies, payload, key=f"{plan_context.job_name}.{step.key}",
                        resources=get_dask_resource_requirements(step.tags), pure=False,
                    )
            done = dask.distributed.as_completed(list(futures.values()), with_results=True)
            for _future, events in iterate_with_context(raise_execution_interrupts, done):
                yield from events.args
        if self.cluster_type == "local":
            cluster.close()


@dg.executor(name="dask", config_schema=dask_executor.config_schema,
             requirements=multiple_process_executor_requirements())
def corpus_dask_executor(init_context) -> OpaqueArgsDaskExecutor:
    """Run every step of a run as a task on a dask.distributed cluster (an address, or a LocalCluster)."""
    ((cluster_type, cluster_configuration),) = init_context.executor_config["cluster"].items()
    return OpaqueArgsDaskExecutor(cluster_type, cluster_configuration)
