"""Token-stream throughput per tokenizer kind: our batch path against a plain per-document encode loop,
end-to-end builds with 1 and 2 workers, and datatrove's Megatron tokenizer on the same shards.

Usage: .venv/bin/python bench/tokens.py [--quick] [--no-datatrove] [--only 'cl100k bpe']

Real text only: Python's pydoc topics, license and copyright files, and man pages (decompressed), read in
a fixed order. "per core" divides by CPU seconds actually used (user + system, this process and its
children), so it stays meaningful on a machine shared with other jobs; "MB/s" is wall clock.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

CORES = len(os.sched_getaffinity(0))
os.environ["RAYON_NUM_THREADS"] = str(CORES)  # before `tokenizers` starts its pool in this process

import numpy as np  # noqa: E402

from corpus_dagster.core.config import load_config  # noqa: E402
from corpus_dagster.core.settings import Settings, TokenizeSettings  # noqa: E402
from corpus_dagster.lib.tokenizers import bpe_openai_available, load_tokenizer  # noqa: E402
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe, write_sample_shards  # noqa: E402
from corpus_dagster.tokenize.streams import build_token_streams  # noqa: E402

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out" / "tokens"
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def collect_texts(target_bytes: int) -> list[str]:
    """Real documents in a fixed order until `target_bytes` of UTF-8 text."""
    texts: list[str] = []
    total = 0

    def add(text: str) -> bool:
        nonlocal total
        text = text.strip()
        if text:
            texts.append(text)
            total += len(text.encode("utf-8"))
        return total >= target_bytes

    for t in sample_texts():
        if add(t):
            return texts
    files = sorted(Path("/usr/share/common-licenses").glob("*")) + sorted(
        Path("/usr/share/doc").glob("*/copyright")
    )
    files += sorted(SITE.glob("*.dist-info/LICENSE*")) + sorted(SITE.glob("*.dist-info/licenses/*"))
    for f in files:
        if f.is_file() and add(f.read_text(encoding="utf-8", errors="replace")):
            return texts
    for f in sorted(Path("/usr/share/man").rglob("*.gz")):
        try:
            raw = gzip.decompress(f.read_bytes())
        except (OSError, EOFError):
            continue
        if add(raw.decode("utf-8", errors="replace")):
            return texts
    return texts


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) of one call of fn, which returns its token count."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    tokens = fn()
    return time.perf_counter() - t0, cpu_seconds() - c0, tokens


ROWS: list[dict] = []


def record(
    tokenizer: str, path: str, mb: float, wall: float, cpu: float, tokens: int, base: float | None = None
):
    row = {
        "tokenizer": tokenizer,
        "path": path,
        "MB": mb,
        "tokens": tokens,
        "wall_s": wall,
        "cpu_s": cpu,
        "MB/s": mb / wall,
        "tok/s": tokens / wall,
        "MB/s/core": mb / cpu,
        "tok/s/core": tokens / cpu,
        "vs loop": (mb / wall) / base if base else None,
    }
    ROWS.append(row)
    print(
        f"  {tokenizer:<22} {path:<34} {row['MB/s']:7.2f} MB/s  {row['MB/s/core']:6.2f} MB/s/core", flush=True
    )
    return row


def plain_loop(tok) -> Callable[[list[str]], int]:
    """The naive baseline: one library `encode` call per document, no batching, no threads."""
    impl = tok.impl
    if tok.info.kind == "huggingface":
        return lambda texts: sum(len(impl.tok.encode(t).ids) for t in texts)
    if impl.engine == "bpe-openai":
        return lambda texts: sum(len(impl._fast.encode(t)) for t in texts)
    return lambda texts: sum(len(impl.enc.encode(t, disallowed_special=())) for t in texts)


def bench_encode(label: str, cfg: TokenizeSettings, texts: list[str], mb: float, batch_docs: int) -> None:
    tok = load_tokenizer(cfg, threads=CORES)
    dtype = np.dtype(np.uint16 if tok.info.vocab_size < 65500 else np.int32)
    loop = plain_loop(tok)
    loop(texts[:50])  # warm up caches and lazy initialisation
    wall, cpu, n = measure(lambda: loop(texts))
    base = record(label, "plain encode loop, 1 thread", mb, wall, cpu, n)["MB/s"]

    def batched() -> int:
        total = 0
        for i in range(0, len(texts), batch_docs):
            tokens, _ = tok.encode_documents(texts[i : i + batch_docs], dtype)
            total += int(tokens.size)
        return total

    threads = 1 if tok.engine == "bpe-openai" else CORES
    wall, cpu, n = measure(batched)
    record(label, f"batch path + framing, {threads} thread(s)", mb, wall, cpu, n, base)


def bench_build(label: str, cfg: TokenizeSettings, shards: Path, mb: float, workers: int) -> Path:
    out = OUT / f"streams-{label.replace(' ', '-')}-w{workers}"
    result = None

    def run() -> int:
        nonlocal result
        result = build_token_streams(shards, out, cfg, workers=workers)
        return result.manifest["n_tokens"]

    wall, cpu, n = measure(run)
    assert result is not None
    record(label, f"build_token_streams, {result.workers} worker(s) x {result.threads} thr", mb, wall, cpu, n)
    return out


DATATROVE_SCRIPT = r"""
import json, resource, sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.tokens.megatron_tokenizer import MegatronDocumentTokenizer
shards, out, tok, logs = sys.argv[1:5]
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
pipeline = [
    ParquetReader(shards, glob_pattern="shard-*.parquet", text_key="text", id_key="id"),
    MegatronDocumentTokenizer(output_folder=out, tokenizer_name_or_path=tok, eos_token="<|endoftext|>",
                              batch_size=1024),
]
c0, t0 = cpu(), time.perf_counter()
LocalPipelineExecutor(pipeline, tasks=1, workers=1, logging_dir=logs).run()
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": cpu() - c0}))
"""


def bench_datatrove(shards: Path, tokenizer_json: Path, ours: Path, mb: float, n_tokens: int) -> str:
    """datatrove's MegatronDocumentTokenizer on the same shards; returns whether its files equal ours."""
    sys.path.insert(0, str(BENCH))
    from datatrove_env import ensure_datatrove_env

    python = ensure_datatrove_env()
    out, logs = OUT / "datatrove", OUT / "datatrove-logs"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(logs, ignore_errors=True)
    env = {**os.environ, "RAYON_NUM_THREADS": str(CORES)}
    proc = subprocess.run(
        [str(python), "-c", DATATROVE_SCRIPT, str(shards), str(out), str(tokenizer_json), str(logs)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
        return "datatrove failed"
    timing = json.loads(proc.stdout.strip().splitlines()[-1])
    record("hf bpe-32k", "datatrove MegatronDocumentTokenizer", mb, timing["wall"], timing["cpu"], n_tokens)
    same_bin = (out / "00000_tokens.bin").read_bytes() == (ours / "train.bin").read_bytes()
    same_idx = (out / "00000_tokens.idx").read_bytes() == (ours / "train.idx").read_bytes()
    return f"datatrove .bin identical to ours: {same_bin}; .idx identical: {same_idx}"


def print_table() -> None:
    cols = [
        "tokenizer",
        "path",
        "MB",
        "tokens",
        "wall_s",
        "MB/s",
        "tok/s",
        "cpu_s",
        "MB/s/core",
        "tok/s/core",
        "vs loop",
    ]
    fmt = {
        "MB": "{:.1f}",
        "tokens": "{:,}",
        "wall_s": "{:.2f}",
        "MB/s": "{:.2f}",
        "tok/s": "{:,.0f}",
        "cpu_s": "{:.2f}",
        "MB/s/core": "{:.2f}",
        "tok/s/core": "{:,.0f}",
        "vs loop": "{:.2f}x",
    }
    cells = [[fmt.get(c, "{}").format(r[c]) if r[c] is not None else "" for c in cols] for r in ROWS]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("\n| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 6 MB of text instead of 48 MB")
    parser.add_argument("--no-datatrove", action="store_true", help="skip the datatrove comparison")
    parser.add_argument(
        "--only", metavar="TEXT", help="only the tokenizers whose label contains TEXT, e.g. 'cl100k bpe'"
    )
    args = parser.parse_args()
    target = (6 if args.quick else 48) * 1_000_000
    OUT.mkdir(parents=True, exist_ok=True)
    texts = collect_texts(target)
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    mb = text_bytes / 1e6
    print(
        f"corpus: {len(texts):,} documents, {mb:.1f} MB of real text; {CORES} usable cores; "
        f"bpe-openai installed: {bpe_openai_available()}",
        flush=True,
    )
    shards = OUT / "shards"
    shutil.rmtree(shards, ignore_errors=True)
    write_sample_shards(texts, shards, dataset="bench", shard_rows=max(200, len(texts) // 8), val_permille=0)

    def wanted(label: str) -> bool:
        return not args.only or args.only in label

    bpe = OUT / "bpe-32k" / "tokenizer.json"
    if wanted("hf bpe-32k"):
        t0 = time.perf_counter()
        bpe = train_sample_bpe(texts[: max(200, len(texts) // 8)], bpe, vocab_size=32000)
        print(f"trained a 32k byte-level BPE in {time.perf_counter() - t0:.1f}s", flush=True)

    def cfg(**over) -> TokenizeSettings:
        return Settings.from_resolved(load_config(None, {"tokenize": over})).tokenize

    kinds = [("cl100k tiktoken", cfg(engine="tiktoken"))]
    if bpe_openai_available():
        kinds += [
            ("cl100k bpe-openai", cfg(engine="bpe-openai")),
            ("o200k bpe-openai", cfg(encoding="o200k_base")),
        ]
    kinds.append(("hf bpe-32k", cfg(kind="huggingface", path=str(bpe), name="bpe-32k")))
    to_build = [kinds[1] if len(kinds) > 2 else kinds[0], kinds[-1]]
    kinds = [k for k in kinds if wanted(k[0])]
    to_build = [k for k in to_build if wanted(k[0])]
    for label, c in kinds:
        bench_encode(label, c, texts, mb, c["batch_docs"])
    builds = {}
    for label, c in to_build:
        for workers in (1, 2):
            builds[(label, workers)] = bench_build(label, c, shards, mb, workers)
    for label, _ in to_build:
        a, b = builds[(label, 1)], builds[(label, 2)]
        same = all((a / p.name).read_bytes() == (b / p.name).read_bytes() for p in a.iterdir())
        print(f"{label}: 1-worker and 2-worker outputs byte-identical: {same}")
    note = ""
    if not args.no_datatrove and wanted("hf bpe-32k"):
        hf_out = builds[(kinds[-1][0], 1)]
        n_tokens = json.loads((hf_out / "_TOKENS.json").read_text())["n_tokens"]
        note = bench_datatrove(shards, bpe, hf_out, mb, n_tokens)
    print_table()
    if note:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
