"""Names a module serves from other modules, imported on first use.

A package `__init__` or a stage's read face (`<stage>/outputs.py`) names what callers may import from it
without loading the modules behind those names (numba kernels, models, fsspec) until one is read.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_names(module: str, sources: dict[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """(`__getattr__`, the names) of a module `module` serving each space-separated name of `sources[m]`
    from module `m`: assign them to the module's `__getattr__` and (part of) its `__all__`."""
    where = {name: source for source, names in sources.items() for name in names.split()}

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module attribute hook
        if name in where:
            return getattr(import_module(where[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__, sorted(where)
