"""Negative set for the key detector: real identifiers and dotted names of code, placed where code puts them.

Harvested at run time from this interpreter's standard library (and the installed packages next to it):
a fixed, sorted list of source files is shuffled with a fixed seed and parsed with `ast` until the pool
holds enough names (class, function and attribute names, and dotted paths such as
`urllib.request.HTTPBasicAuthHandler`); the pool is sorted, shuffled with the seed, and the first N taken.
Each name is then placed after a cue word the key detector reads (`token =`, `password_mgr =`, `api_key:`
...), alone or followed by a call, an index or an attribute. The same machine gives the same set.
"""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

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


def identifiers(n: int = 10000, pool: int = 30000, seed: int = SEED) -> list[str]:
    """n distinct identifiers and dotted names of real code (at least 8 characters: shorter ones never reach
    the detector's length floor), chosen deterministically."""
    files = _source_files()
    random.Random(seed).shuffle(files)
    names: set[str] = set()
    for path in files:
        names |= {x for x in _names(path, _module(path)) if len(x) >= 8 and x.isascii()}
        if len(names) >= pool:
            break
    ordered = sorted(names)
    random.Random(seed).shuffle(ordered)
    return ordered[:n]


def code_lines(n: int = 10000, seed: int = SEED) -> list[str]:
    """Each identifier after a cue word, with a tail (`()`, `(args)`, `.attr` ...), as one line of code."""
    rng = random.Random(seed)
    return [f"{rng.choice(CUES)}{name}{rng.choice(TAILS)}" for name in identifiers(n, seed=seed)]
