"""`python -m corpus_dagster.cli.warm`: compile every numba kernel into its on-disk cache ahead of the first build.

numba compiles a kernel on its first call and keeps the machine code in a cache: beside the kernel's
source file when that folder is writable (a clone, an editable install), else in the user's cache folder
(`$XDG_CACHE_HOME/numba` or `~/.cache/numba`: a read-only wheel install), or wherever NUMBA_CACHE_DIR
points. A fresh clone, container or worker image otherwise pays the compilation (about 20 CPU seconds,
three quarters of it the clean stage's word splitter) inside its first build, once per process that
meets a kernel first. This command pays it once, ahead: `make warm` runs it (`make demo` and `make test`
first), and an image build should run it after installing the package.

Each kernel is reached through the function the stages call, on a few small texts, so it is compiled
for exactly the argument types the stages pass (a read-only buffer and a writable one are two
compilations). The groups compile side by side, one process per core. Cached kernels load in well under
a second; a group whose cache is already warm costs that much.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Texts that reach every branch whose argument types differ: ASCII only, accents, Greek capitals (Σ, İ: the
# batch-lowercased path), an astral code point (the word splitter's fallback chunks), digits and URLs.
SAMPLE_TEXTS = [
    "The quick brown fox jumps over the lazy dog; e.g. U.S.A. costs $3.50 and 12kg, don't stop-now.",
    "Ünïcode wörds: naïve café, ΣΟΦΙΑ and İstanbul, 東京 and 😀 emoji, http://example.org/a?b=c#d 3.14",
    "password=Xk9#m2Lq token 1234 5678 9012 3456 and more words to make five word shingles here",
    "",
]


def _clean() -> None:
    from corpus_dagster.clean.cleaner import clean_texts
    from corpus_dagster.core.settings import CleanSettings

    clean_texts(list(SAMPLE_TEXTS), CleanSettings(), "warm")


def _minhash() -> None:
    import pyarrow as pa

    from corpus_dagster.lib.minhash import batch_signatures, permutations
    from corpus_dagster.lib.text import texts_array

    texts = texts_array(pa.array(SAMPLE_TEXTS))
    for scheme in ("affine32", "affine64"):
        a, b = permutations(16, 1, scheme)
        batch_signatures(texts.slice(0, len(texts)), 5, a, b, scheme)


def _jaccard() -> None:
    import numpy as np
    import pyarrow as pa

    from corpus_dagster.lib.jaccard import ShingleStore, shingle_sets

    values, lengths = shingle_sets(pa.array(SAMPLE_TEXTS).slice(0, len(SAMPLE_TEXTS)), 5)
    with tempfile.TemporaryDirectory() as tmp:
        store = ShingleStore(Path(tmp) / "store.u64", len(lengths))
        store.append(np.arange(len(lengths)), values, lengths)
        store.close()
        store.counts(np.array([0, 1]), np.array([2, 2]), 1 << 20)


def _ngrams() -> None:
    from corpus_dagster.lib.shingle_hashing import shingle_hashes, word_hashes
    from corpus_dagster.lib.text import tokenize_batch

    batch = tokenize_batch(list(SAMPLE_TEXTS))
    shingle_hashes(word_hashes(batch), batch.doc_offsets, 13)


# One group per process: the clean stage's word splitter is the largest, so it has a process of its own.
GROUPS: dict[str, Callable[[], None]] = {"clean": _clean, "minhash": _minhash, "jaccard": _jaccard,
                                         "ngrams": _ngrams}


def _warm_group(name: str) -> tuple[str, float, int]:
    """(group, CPU seconds, kernels compiled rather than loaded from the cache) in this process."""
    from numba.core import event

    compiled = []

    class _Count(event.Listener):
        depth = 0  # a kernel's compilation holds those of the functions it calls: count the outermost only

        def on_start(self, ev: event.Event) -> None:
            self.depth += 1

        def on_end(self, ev: event.Event) -> None:
            self.depth -= 1
            if self.depth == 0:
                compiled.append(ev)

    start = time.process_time()
    with event.install_listener("numba:compile", _Count()):
        GROUPS[name]()
    return name, time.process_time() - start, len(compiled)


def cache_location() -> str:
    """Where numba keeps this package's kernel cache, as the warm-up reports it."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return f"in NUMBA_CACHE_DIR ({os.environ['NUMBA_CACHE_DIR']})"
    import corpus_dagster

    package = Path(corpus_dagster.__file__).parent
    if os.access(package, os.W_OK):
        return f"beside the sources (the __pycache__ folders under {package})"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return f"in the user cache ({base}/numba)"


def warm(workers: int | None = None, log: Callable[[str], None] = print) -> list[tuple[str, float, int]]:
    """Compile (or load) every kernel group, `workers` processes at a time (default: one per core)."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(GROUPS)))
    log(f"warm: numba kernels, cached {cache_location()}; {workers} process(es)")
    start = time.monotonic()
    if workers == 1:
        results = [_warm_group(name) for name in GROUPS]
    else:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(_warm_group, GROUPS))
    for name, cpu, compiled in results:
        log(f"warm: {name:8s} {cpu:6.1f} CPU s, {compiled} kernel(s) compiled")
    log(f"warm: done in {time.monotonic() - start:.1f} s")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus_dagster.cli.warm", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="processes (default: one per core)")
    args = parser.parse_args(argv)
    warm(args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
