"""Corpus config: load YAML/JSON, fill schema defaults, validate (every violation), hash canonically."""

from __future__ import annotations

import copy
import hashlib
import json
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from corpus_dagster.core.deprecated import migrate
from corpus_dagster.core.errors import ConfigError
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.storage import default_mirror, is_remote, local_path

# The schemas and the demo config ship inside the package (a wheel install needs no checkout); the top-level
# schemas/ and configs/ folders hold the same files for people and other tools (a test keeps them equal).
PACKAGE_DATA = resources.files("corpus_dagster")

# Sections of stages that read the published corpus and never change it: they have stage keys of their own
# and stay out of the manifest's config_sha256, so tuning a release or an analysis never republishes shards.
DOWNSTREAM_SECTIONS = ("analysis", "release", "review")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Load a JSON schema shipped in schemas/ by file name."""
    return json.loads((PACKAGE_DATA / "schemas" / name).read_text(encoding="utf-8"))


def _execution_keys(schema: dict[str, Any], prefix: str = "") -> tuple[str, ...]:
    """Dotted paths of the schema properties marked `"x-execution": true`, in schema order."""
    out: list[str] = []
    for name, prop in schema.get("properties", {}).items():
        dotted = f"{prefix}{name}"
        if prop.get("x-execution"):
            out.append(dotted)
        else:
            out.extend(_execution_keys(prop, f"{dotted}."))
    return tuple(out)


# Keys that say where and how fast to run, never what to build: the determinism rule says they cannot
# change an output byte, so they stay out of config_sha256 and every stage key (a rebuild elsewhere or with
# more workers must produce the same manifest). The schema marks them (`"x-execution": true`).
EXECUTION_KEYS = _execution_keys(load_schema("corpus-config.schema.json"))


def packaged_config_path() -> Path:
    """The demo config shipped in the package: the default when no config is named."""
    with resources.as_file(PACKAGE_DATA / "configs" / "demo.yaml") as path:
        return Path(path)


def json_path(parts: Any) -> str:
    """Render a jsonschema error path as `$.a.b[0]`."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


Violation = tuple[tuple[str | int, ...], str]  # (path of the node it is about, `<json path>: <message>`)


