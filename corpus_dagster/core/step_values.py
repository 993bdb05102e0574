"""The values one step of a global stage hands the next (plan dicts), as JSON checked against a schema.

Step values live in the artifacts store, which a team shares: whoever can write to it could plant a value.
So a value is data, never code: JSON (never a pickle), checked against `schemas/step-value.schema.json`
when it is loaded, and a value that does not parse or does not fit fails the step with one line that says
which value and which rule, without echoing what it holds.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import jsonschema

from corpus_dagster.core.config import json_path, load_schema
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.storage import IO_PREFIX

if TYPE_CHECKING:
    from corpus_dagster.core.layout import Layout

SCHEMA_NAME = "step-value.schema.json"
SUFFIX = ".json"
UNKNOWN_RUN_GRACE_S = 24 * 3600.0  # values of a run this instance does not know: kept a day


class StepValueError(CorpusError):
    """A step value is not JSON or breaks its schema; names the value and the rule, never its content."""


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(SCHEMA_NAME))


def _first_violation(value: Any) -> str | None:
    """`$.path: breaks '<rule>'` of the first schema violation (by path), or None when the value fits."""
    errors = sorted(_validator().iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    error = errors[0]
    return f"{json_path(error.absolute_path)} breaks the schema's {error.validator!r} rule"


def encode(value: Any, where: str) -> bytes:
    """The bytes stored for a step value. A value that breaks the schema is a bug of the step that made it."""
    violation = _first_violation(value)
    if violation is not None:
        raise StepValueError(f"step value {where} does not fit {SCHEMA_NAME}: {violation}")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def decode(data: bytes, where: str) -> dict[str, Any]:
    """A stored step value, checked: JSON in UTF-8 that fits the schema, else a StepValueError."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError):
        raise StepValueError(
            f"step value {where} is not JSON ({len(data)} bytes; a pickle or any other format is never loaded): "
            "rerun the stage from its first step") from None
    violation = _first_violation(value)
    if violation is not None:
        raise StepValueError(f"step value {where} does not fit {SCHEMA_NAME}: {violation}; "
                             "rerun the stage from its first step")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


RUN_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\[\]-]*$")  # a step key or output name, as Dagster makes them


@dataclass
class StepValues:
    """The step values of one artifacts root: `<root>/.dagster-io/<run id>/<step key>/<output>.json`, in the
    artifacts store when the root is one (`core.storage`: a prefix the mirrors never pull), else on local disk
    under the artifacts folder."""

    fs: Any
    root: str

    @classmethod
    def of(cls, layout: Layout) -> StepValues:
        """The step values of a layout, on the store's file system when it has one (credentials as the store
        reads them, in this process), else on the local artifacts folder."""
        store = layout.store()
        if store is not None:
            return cls(store.fs, f"{store.root}/{IO_PREFIX}")
        from fsspec.implementations.local import LocalFileSystem

        return cls(LocalFileSystem(), f"{layout.root.as_posix()}/{IO_PREFIX}")

    def path(self, identifier: list[str]) -> str:
        """Where the value of a step output (run id, step key, output name[, mapping key]) is stored."""
        bad = [part for part in identifier if not NAME.match(part) or part in (".", "..")]
        if bad:
            raise StepValueError(f"step value name {bad[0]!r} is not a plain name")
        return "/".join([self.root, *identifier]) + SUFFIX

    def put(self, identifier: list[str], value: Any) -> None:
        """Store a value (checked against the schema first)."""
        where = "/".join(identifier)
        data = encode(value, where)
        path = self.path(identifier)
        try:
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            self.fs.pipe_file(path, data)
        except OSError as exc:
            raise StepValueError(f"cannot store step value {where}: {type(exc).__name__}") from None

    def get(self, identifier: list[str]) -> dict[str, Any]:
        """A stored value, checked (see `decode`)."""
        where = "/".join(identifier)
        try:
            data = self.fs.cat_file(self.path(identifier))
        except FileNotFoundError:
            raise StepValueError(f"step value {where} is missing (removed by retention, "
                                 "paths.keep_step_values?): rerun the stage from its first step") from None
        except OSError as exc:
            raise StepValueError(f"cannot read step value {where}: {type(exc).__name__}") from None
        return decode(data, where)

    def runs(self) -> dict[str, float]:
        """Every run that has values here: run id -> when its newest value was written (seconds since the epoch).
        A folder whose name is not a run id is no run's and is left alone."""
        self.fs.invalidate_cache()
        try:
            found = self.fs.find(self.root, detail=True) if self.fs.exists(self.root) else {}
        except FileNotFoundError:
            return {}
        prefix = self.root.rstrip("/") + "/"
        out: dict[str, float] = {}
        for name, info in found.items():
            run_id = name[len(prefix):].split("/", 1)[0] if name.startswith(prefix) else ""
            if RUN_ID.match(run_id):
                out[run_id] = max(out.get(run_id, 0.0), _written(info))
        return out

    def remove_run(self, run_id: str) -> None:
        """Remove every value of one run."""
        if not RUN_ID.match(run_id):
            raise StepValueError(f"{run_id!r} is not a run id")
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(f"{self.root}/{run_id}", recursive=True)


def _written(info: dict[str, Any]) -> float:
    """When an object was written, from a listing entry of any file system (0 when it says nothing)."""
    when = info.get("LastModified") or info.get("mtime") or info.get("created") or info.get("updated") or 0
    if hasattr(when, "timestamp"):
        when = when.timestamp()
    try:
        return float(when)
    except (TypeError, ValueError):
        return 0.0


def runs_to_remove(runs: dict[str, float], finished: dict[str, float], unfinished: set[str], keep: int,
                   now: float, unknown_grace_s: float = UNKNOWN_RUN_GRACE_S) -> list[str]:
    """The runs whose step values retention removes, oldest first.

    `runs`: run id -> newest value's time; `finished`: the runs the instance knows as finished -> their end time;
    `unfinished`: runs it knows as still going. A run still going is always kept (its next step reads them);
    of the finished ones the `keep` newest are kept (a user may re-execute them from the UI); a run the
    instance does not know (another instance on the same store, or a deleted run) is removed once its values
    are older than `unknown_grace_s`."""
    done = sorted((r for r in runs if r in finished), key=lambda r: (finished[r], r), reverse=True)
    drop = done[max(0, keep):]
    drop += [r for r in runs if r not in finished and r not in unfinished and now - runs[r] > unknown_grace_s]
    return sorted(drop, key=lambda r: (runs[r], r))
