"""JIT compilation in a first build: how many CPU seconds numba compiles inside `make demo`'s pipeline run on a
fresh copy of this checkout, without and with the warm-up (`python -m corpus_dagster.cli.warm`) ahead of it.

Each case copies the checkout's files (no caches, no artifacts) to a temporary folder and runs the demo
there (`python -m corpus_dagster.cli.demo`, this interpreter, PYTHONPATH = the copy). A sitecustomize on
PYTHONPATH listens to numba's compile events in every process of the run (the CLI, Dagster's step
processes, their pool workers) and appends each compilation's kernel, file and seconds to a log, so the
table adds up compilation wherever it happened:

- `fresh`: no warm-up; every kernel compiles inside the build (in each process that meets it first);
- `warm`: the warm-up first, then the build;
- `read-only`: the package folder made read-only, as a wheel installed by root is for its users (a read-only
  bind mount when this runs as root, whom file modes do not stop; the write bits otherwise), and a fresh
  XDG_CACHE_HOME: numba caches in the user's cache folder; the warm-up first, then the build.

    .venv/bin/python bench/jit.py                 # all three cases
    .venv/bin/python bench/jit.py --cases warm    # one
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", "artifacts", ".dagster_home", "__pycache__", "out", "build", ".pytest_cache", ".ruff_cache"}
CASES = ("fresh", "warm", "read-only")

SITECUSTOMIZE = '''
import os, sys, time
_log = os.environ.get("CORPUS_JIT_LOG")

def _install():
    from numba.core import event

    class _Log(event.Listener):
        depth = 0  # a kernel's compilation holds those of the functions it calls: count the outermost only

        def on_start(self, ev):
            if self.depth == 0:
                self.t0 = time.process_time()
            self.depth += 1

        def on_end(self, ev):
            self.depth -= 1
            if self.depth:
                return
            fn = getattr(ev.data.get("dispatcher"), "py_func", None)
            name = getattr(fn, "__qualname__", "?")
            path = getattr(getattr(fn, "__code__", None), "co_filename", "?")
            with open(_log, "a") as fh:  # written at once: pool workers leave by os._exit, without atexit
                fh.write(f"{os.getpid()}\\t{time.process_time() - self.t0:.3f}\\t{name}\\t{path}\\n")

    event.register("numba:compile", _Log())

if _log:
    import builtins
    _real = builtins.__import__

    _done = []

    def _hook(name, *args, **kwargs):
        module = _real(name, *args, **kwargs)
        # once numba's package has its decorators (importing its event module earlier is circular), and once
        # only: the imports that were under way when it happened return through this hook too
        if not _done and name.startswith("numba") and hasattr(sys.modules.get("numba"), "njit"):
            _done.append(True)
            builtins.__import__ = _real
            _install()
        return module

    builtins.__import__ = _hook
'''


def copy_checkout(dest: Path) -> None:
    """The checkout's files without caches, virtualenvs, artifacts or git data."""
    shutil.copytree(ROOT, dest, ignore=lambda folder, names: [n for n in names if n in SKIP or n.endswith(".pyc")])


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one command, which must succeed."""
    cpu0, wall0 = children_cpu(), time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - wall0, children_cpu() - cpu0


def compiled(log: Path, src: Path) -> tuple[float, int, int]:
    """(compile CPU s, compilations, processes) from the event log (numba's own helpers that a kernel calls
    compile too and count); refuses a kernel of this package compiled from outside the copy."""
    if not log.exists():
        return 0.0, 0, 0
    seconds, count, pids = 0.0, 0, set()
    for line in log.read_text().splitlines():
        pid, sec, _name, path = line.split("\t")
        if "corpus_dagster" in path and not path.startswith(str(src)):
            raise SystemExit(f"a kernel compiled from {path}, not from the copy {src}: PYTHONPATH did not win")
        seconds += float(sec)
        count += 1
        pids.add(pid)
    return seconds, count, len(pids)


def _read_only(package: Path) -> bool:
    """Make the copy's package folder read-only, as a wheel installed by root is for its users: a read-only
    bind mount under root (whom file modes do not stop), the write bits otherwise. True when mounted."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(package), str(package)], check=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(package)], check=True)
        return True
    for path in [package, *package.rglob("*")]:
        if path.is_dir():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return False


def _writable(package: Path, mounted: bool) -> None:
    """Undo `_read_only`, so the temporary folder can be removed."""
    if mounted:
        subprocess.run(["umount", str(package)], check=False)
        return
    for path in [package, *package.rglob("*")]:
        if path.is_dir():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def one_case(case: str, tmp: Path) -> dict[str, object]:
    src = tmp / case / "src"
    copy_checkout(src)
    site = tmp / case / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH", "DAGSTER_HOME")}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{src}", DAGSTER_HOME=str(tmp / case / "dagster_home"),
               XDG_CACHE_HOME=str(tmp / case / "xdg_cache"))
    package = src / "corpus_dagster"
    mounted = _read_only(package) if case == "read-only" else False
    try:
        row: dict[str, object] = {"case": case, "warm_wall": None, "warm_cpu": None}
        if case != "fresh":
            env["CORPUS_JIT_LOG"] = str(tmp / case / "warm.log")
            row["warm_wall"], row["warm_cpu"] = run([sys.executable, "-m", "corpus_dagster.cli.warm"], src, env)
            row["warm_compile"] = compiled(tmp / case / "warm.log", src)
        env["CORPUS_JIT_LOG"] = str(tmp / case / "build.log")
        row["build_wall"], row["build_cpu"] = run([sys.executable, "-m", "corpus_dagster.cli.demo"], src, env)
        row["build_compile"] = compiled(tmp / case / "build.log", src)
        row["user_cache_files"] = sum(1 for _ in (tmp / case / "xdg_cache").rglob("*.nbc"))
        row["in_tree_files"] = sum(1 for _ in package.rglob("*.nbc"))
        return row
    finally:
        if case == "read-only":
            _writable(package, mounted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="corpus-jit-") as tmp:
        for case in args.cases:
            print(f"{case}: copying {ROOT} and running the demo ...", file=sys.stderr, flush=True)
            rows.append(one_case(case, Path(tmp)))
    print("\n## JIT compilation in a first build (`make demo`'s pipeline on a fresh copy of this checkout)\n")
    print("| case | warm-up wall s | warm-up CPU s | compiled in the warm-up (CPU s, kernels) "
          "| build wall s | build CPU s | compiled in the build (CPU s, kernels, processes) |")
    print("|---|---:|---:|---|---:|---:|---|")
    for r in rows:
        wc = r.get("warm_compile")
        bc = r["build_compile"]
        warm_cells = ("-", "-", "-") if r["warm_wall"] is None else (
            f"{r['warm_wall']:.1f}", f"{r['warm_cpu']:.1f}", f"{wc[0]:.1f} s, {wc[1]}")
        print(f"| {r['case']} | {' | '.join(warm_cells)} | {r['build_wall']:.1f} | {r['build_cpu']:.1f} "
              f"| **{bc[0]:.1f} s**, {bc[1]}, {bc[2]} |")
    print("\n| case | cached kernel files beside the sources | in the user cache folder |\n|---|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['in_tree_files']} | {r['user_cache_files']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
