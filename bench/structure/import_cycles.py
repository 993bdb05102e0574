"""Circles in the import graph of corpus_dagster: strongly connected sets of modules.

Built with grimp (what import-linter uses): every import, at the top of a module or inside a function,
TYPE_CHECKING blocks included; plus the `import_module("corpus_dagster....")` calls a module makes with a
literal name (the lazy names of package __init__s and read faces), which grimp cannot see.

Usage: PYTHONPATH=REPO python import_cycles.py
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import grimp


def dynamic_edges(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    edges = set()
    for module in graph.modules:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        tree = ast.parse(Path(spec.origin).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_module":
                for arg in node.args[:1]:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("corpus_dagster"):
                        edges.add((module, arg.value))
                    elif isinstance(arg, ast.Subscript) or isinstance(arg, ast.Name):  # a table of names
                        for c in ast.walk(tree):
                            if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith("corpus_dagster.") and c.value in graph.modules:
                                edges.add((module, c.value))
    return edges


def sccs(nodes: list[str], succ: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def circles() -> list[list[str]]:
    """The import circles of the corpus_dagster importable here."""
    graph = grimp.build_graph("corpus_dagster", include_external_packages=False)
    succ = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for a, b in dynamic_edges(graph):
        succ.setdefault(a, set()).add(b)
    return sccs(sorted(graph.modules), succ)


def main() -> None:
    graph = grimp.build_graph("corpus_dagster", include_external_packages=False)
    succ = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    dyn = dynamic_edges(graph)
    for a, b in dyn:
        succ.setdefault(a, set()).add(b)
    comps = sccs(sorted(graph.modules), succ)
    print(f"{len(graph.modules)} modules, {sum(len(s) for s in succ.values())} imports ({len(dyn)} through import_module)")
    print(f"circles: {len(comps)}")
    for comp in comps:
        print("  " + " <-> ".join(comp))
        for a in comp:
            for b in sorted(succ[a] & set(comp)):
                detail = graph.get_import_details(importer=a, imported=b)
                lines = ", ".join(f"l.{d['line_number']}: {d['line_contents']}" for d in detail) or "import_module"
                print(f"      {a} -> {b} ({lines})")


if __name__ == "__main__":
    main()
