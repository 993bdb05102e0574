"""The stage boundary in numbers: config forms, read faces, cache prologues, circles, clean rules.

    .venv/bin/python bench/structure.py                       # this checkout
    .venv/bin/python bench/structure.py --before /tmp/before  # before | after, e.g. a worktree of an older commit

Each checkout is measured in a child process that imports its own `corpus_dagster` (the import graph and the
clean declarations are read from the code that runs). What each row counts:

- mapping params: function parameters named settings/config/cfg/resolved annotated as a Mapping or dict, in
  the stage packages (ingest .. review) and in the whole package;
- as_settings: lines that name `as_settings` under corpus_dagster/;
- settings.py lines: the generated typed settings;
- .cached( outside core: hand-written cache prologues;
- unit-graph builders: modules of defs/ that declare the plan op of a unit stage (`@dg.op(name="..._plan")`);
- cross-stage names: distinct names a stage package imports from another stage, how many of them come from
  a driver, and how many of those are internals the driver re-exports;
- outside importers: modules (stages, explain, defs, cli) importing a stage module other than its read face,
  defs/<stage>* and cli aside;
- circles: strongly connected sets in the import graph (imports inside functions included);
- clean codes written twice: reason codes whose decision is both declared and written again in verdict code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STAGES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokenize", "analysis", "release", "review")
ROWS = (
    ("mapping_params_stages", "mapping params (stage packages)"),
    ("mapping_params_all", "mapping params (whole package)"),
    ("as_settings", "as_settings mentions"),
    ("settings_lines", "core/settings.py lines"),
    ("cached_outside_core", ".cached( outside core"),
    ("unit_graph_builders", "unit-graph builders in defs"),
    ("names", "cross-stage names"),
    ("from_driver", "  of them from a driver"),
    ("reexported", "  of them re-exported internals"),
    ("outside_importers", "outside importers of a non-read-face"),
    ("circles", "import circles"),
    ("clean_codes", "clean reason codes"),
    ("clean_written_twice", "clean codes written twice"),
)


def measure(repo: Path) -> dict[str, int]:
    """Every figure of one checkout; runs inside the child that imports that checkout."""
    sys.path.insert(0, str(HERE / "structure"))
    import clean_rules
    import cross_stage
    import import_cycles
    import mapping_params

    package = repo / "corpus_dagster"
    sources = {p: p.read_text(encoding="utf-8") for p in sorted(package.rglob("*.py"))}
    params = list(mapping_params.hits(package))
    figures = {
        "mapping_params_stages": sum(1 for path, *_ in params if path.relative_to(package).parts[0] in STAGES),
        "mapping_params_all": len(params),
        "as_settings": sum(text.count("as_settings") for text in sources.values()),
        "settings_lines": (package / "core" / "settings.py").read_text(encoding="utf-8").count("\n"),
        "cached_outside_core": sum(len(re.findall(r"\.cached\(", text)) for p, text in sources.items()
                                   if p.relative_to(package).parts[0] != "core"),
        "unit_graph_builders": sum(1 for p, text in sources.items()
                                   if p.parent.name == "defs" and re.search(r'@dg\.op\(name=f?"[^"]*_plan"', text)),
        **cross_stage.figures(repo),
        "circles": len(import_cycles.circles()),
    }
    figures["clean_codes"], figures["clean_written_twice"] = clean_rules.written_twice(str(repo))
    return figures


def child(repo: Path) -> dict[str, int]:
    """`measure` in a process that imports `repo`'s corpus_dagster."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    out = subprocess.run([sys.executable, __file__, "--child", str(repo)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"measuring {repo} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--before", type=Path, help="another checkout to measure beside it")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child.resolve())))
        return 0
    after = child(args.checkout.resolve())
    before = child(args.before.resolve()) if args.before else None
    width = max(len(label) for _, label in ROWS)
    print(f"{'figure':{width}}  " + (f"{'before':>8}  " if before else "") + f"{'now':>8}")
    for key, label in ROWS:
        print(f"{label:{width}}  " + (f"{before[key]:>8}  " if before else "") + f"{after[key]:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
