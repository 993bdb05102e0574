"""Global stages as graphs of executor steps: plan, `fan_out` unit-group steps, finish.

A stage driver names its units (core.units); here each group of units becomes its own Dagster op, so the
job's executor (in-process, multiprocess, dask, k8s) places the groups where it likes. The graph is static
(`fan_out` steps, known when the definitions load): executors without dynamic orchestration (dask) run it
too. Values passed between steps are small plan dicts (key and unit names); data moves through the
artifacts root only.
"""

import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import dagster as dg

from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan, run_units, unit_groups
from corpus_dagster.defs.common import corpus_failure
from corpus_dagster.defs.resources import CorpusConfig

RunUnit = Callable[..., Any]


def plan_value(plan: Plan, started: float) -> dict[str, Any]:
    """A plan as the plain dict the steps pass along (stored as JSON that must fit schemas/step-value.schema.json,
    `defs.store_io`: keep it small, and add a field there first). `started`: the
    time.time() at which the asset's first step began, so the last step can report the asset's own time."""
    return {"key": plan.key, "units": list(plan.units), "cached": plan.cached, "info": dict(plan.info),
            "started": started}


def seconds_since_plan(plan: dict[str, Any]) -> float:
    """Seconds since the asset's first step began: its own time, the `seconds` of a run that reused the build."""
    return time.time() - plan["started"]


def group_ops(stage: str, phase: str, run_unit: RunUnit, fan_out: int) -> list[dg.OpDefinition]:
    """`fan_out` ops; op i runs group i of the plan's units through a pool of `workers` processes."""

    def make(index: int) -> dg.OpDefinition:
        @dg.op(name=f"{stage}_{phase}_{index}", out=dg.Out(dg.Nothing),
               description=f"Units of group {index + 1} of {fan_out} of the {stage} {phase} step.")
        def run_group(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict) -> None:
            groups = unit_groups(plan["units"], fan_out)
            units = groups[index] if index < len(groups) else []
            if not units:
                context.log.info(f"{stage} {phase}: group {index + 1}/{fan_out} has no units")
                return
            start = time.monotonic()
            with corpus_failure(f"{stage} {phase} units {units[0]}..{units[-1]}"):
                settings, layout = corpus.load()
                run_units(run_unit, (layout, settings, plan["key"]), units, settings.workers)
            context.log.info(
                f"{stage} {phase}: group {index + 1}/{fan_out} ran {len(units)} unit(s) "
                f"({units[0]} .. {units[-1]}) in {time.monotonic() - start:.1f}s, pid {os.getpid()}"
            )

        return run_group

    return [make(i) for i in range(fan_out)]


def fan_out_of(settings: Settings) -> int:
    """How many executor steps each global fan-out is spread over (`executor.fan_out`)."""
    return max(1, int(settings.executor.fan_out))


def after_groups(fan_out: int) -> dict[str, dg.In]:
    """Inputs that order a step after every group op (no data: the units' outputs are files)."""
    return {f"group_{i}": dg.In(dg.Nothing) for i in range(fan_out)}


def wire_groups(ops: list[dg.OpDefinition], plan: Any) -> dict[str, Any]:
    """Invoke each group op on the plan inside a graph; the result feeds `after_groups` inputs."""
    return {f"group_{i}": op(plan=plan) for i, op in enumerate(ops)}


def versioned_output(metadata: dict[str, Any], key: str, output_name: str = "result") -> dg.Output:
    """The finish op's output of a graph-backed asset: its metadata and the stage key as data version.

    `Output(data_version=...)` is marked beta although it is what `MaterializeResult(data_version=...)`
    does for plain assets; the warning is silenced here, once.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.Output(None, output_name=output_name, metadata=metadata, data_version=dg.DataVersion(key))
