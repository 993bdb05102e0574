"""Global stages as graphs of executor steps: plan, `fan_out` unit-group steps per unit phase, finish.

One builder (`unit_graph`) makes the graph of every stage that is a `core.units.UnitStage` (dedup, shards,
token streams): each group of units becomes its own Dagster op, so the job's executor (in-process,
multiprocess, dask, k8s) places the groups where it likes. The graph is static (`fan_out` steps, known when
the definitions load): executors without dynamic orchestration (dask) run it too. The ops run the stage
object through `core.units` (the cache prologue, the lock), the same entries `core.units.run_stage` runs in
one process. Values passed between steps are the plans as JSON (`Plan.to_json`, checked against
schemas/step-value.schema.json by `defs.store_io`); data moves through the artifacts root only.
"""

import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import dagster as dg

from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import (
    Plan,
    UnitStage,
    finish_stage,
    plan_next_stage,
    plan_stage,
    run_stage_units,
    unit_groups,
)
from corpus_dagster.defs.common import corpus_failure
from corpus_dagster.defs.resources import CorpusConfig

# (context, corpus) -> (the stage object the plan step runs, facts added to the plan's info); e.g. the
# dedup binds the sources Dagster has materialized
Bind = Callable[[dg.OpExecutionContext, CorpusConfig], tuple[UnitStage[Any], dict[str, Any]]]
# (context, layout, settings, result, plan, seconds of the asset's own run) -> metadata of each output
Report = Callable[[dg.OpExecutionContext, Layout, Settings, Any, Plan, float], "dict[str, Any] | tuple[dict[str, Any], ...]"]


def step_value(plan: Plan, started: float) -> dict[str, Any]:
    """A plan as the JSON value the steps pass along (it must fit schemas/step-value.schema.json: keep it
    small, and add a field there first). `started`: the time.time() at which the asset's first step began,
    so the last step can report the asset's own time."""
    return {**plan.to_json(), "started": started}


def seconds_since_plan(value: Mapping[str, Any]) -> float:
    """Seconds since the asset's first step began: its own time, the `seconds` of a run that reused the build."""
    return time.time() - float(value["started"])


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


def group_ops(stage: UnitStage[Any], phase: str, fan_out: int) -> list[dg.OpDefinition]:
    """`fan_out` ops; op i runs group i of the plan's units through a pool of `workers` processes."""
    name = stage.name

    def make(index: int) -> dg.OpDefinition:
        @dg.op(name=f"{name}_{phase}_{index}", out=dg.Out(dg.Nothing),
               description=f"Units of group {index + 1} of {fan_out} of the {name} {phase} step.")
        def run_group(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict) -> None:
            groups = unit_groups(plan["units"], fan_out)
            units = groups[index] if index < len(groups) else []
            if not units:
                context.log.info(f"{name} {phase}: group {index + 1}/{fan_out} has no units")
                return
            start = time.monotonic()
            with corpus_failure(f"{name} {phase} units {units[0]}..{units[-1]}"):
                settings, layout = corpus.load()
                run_stage_units(stage, layout, settings, plan["key"], units, settings.workers)
            context.log.info(
                f"{name} {phase}: group {index + 1}/{fan_out} ran {len(units)} unit(s) "
                f"({units[0]} .. {units[-1]}) in {time.monotonic() - start:.1f}s, pid {os.getpid()}"
            )

        return run_group

    return [make(i) for i in range(fan_out)]


def unit_graph(stage: UnitStage[Any], fan_out: int, *, ins: Sequence[str], report: Report,
               outs: Sequence[str] = ("result",), bind: Bind | None = None,
               descriptions: Mapping[str, str] | None = None) -> Callable[..., Any]:
    """The ops of one unit stage and the function that wires them inside a `graph_asset` body.

    Ops: `<name>_plan` (after the Nothing inputs `ins`), per phase `fan_out` group ops `<name>_<phase>_<i>`,
    before every phase but the first `<name>_<phase>_plan`, then `<name>_finish` with the outputs `outs`,
    each carrying the metadata `report` gives it and the stage key as data version. `bind` picks the stage
    object the plan step runs (default: `stage`). `descriptions`: the op descriptions by step (`plan`,
    `<phase>_plan`, `finish`). Returns `compose(**ins)`, which returns the finish op's output(s).
    """
    name, said = stage.name, dict(descriptions or {})

    @dg.op(name=f"{name}_plan", ins={n: dg.In(dg.Nothing) for n in ins},
           description=said.get("plan", f"Plan the {name} units."))
    def plan_op(context: dg.OpExecutionContext, corpus: CorpusConfig) -> dict:
        started = time.time()
        bound, info = bind(context, corpus) if bind is not None else (stage, {})
        with corpus_failure(name):
            settings, layout = corpus.load()
            plan = plan_stage(bound, layout, settings, log=context.log.info)
        return step_value(replace(plan, info={**plan.info, **info}), started)

    def next_plan_op(phase: str) -> dg.OpDefinition:
        @dg.op(name=f"{name}_{phase}_plan", ins={"plan": dg.In(dict), **after_groups(fan_out)},
               description=said.get(f"{phase}_plan", f"Plan the {name} {phase} units."))
        def plan_next_op(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict) -> dict:
            with corpus_failure(name):
                settings, layout = corpus.load()
                nxt = plan_next_stage(stage, layout, settings, Plan.from_json(plan), log=context.log.info)
            return step_value(nxt, plan["started"])

        return plan_next_op

    finish_out = dg.Out(dg.Nothing) if list(outs) == ["result"] else {o: dg.Out(dg.Nothing) for o in outs}

    @dg.op(name=f"{name}_finish", ins={"plan": dg.In(dict), **after_groups(fan_out)}, out=finish_out,
           description=said.get("finish", f"Merge the {name} units' outputs and commit the stage record."))
    def finish_op(context: dg.OpExecutionContext, corpus: CorpusConfig, plan: dict):
        value = Plan.from_json(plan)
        with corpus_failure(name):
            settings, layout = corpus.load()
            result = finish_stage(stage, layout, settings, value, log=context.log.info)
            metadata = report(context, layout, settings, result, value, seconds_since_plan(plan))
        for output, meta in zip(outs, (metadata,) if isinstance(metadata, dict) else metadata, strict=True):
            yield versioned_output(meta, result.key, output)

    groups = [group_ops(stage, phase, fan_out) for phase in stage.phases]
    nexts = [None, *(next_plan_op(phase) for phase in stage.phases[1:])]

    def compose(**upstream: Any) -> Any:
        plan = plan_op(**upstream)
        done: dict[str, Any] = {}
        for phase in range(len(stage.phases)):
            if phase:
                plan = nexts[phase](plan=plan, **done)
            done = wire_groups(groups[phase], plan)
        return finish_op(plan=plan, **done)

    return compose
