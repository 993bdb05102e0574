"""The runtime of the generated settings classes (`core/settings.py`): a read-only mapping that pickles,
one `from_dict` that reads any section from its resolved dict by the field types, and the way back.

The generated module only declares fields; how a value is converted follows from its annotation, so a
schema change never needs a converter written by hand."""

from __future__ import annotations

import functools
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any, Self


class FrozenMapping(Mapping[str, Any]):
    """A read-only free-form mapping that pickles (section objects travel to worker processes)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._data!r})"

    def __getstate__(self) -> dict[str, Any]:
        return self._data

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state


Convert = Callable[[Any], Any] | None


def _converter(hint: Any) -> Convert:
    """How a resolved-dict value becomes a field of type `hint` (None: taken as it is).

    A section is read by its own `from_dict`, `X | None` converts X unless the value is null, a tuple reads
    each item, a mapping becomes a FrozenMapping; scalars stay as the config gave them."""
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, Section):
        return hint.from_dict
    if origin in (types.UnionType, typing.Union):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        inner = _converter(options[0]) if len(options) == 1 else None
        return None if inner is None else (lambda value: None if value is None else inner(value))
    if origin is tuple:
        item = _converter(typing.get_args(hint)[0])
        return tuple if item is None else (lambda value: tuple(item(v) for v in value))
    if origin is Mapping or hint is Mapping:
        return FrozenMapping
    return None


@functools.cache
def _converters(cls: type) -> dict[str, Convert]:
    """{field: converter} of one section class, read once from its type hints (the generated module's
    annotations are strings, resolved in that module)."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return {f.name: _converter(hints[f.name]) for f in fields(cls) if f.init}


def plain(value: Any) -> Any:
    """A section value back in the resolved dict's form (lists, dicts)."""
    if is_dataclass(value):
        return to_dict(value)
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return value


class Section:
    """What every section class shares: the way back to the resolved-config form."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Back to the resolved-config form."""
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read this section from its resolved-config dict; a key it lacks keeps the schema default, an
        unknown key is an error, so a misspelt key in code or a test cannot go unnoticed."""
        converters = _converters(cls)
        unknown = sorted(set(data) - set(converters))
        if unknown:
            raise KeyError(f"{cls.__name__}: unknown config keys {unknown}")
        return cls(**{key: (convert(value) if convert else value)
                      for key, value in data.items() for convert in (converters[key],)})


def to_dict(section: Any) -> dict[str, Any]:
    """The resolved-config dict a section object was built from (a key the schema gives no default and
    the config left out is left out again)."""
    out = {}
    for f in fields(section):
        value = getattr(section, f.name) if f.init else None
        if f.init and not (value is None and f.metadata.get("omit_none")):
            out[f.name] = plain(value)
    return out
