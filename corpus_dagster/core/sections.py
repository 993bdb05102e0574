"""The runtime of the generated settings classes (`core/settings.py`): a read-only mapping that pickles,
the converters `from_dict` uses, and the way back to the resolved-config dict."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any


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


def or_none(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`convert` for a value the schema also allows to be null."""
    return lambda value: None if value is None else convert(value)


def tuple_of(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An array of objects as a tuple of section objects."""
    return lambda value: tuple(convert(item) for item in value)


def given(cls: type, data: Mapping[str, Any], converters: Mapping[str, Callable[[Any], Any] | None]) -> dict:
    """Constructor arguments for the keys `data` has (the others keep the schema default); an unknown key
    is an error, so a misspelt key in code or a test cannot go unnoticed."""
    unknown = sorted(set(data) - set(converters))
    if unknown:
        raise KeyError(f"{cls.__name__}: unknown config keys {unknown}")
    return {key: (convert(value) if convert else value)
            for key, value in data.items() for convert in (converters[key],)}


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
    def of(cls, value: Any) -> Any:
        """`value` itself when it is this section, else this section read from its resolved dict: what a
        logic entry that also accepts the dict form (tests, benchmarks) calls once."""
        return value if isinstance(value, cls) else cls.from_dict(value)


def to_dict(section: Any) -> dict[str, Any]:
    """The resolved-config dict a section object was built from (a key the schema gives no default and
    the config left out is left out again)."""
    out = {}
    for f in fields(section):
        value = getattr(section, f.name) if f.init else None
        if f.init and not (value is None and f.metadata.get("omit_none")):
            out[f.name] = plain(value)
    return out
