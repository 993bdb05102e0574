"""The thin Dagster layer: assets per stage, checks, partitions, resources, jobs, schedules and sensors.

Assets call stage drivers only. `build_definitions` is called when a code location loads (never at import),
so an invalid config is a load error naming the file and JSON path.

The catalogue (`ASSETS`, `CHECKS`, `build_definitions`, ...) lives in `catalog` and is imported on first use:
a process that only launches and watches runs (the CLI) imports `defs.runner` without importing every stage
and its libraries (numba, polars, matplotlib, fastText: about 2 CPU s).
"""

from typing import Any

_CATALOG = ("ASSETS", "CHECKS", "assets_for", "executor_for", "build_definitions")
__all__ = list(_CATALOG)


def __getattr__(name: str) -> Any:
    if name in _CATALOG:
        from corpus_dagster.defs import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
