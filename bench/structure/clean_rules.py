"""Count clean reason codes whose decision is written twice: declared in the filter declarations and
written again in verdict code.

usage: PYTHONPATH=<worktree> python count_clean_rules.py <worktree>

A reason code (as its source writes it: the n-gram codes are one template each, 24 codes) counts when the
clean package's code outside the declarations names the code (a string literal or f-string template) or
reads one of its declared threshold keys (`cfg.<key>`, `getattr(cfg, "<key>")` or an f-string template of
the key). Declarations are the arguments of calls to Filter/Reason/Limit/_reason/_limit/need/rule. The
settings-field names that only parametrize a measurement (bullet_chars, stop_words ...) are not threshold keys.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

DECL_CALLS = {"Filter", "Reason", "Limit", "_reason", "_limit", "need", "rule", "ngram_reasons"}


def template(text: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", re.sub(r"(?<=_)\d+(?=gram)", "{}", text))


def fstring(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def mentions(path: Path) -> tuple[set[str], set[str]]:
    """(string literals and f-string templates, settings fields read as cfg.<name> or getattr(cfg, ...))."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    keys: set[str] = set()

    def visit(node: ast.AST, in_decl: bool) -> None:
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in DECL_CALLS:
                in_decl = True
            if (not in_decl and name == "getattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name)
                    and node.args[0].id == "cfg"):
                a = node.args[1]
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    keys.add(template(a.value))
                elif isinstance(a, ast.JoinedStr):
                    keys.add(template(fstring(a)))
        if not in_decl:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(template(node.value))
            elif isinstance(node, ast.JoinedStr):
                out.add(template(fstring(node)))
                return
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cfg":
                keys.add(node.attr)
        for child in ast.iter_child_nodes(node):
            visit(child, in_decl)

    visit(tree, False)
    return out, keys


def scan(worktree: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """(each reason code's declared threshold keys, the strings the verdict code names, the keys it reads):
    the verdict code is every clean module but the driver (which names output columns, not rules)."""
    from corpus_dagster.clean.filters import FILTERS

    clean = Path(worktree) / "corpus_dagster" / "clean"
    found = [mentions(p) for p in sorted(clean.glob("*.py")) if p.name != "driver.py"]
    codes: dict[str, set[str]] = {}
    for f in FILTERS:
        for r in f.reasons:
            codes.setdefault(template(r.code), set()).update(template(lim.key) for lim in r.limits)
    return codes, set().union(*(f[0] for f in found)), set().union(*(f[1] for f in found))


def written_twice(worktree: str) -> tuple[int, int]:
    """(reason codes, codes whose decision is written both in a declaration and in verdict code)."""
    codes, literals, read = scan(worktree)
    return len(codes), sum(1 for c, keys in codes.items() if c in literals or keys & read)


def main(worktree: str) -> None:
    codes, literals, read = scan(worktree)
    twice = sorted(c for c, keys in codes.items() if c in literals or keys & read)
    print(f"reason codes (n-gram codes as one template each): {len(codes)}")
    print(f"written twice (declaration and verdict code): {len(twice)}")
    for c in twice:
        print("  ", c, *(["code literal"] if c in literals else []), *sorted(k for k in codes[c] if k in read))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
