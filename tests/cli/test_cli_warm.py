"""The warm-up reaches every compiled kernel, so a build after it compiles nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import corpus_dagster
from corpus_dagster.cli import warm

_DECORATED = re.compile(r"^@_?compiled\b", re.MULTILINE)


def _kernel_modules() -> list[str]:
    """Every module of the package that defines a kernel with `core.jit.compiled`."""
    root = Path(corpus_dagster.__file__).parent
    return sorted(
        "corpus_dagster." + ".".join(path.relative_to(root).with_suffix("").parts)
        for path in root.rglob("*.py") if _DECORATED.search(path.read_text(encoding="utf-8"))
    )


_PROBE = """
import importlib, json, sys
from corpus_dagster.cli import warm
from corpus_dagster.core.jit import KERNELS
for name in sys.argv[1:]:
    importlib.import_module(name)
lines = []
results = warm.warm(workers=1, log=lines.append)
missing = [k.py_func.__module__ + "." + k.py_func.__qualname__ for k in KERNELS if not k.signatures]
print(json.dumps({"groups": [r[0] for r in results], "kernels": len(KERNELS), "missing": missing, "lines": lines}))
"""


def test_every_kernel_has_a_compiled_signature_after_the_warm_up() -> None:
    """In a fresh interpreter, so no other test has called a kernel first."""
    modules = _kernel_modules()
    assert "corpus_dagster.lib.kernels" in modules and "corpus_dagster.clean.word_kernel" in modules
    proc = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["groups"] == list(warm.GROUPS)
    root = Path(corpus_dagster.__file__).parent
    decorated = sum(len(_DECORATED.findall(path.read_text(encoding="utf-8"))) for path in root.rglob("*.py"))
    assert got["kernels"] == decorated >= 11  # every decorated kernel registered, none missed
    assert got["missing"] == [], f"kernels the warm-up does not reach: {got['missing']}"
    assert got["lines"][0].startswith("warm: numba kernels, cached ") and got["lines"][-1].startswith("warm: done in")


def test_cache_location_names_numba_cache_dir(monkeypatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere/numba")
    assert warm.cache_location() == "in NUMBA_CACHE_DIR (/somewhere/numba)"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert warm.cache_location().startswith(("beside the sources", "in the user cache"))
