"""Per-step cost model for `--dry-run`: time, disk and peak memory from document and byte counts.

The constants are per-document and per-text-byte costs on one core of the 2-core development machine,
measured by `python bench/analysis.py --sizes 100000 1000000` (the 1M-document planted corpus, 1392 MiB of
text, cl100k tokenizer, workers=1); rerun the bench and update them when the code changes speed.
"""

from __future__ import annotations

from typing import Any

# step: seconds per doc, seconds per text byte, disk bytes per doc, peak memory bytes per doc
COSTS: dict[str, dict[str, float]] = {
    "scan": {"s_doc": 0.0, "s_byte": 2.74e-8, "disk_doc": 240.0, "mem_doc": 330.0},
    "exact": {"s_doc": 1.0e-6, "s_byte": 0.0, "disk_doc": 2.0, "mem_doc": 280.0},
    "candidates": {"s_doc": 5.5e-6, "s_byte": 0.0, "disk_doc": 2.0, "mem_doc": 800.0},
    "jaccard": {"s_doc": 1.6e-5, "s_byte": 0.0, "disk_doc": 3.0, "mem_doc": 630.0},
    "duplicates": {"s_doc": 4.0e-7, "s_byte": 0.0, "disk_doc": 15.0, "mem_doc": 270.0},
    "clusters": {"s_doc": 1.12e-5, "s_byte": 0.0, "disk_doc": 10.0, "mem_doc": 300.0},
    "lengths": {"s_doc": 0.0, "s_byte": 5.24e-8, "disk_doc": 12.0, "mem_doc": 520.0},
    "figures": {"s_doc": 0.0, "s_byte": 0.0, "disk_doc": 0.0, "mem_doc": 260.0},
    "report": {"s_doc": 0.0, "s_byte": 0.0, "disk_doc": 0.0, "mem_doc": 260.0},
}
FIXED_SECONDS = {"figures": 1.0, "report": 0.1}  # independent of corpus size
BASE_MEMORY_BYTES = 450 * 2**20  # interpreter, libraries, tokenizer tables, allocator pools (measured at 100k)


def estimate(step: str, docs: int, text_bytes: int, tokenizers: int = 1, workers: int = 1) -> dict[str, Any]:
    """Estimated seconds, disk bytes written and peak RSS bytes of one step."""
    c = COSTS[step]
    seconds = docs * c["s_doc"] + text_bytes * c["s_byte"]
    if step == "lengths":
        seconds *= tokenizers
    elif step in ("scan", "jaccard"):
        seconds /= max(1, workers)
    seconds += FIXED_SECONDS.get(step, 0.0)
    return {
        "seconds": round(seconds, 1),
        "disk_bytes": int(docs * c["disk_doc"]),
        "peak_rss_bytes": int(BASE_MEMORY_BYTES + docs * c["mem_doc"]),
    }
