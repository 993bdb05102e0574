"""`reproduce/` of a release folder: what a reader needs, besides the sources, to build the release again.

- `config.yaml`: the resolved config without the keys that describe the building machine (`paths`: the
  artifacts root, mirror, storage options and their secrets; `executor`, `locks`); any other value naming a
  local file (a tokenizer folder, a KenLM model, a protected set) is reduced to its file name, and a
  comment lists them.
- `LEDGER.jsonl`: the ledger rows of the released sources, pins kept. A local URL or glob becomes
  `sources/<source_id>/<the part from its first wildcard on>` (relative, so it resolves against the
  reader's working folder), and each pinned local file is named the same way, relative to its glob: the
  ids, which name files relative to their glob, stay the same. Remote URLs stay as they are.
- `_CREATED_AT.parquet`: the created_at of every row's content (release.created), so a rebuild copying it
  next to its versions gives the rows the same created_at.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from corpus_dagster.core.settings import Settings

DIR = "reproduce"
MACHINE_KEYS = ("paths", "executor", "locks")  # where and how one machine ran the build, never what it built
REPRODUCE_FILES = [f"{DIR}/config.yaml", f"{DIR}/LEDGER.jsonl", f"{DIR}/_CREATED_AT.parquet"]
_WILDCARD = re.compile(r"[*?\[]")


def _local_path(value: str) -> str | None:
    """The path of a local file URL or absolute/home path, else None (remote URLs, relative names)."""
    if value.startswith("file://"):
        return value.removeprefix("file://")
    if value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", value):
        return value
    return None


def _glob_root(path: str) -> tuple[str, str]:
    """(folder before the first wildcard component, the rest): `/data/x/*.txt` -> (`/data/x`, `*.txt`); a
    file without wildcards is (its folder, its name)."""
    parts = PurePosixPath(path).parts
    cut = next((i for i, p in enumerate(parts) if _WILDCARD.search(p)), len(parts) - 1)
    return str(PurePosixPath(*parts[:cut])), str(PurePosixPath(*parts[cut:]))


def reproduce_ledger_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ledger rows with local URLs and pins renamed under sources/<source_id>/ (see the module doc)."""
    out = []
    for row in rows:
        row = copy.deepcopy(dict(row))
        sid = row["source_id"]
        # one folder per distinct glob root: globs over the same folder share it
        distinct = list(dict.fromkeys(_glob_root(p)[0] for u in row["urls"] if (p := _local_path(u)) is not None))
        bases = {root: f"sources/{sid}" if len(distinct) == 1 else f"sources/{sid}/{i}" for i, root in enumerate(distinct)}
        roots = list(bases.items())
        urls = []
        for url in row["urls"]:
            path = _local_path(url)
            if path is None:
                urls.append(url)
                continue
            root, rest = _glob_root(path)
            urls.append(f"{bases[root]}/{rest}")
        row["urls"] = urls
        pins = {}
        for key, digest in (row.get("sha256") or {}).items():
            path = _local_path(key)
            if path is None:
                pins[key] = digest
                continue
            root, base = next(((r, b) for r, b in sorted(roots, key=lambda rb: -len(rb[0]))
                               if path.startswith(r.rstrip("/") + "/")), (str(PurePosixPath(path).parent), f"sources/{sid}"))
            pins[f"{base}/{path[len(root.rstrip('/')) + 1:]}"] = digest
        row["sha256"] = pins
        out.append(row)
    return out


def _strip_local(node: Any, where: str, found: list[str]) -> Any:
    """The config with every local path value reduced to its file name; `found` gets `key: name`."""
    if isinstance(node, Mapping):
        return {k: _strip_local(v, f"{where}.{k}" if where else k, found) for k, v in node.items()}
    if isinstance(node, list):
        return [_strip_local(v, f"{where}[{i}]", found) for i, v in enumerate(node)]
    if isinstance(node, str) and _local_path(node) is not None:
        name = PurePosixPath(_local_path(node).rstrip("/")).name or "file"  # type: ignore[union-attr]
        found.append(f"{where}: {name}")
        return name
    return node


def reproduce_config(settings: Settings) -> str:
    """config.yaml: the resolved config the settings were read from, without MACHINE_KEYS, local paths
    reduced to names."""
    plain = {k: v for k, v in json.loads(json.dumps(settings.resolved, default=str)).items() if k not in MACHINE_KEYS}
    found: list[str] = []
    plain = _strip_local(plain, "", found)
    head = ["# The resolved config of this release without `paths` (add your own: artifacts, ledger).",
            "# Build with: python -m corpus_dagster.run <this file with paths added> (see README.md, Reproduce)."]
    if found:
        head.append("# Local files named here by their file name only; put yours there or edit the keys:")
        head += [f"#   {f}" for f in found]
    return "\n".join(head) + "\n" + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


def reproduce_ledger(rows: Sequence[Mapping[str, Any]]) -> str:
    """LEDGER.jsonl of the released sources, local paths renamed (reproduce_ledger_rows)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in reproduce_ledger_rows(rows))


def write_reproduce(folder: Path, settings: Settings, ledger_rows: Sequence[Mapping[str, Any]],
                    created_at: bytes) -> None:
    """reproduce/config.yaml, LEDGER.jsonl and _CREATED_AT.parquet under the (temp) release folder."""
    out = folder / DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(reproduce_config(settings), encoding="utf-8")
    (out / "LEDGER.jsonl").write_text(reproduce_ledger(ledger_rows), encoding="utf-8")
    (out / "_CREATED_AT.parquet").write_bytes(created_at)
