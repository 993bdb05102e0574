"""Count function parameters named settings/config/cfg/resolved whose annotation is a Mapping or dict
(`Mapping[str, Any]`, `dict[str, Any]`, `Settings | Mapping[...]`, ...).

Usage: python count_mapping_params.py [ROOT ...] [-v]   (default ROOT: corpus_dagster; -v lists each one)
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

NAMES = {"settings", "config", "cfg", "resolved"}


def _is_mapping(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    return "Mapping" in text or "dict[" in text or text in {"dict", "'dict'"}


def hits(root: Path):
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                if arg.arg in NAMES and arg.annotation is not None and _is_mapping(arg.annotation):
                    yield path, node.lineno, getattr(node, "name", "<lambda>"), arg.arg, ast.unparse(arg.annotation)


def main() -> int:
    verbose = "-v" in sys.argv[1:]
    roots = [Path(a) for a in sys.argv[1:] if a != "-v"] or [Path("corpus_dagster")]
    found = [h for root in roots for h in hits(root)]
    per_pkg = Counter()
    for path, line, func, name, ann in found:
        parts = path.parts
        pkg = "/".join(parts[:2]) if len(parts) > 2 else str(path)
        per_pkg[pkg] += 1
        if verbose:
            print(f"{path}:{line}: {func}({name}: {ann})")
    for pkg, n in sorted(per_pkg.items()):
        print(f"{n:4d}  {pkg}")
    print(f"{len(found):4d}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