def schema_errors(instance: Any, schema: dict[str, Any]) -> list[Violation]:
    """Every violation of `schema` by `instance` with the path of the node to point at, in a stable order.

    An unexpected key is reported on its parent object (that is where jsonschema puts it), but the node to
    point at is the key itself, so a person is sent to the line that has to go.
    """
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(instance), key=lambda e: (json_path(e.absolute_path), e.message))
    out: list[Violation] = []
    for e in errors:
        where = tuple(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            extra = [k for k in e.instance if k not in e.schema.get("properties", {})]
            if extra:
                where += (extra[0],)
        out.append((where, f"{json_path(e.absolute_path)}: {e.message}"))
    return out


def schema_violations(instance: Any, schema: dict[str, Any]) -> list[str]:
    """Every violation of `schema` by `instance`, as `<json path>: <message>`, in a stable order."""
    return [text for _, text in schema_errors(instance, schema)]


def fill_defaults(instance: Any, schema: dict[str, Any]) -> Any:
    """Return a copy of `instance` with every schema `default` filled in, recursively through objects."""
    if schema.get("type") != "object" or not isinstance(instance, dict):
        return copy.deepcopy(instance)
    out = copy.deepcopy(instance)
    for key, sub in schema.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = fill_defaults(out[key], sub)
    return out


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON config file (JSON is YAML); an empty file is an empty config."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [f"$: cannot read config file: {exc}"]) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(str(path), [f"{at}$: not valid YAML/JSON: {exc}"]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), [f"$: the config must be a mapping, got {type(data).__name__}"])
    return data


def resolve_config(raw: dict[str, Any], source: str = "<config>") -> dict[str, Any]:
    """Validate a raw config, fill defaults and validate again; raise ConfigError listing all violations.

    Every asset and check of a run resolves the config again (about 20 ms of schema validation each),
    so the result of one raw config is kept per process and handed out as a copy.
    """
    return copy.deepcopy(_resolve_cached(canonical_json(raw), source))


@lru_cache(maxsize=16)
def _resolve_cached(raw_json: bytes, source: str) -> dict[str, Any]:
    """resolve_config of one canonical raw config (an invalid one raises and is not kept)."""
    raw = migrate(json.loads(raw_json), source)
    schema = load_schema("corpus-config.schema.json")
    errors = schema_errors(raw, schema)
    if not errors:
        resolved = fill_defaults(raw, schema)
        errors = schema_errors(resolved, schema)
    if errors:
        raise ConfigError(source, [text for _, text in errors], [where for where, _ in errors])
    near = resolved.get("near_dup", {})
    bands, rows = near.get("bands"), near.get("rows")
    if (bands is None) != (rows is None):
        raise ConfigError(source, ["$.near_dup: set both bands and rows, or neither (null chooses both)"],
                          [("near_dup", "bands" if bands is None else "rows")])
    if bands is not None and bands * rows > near["num_perm"]:
        raise ConfigError(source, [f"$.near_dup.bands: bands x rows ({bands} x {rows}) exceeds num_perm "
                                   f"({near['num_perm']})"], [("near_dup", "bands")])
    return resolved


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load, merge overrides (deep), validate and resolve a corpus config; None means the empty config.

    A violation found in a file names its line and column as well as its JSON path.
    """
    raw = read_config_file(path) if path is not None else {}
    if overrides:
        raw = deep_merge(raw, overrides)
    try:
        return resolve_config(raw, str(path) if path is not None else "<defaults>")
    except ConfigError as exc:
        if path is None or len(exc.paths) != len(exc.violations):
            raise
        located = locate_violations(path, list(zip(exc.paths, exc.violations, strict=True)), overrides)
        raise ConfigError(exc.where, located, exc.paths) from None


def load_settings(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """`load_config` as typed settings: the one form drivers and logic take."""
    return Settings.from_resolved(load_config(path, overrides))


def config_root_node(path: str | Path) -> yaml.Node | None:
    """The YAML node tree of a config file (JSON is YAML, so one parser serves both); None if unreadable."""
    try:
        return yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeError, yaml.YAMLError):
        return None


def node_position(root: yaml.Node | None, parts: tuple[str | int, ...]) -> tuple[int, int] | None:
    """(line, column), 1-based, of the node at `parts` in a composed config: of the key for a mapping entry,
    of the item for a list entry. A path that leaves the file (a filled-in default) stops at its deepest
    ancestor in the file; a path with no ancestor in the file but the root has no position."""
    node = root
    mark = None
    for part in parts:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    child, mark = value, key.start_mark
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
            mark = child.start_mark
        if child is None:
            break
        node = child
    if root is None or (mark is None and parts):
        return None
    mark = mark or root.start_mark
    return mark.line + 1, mark.column + 1


def _from_overrides(overrides: dict[str, Any] | None, parts: tuple[str | int, ...]) -> bool:
    """Whether the value at `parts` was set by an override rather than the file."""
    node: Any = overrides
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
        if not isinstance(node, dict):
            return True
    return False


def locate_violations(path: str | Path | None, violations: list[Violation],
                      overrides: dict[str, Any] | None = None) -> list[str]:
    """`line L, column C: <json path>: <message>` for each violation whose node the config file has; the
    others (no file, a value an override set) keep their JSON path only. The file is parsed again only here,
    on the way to an error."""
    root = config_root_node(path) if path is not None else None
    out = []
    for parts, text in violations:
        pos = None if _from_overrides(overrides, parts) else node_position(root, parts)
        out.append(f"line {pos[0]}, column {pos[1]}: {text}" if pos is not None else text)
    return out


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Merge `extra` into a copy of `base`, recursing into nested mappings."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: the form config_sha256 hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def output_config(resolved: dict[str, Any]) -> dict[str, Any]:
    """The part of the resolved config that decides output bytes (EXECUTION_KEYS removed)."""
    out = copy.deepcopy(resolved)
    for dotted in EXECUTION_KEYS:
        *parents, leaf = dotted.split(".")
        node = out
        for part in parents:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def config_sha256(resolved: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the resolved config, without the execution keys and the
    sections of downstream stages (DOWNSTREAM_SECTIONS)."""
    corpus = {k: v for k, v in output_config(resolved).items() if k not in DOWNSTREAM_SECTIONS}
    return hashlib.sha256(canonical_json(corpus)).hexdigest()


def output_settings(resolved: dict[str, Any], section: str, keys: tuple[str, ...] | None = None) -> Any:
    """The output-deciding settings of one config section (execution keys removed), optionally only `keys`.

    Stage cache keys are built from this, so a stage declares once which section (and keys) it depends on.
    """
    value = output_config(resolved)[section]
    if keys is None:
        return value
    return {k: value[k] for k in keys if k in value}


def artifacts_root(resolved: dict[str, Any]) -> Path:
    """The artifacts root as an absolute local path: for a store URL (`s3://...`), this machine's mirror of it
    (`core.storage`)."""
    paths = resolved["paths"]
    url = str(paths["artifacts"])
    if is_remote(url):
        return default_mirror(url, paths.get("mirror"))
    return Path(local_path(url)).expanduser().resolve()


def artifacts_store(resolved: dict[str, Any]) -> str | None:
    """The artifacts store's URL when `paths.artifacts` names one, else None (a local folder)."""
    url = str(resolved["paths"]["artifacts"])
    return url.rstrip("/") if is_remote(url) else None
