"""Negative set for the key detector: real identifiers and dotted names of code, placed where code puts them.

Harvested from an interpreter's standard library and the installed packages next to it: every source file
is parsed with `ast` for class, function and attribute names and dotted paths such as
`urllib.request.HTTPBasicAuthHandler` (8+ ASCII characters); the sorted pool is shuffled with a fixed seed.
Each name is then placed after a cue word the key detector reads (`token =`, `password_mgr =`, `api_key:`
...), alone or followed by a call, an index or an attribute.

Which packages a venv holds, and their versions, differ between machines, so a set harvested at test time
differs too. The tests read a frozen sample instead, `code_identifier_lines.txt`, written by
`python tests/data/pii/code_identifiers.py --write` (10,000 lines of a 652,641-name pool); `--rate`
measures the detector on this machine's whole pool.
"""

from __future__ import annotations

import argparse
import ast
import random
import sysconfig
from pathlib import Path

FROZEN = Path(__file__).with_name("code_identifier_lines.txt")

SEED = 20261202
# Cues from keys._KEYWORD / _STRONG_NAME / _CUED_QUOTED, written the way assignments in code write them.
CUES = (
    "token = ", "token=", "password_mgr = ", "api_key: ", "api_key = ", "secret=", "secret = ", "auth_token = ",
    "password: ", "password = ", "passwd = ", "pwd = ", "pass = ", "passphrase = ", "secret_key = ",
    "access_key = ", "private_key = ", "account_key = ", "credentials = ", "credential = ", "auth = ",
    "apikey=", "API_KEY = ", "SECRET_KEY = ", "self.token = ", "self._password = ", "auth_handler = ",
    "tokens: ", "authinfo = ", "secret_value := ", "access_token => ", "AUTH: ",
)
TAILS = ("", "()", "(args)", "(self, *args, **kwargs)", ".attr", "[0]", "(None)", ".copy()", "\n")


def _source_files() -> list[Path]:
    """The .py files of the standard library and of site-packages, sorted (tests excluded: fixtures there
    hold deliberate odd names)."""
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    files: list[Path] = []
    for root in roots:
        files += [p for p in root.rglob("*.py") if "test" not in p.parts and "tests" not in p.parts]
    return sorted(set(files))


def _names(path: Path, root_module: str) -> set[str]:
    """Class, function and attribute names of one file, and their dotted paths under the module."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
            if root_module:
                out.add(f"{root_module}.{node.name}")
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
            parts = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and len(parts) > 0:
                out.add(".".join([value.id, *reversed(parts)]))
        elif isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.name for a in node.names if a.name != "*")
    return out


def _module(path: Path) -> str:
    """Dotted module path of a file under the stdlib or site-packages (`urllib.request`)."""
    for key in ("purelib", "stdlib"):
        root = Path(sysconfig.get_paths()[key])
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if all(p.isidentifier() for p in parts):
                return ".".join(parts)
    return ""


def identifiers(pool: int | None = None, seed: int = SEED) -> list[str]:
    """Distinct identifiers and dotted names of real code (at least 8 characters: shorter ones never reach
    the detector's length floor), sorted and shuffled with the seed; `pool` stops the harvest early."""
    files = _source_files()
    random.Random(seed).shuffle(files)
    names: set[str] = set()
    for path in files:
        names |= {x for x in _names(path, _module(path)) if len(x) >= 8 and x.isascii()}
        if pool is not None and len(names) >= pool:
            break
    ordered = sorted(names)
    random.Random(seed).shuffle(ordered)
    return ordered


def placed(names: list[str], seed: int = SEED) -> list[str]:
    """Each identifier after a cue word, with a tail (`()`, `(args)`, `.attr` ...), as one line of code."""
    rng = random.Random(seed)
    return [f"{rng.choice(CUES)}{name}{rng.choice(TAILS)}" for name in names]


def code_lines(n: int = 10000) -> list[str]:
    """The first n lines of the frozen sample (one line of code each; a tail `\\n` is written as `\\n`)."""
    lines = FROZEN.read_text(encoding="utf-8").splitlines()
    return [line.replace("\\n", "\n") for line in lines[:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {FROZEN.name} from this machine's pool")
    parser.add_argument("--rate", action="store_true", help="key hits over this machine's whole pool")
    args = parser.parse_args()
    if args.write:
        lines = placed(identifiers()[:10000])
        FROZEN.write_text("".join(line.replace("\n", "\\n") + "\n" for line in lines), encoding="utf-8")
        print(f"wrote {len(lines)} lines to {FROZEN}")
    if args.rate:
        from corpus_dagster.core.settings import PiiSettings
        from corpus_dagster.scrub.api import find_pii_batch

        lines = placed(identifiers())
        hits = [line for line, spans in zip(lines, find_pii_batch(lines, PiiSettings()), strict=True)
                if any(kind == "keys" for kind, _, _ in spans)]
        print(f"{len(hits)} of {len(lines)} identifiers after a cue give a key ({len(hits) / len(lines):.3%})")
        for line in hits:
            print("  " + repr(line))


if __name__ == "__main__":
    main()
