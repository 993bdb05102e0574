"""Count the names one stage package (or explain/defs/cli) imports from another stage package.

For each module under corpus_dagster/<pkg>/ with <pkg> a stage, explain, defs or cli, every
`from corpus_dagster.<stage>[.<mod>] import name` (top level or inside a function) with <stage> a stage
other than <pkg>. A name that is itself a module (`from corpus_dagster.clean import driver as clean`)
counts as the attributes read from it (`clean.clean_record` -> clean.driver:clean_record).
A name taken from a `driver` module that the driver itself imports (not defines) is a re-export.

Usage: python cross_stage_names.py [REPO]   (default: the current directory)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

STAGES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokenize", "analysis", "release", "review")
IMPORTERS = STAGES + ("explain", "defs", "cli")


def module_path(root: Path, module: str) -> Path | None:
    rel = Path(*module.split("."))
    for p in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if p.exists():
            return p
    return None


def defined_and_imported(path: Path) -> tuple[set[str], set[str]]:
    """Top-level names a module defines, and the ones it imports."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defined.add(n.id)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                imported.add((a.asname or a.name).split(".")[0])
    return defined, imported - defined


def collect(repo: Path, importers: tuple[str, ...]) -> set[tuple[str, str, str]]:
    """(importer, target module, name) for every cross-stage name the given packages import."""
    pkg_root = repo / "corpus_dagster"
    uses: set[tuple[str, str, str]] = set()
    for pkg in importers:
        for path in sorted((pkg_root / pkg).rglob("*.py")):
            importer = ".".join(path.relative_to(repo).with_suffix("").parts)
            tree = ast.parse(path.read_text())
            module_aliases: dict[str, str] = {}
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                parts = node.module.split(".")
                if parts[0] != "corpus_dagster" or len(parts) < 2 or parts[1] not in STAGES or parts[1] == pkg:
                    continue
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    sub_path = module_path(repo, sub)
                    if sub_path is not None and sub_path.name != "__init__.py" or (sub_path and sub_path.parent.name == a.name):
                        module_aliases[a.asname or a.name] = sub
                    else:
                        uses.add((importer, node.module, a.name))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module_aliases:
                    uses.add((importer, module_aliases[node.value.id], node.attr))
    return uses


def report(repo: Path, uses: set[tuple[str, str, str]], title: str) -> None:
    print(f"== {title}")
    by_target: dict[str, set[str]] = defaultdict(set)
    importers_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for importer, target, name in uses:
        by_target[target].add(name)
        importers_of[(target, name)].add(importer)
    reexports: set[tuple[str, str]] = set()
    total = 0
    print(f"{'target module':40} names  (re-exported: imported by the module, not defined there)")
    for target in sorted(by_target):
        path = module_path(repo, target)
        defined, imported = defined_and_imported(path) if path else (set(), set())
        names = sorted(by_target[target])
        re = [n for n in names if n in imported]
        reexports.update((target, n) for n in re)
        total += len(names)
        print(f"{target:40} {len(names):3d}  re-exported {len(re):2d}: {', '.join(names)}"
              + (f"  [re: {', '.join(re)}]" if re else ""))
    drivers = [(t, n) for t in by_target for n in by_target[t] if t.endswith(".driver")]
    driver_reexports = [x for x in reexports if x[0].endswith(".driver")]
    print(f"\ndistinct names crossing stages: {total}")
    print(f"  taken from a driver: {len(drivers)}, of which re-exported internals: {len(driver_reexports)}")
    print(f"  taken from an outputs module: {sum(len(v) for t, v in by_target.items() if t.endswith('.outputs'))}")
    print(f"import sites (importer, module, name): {len(uses)}")
    outside = sorted({(i, t) for i, t, _ in uses if t.endswith(".driver") or not t.endswith(".outputs")})
    allowed = [(i, t) for i, t in outside
               if i.startswith("corpus_dagster.cli.") or i.startswith(f"corpus_dagster.defs.{t.split('.')[1]}")]
    bad = [x for x in outside if x not in allowed]
    print(f"modules importing a stage module other than outputs (defs/<stage>*, cli aside): {len(bad)}")
    for i, t in bad:
        print(f"  {i} -> {t}")
    print()


def figures(repo: Path) -> dict[str, int]:
    """The stage packages' cross-stage names: all, from a driver, re-exported internals; and modules outside a
    stage that import one of its modules other than its outputs (defs/<stage>* and cli aside)."""
    uses = collect(repo, STAGES)
    by_target: dict[str, set[str]] = defaultdict(set)
    for _, target, name in uses:
        by_target[target].add(name)
    drivers = {(t, n) for t, names in by_target.items() if t.endswith(".driver") for n in names}
    reexports = set()
    for t, n in drivers:
        path = module_path(repo, t)
        if path is not None and n in defined_and_imported(path)[1]:
            reexports.add((t, n))
    every = collect(repo, IMPORTERS)
    outside = {(i, t) for i, t, _ in every if not t.endswith(".outputs")}
    bad = {(i, t) for i, t in outside
           if not (i.startswith("corpus_dagster.cli.") or i.startswith(f"corpus_dagster.defs.{t.split('.')[1]}"))}
    return {"names": sum(len(v) for v in by_target.values()), "from_driver": len(drivers),
            "reexported": len(reexports), "outside_importers": len(bad)}


def main() -> None:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    report(repo, collect(repo, STAGES), "importers: the stage packages")
    report(repo, collect(repo, STAGES + ("explain",)), "importers: the stage packages and explain")
    report(repo, collect(repo, IMPORTERS), "importers: the stage packages, explain, defs and cli")


if __name__ == "__main__":
    main()
