"""Benchmark the release stage on synthetic shards with token counts given (the token streams' table).

    PYTHONPATH=. python bench/release.py                  # 20k and 100k documents (a few minutes)
    PYTHONPATH=. python bench/release.py --docs 1000000   # the 1M target: under 5 minutes and 2 GB

Documents are paragraphs drawn from a fixed pool whose cl100k token counts are known, so every
document's exact count is given without tokenizing it (as when the token streams' counts are reused);
only the segments of documents over max_tokens are tokenized, reported separately as MB/s per core.
Each size runs in a fresh process; peak RSS is the largest resident set of that process and its workers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from corpus_dagster.core.settings import ReleaseSettings

WORDS = (
    "the of and to in is was for on that with as by at from this be are have an which or not it had his but "
    "river mountain library signal garden engine harbor silver winter market theory pattern lantern orbit"
).split()
SEP = "\n\n"


def _pool(rng: np.random.Generator, tok, size: int = 512) -> tuple[list[str], np.ndarray]:
    paras = []
    for _ in range(size):
        words = rng.choice(WORDS, size=int(rng.integers(30, 150)))
        paras.append(" ".join(words).capitalize() + ".")
    counts = np.array([len(ids) for ids in tok.encode_texts(paras)], dtype=np.int64)
    return paras, counts


def synthesize(folder: Path, n_docs: int, settings: ReleaseSettings, tok, seed: int = 0, shard_rows: int = 20000) -> Path:
    """Shards + _MANIFEST.json + token_counts.parquet + _TOKENS.json for n_docs documents."""
    from corpus_dagster.core.documents import SHARD_SCHEMA, shard_name

    rng = np.random.default_rng(seed)
    paras, pcounts = _pool(rng, tok)
    sep_tokens = len(tok.encode_texts([SEP])[0])
    # log-normal lengths centred between min_tokens and max_tokens; about 2% over max_tokens
    lo, hi = settings.min_tokens, settings.max_tokens
    targets = np.exp(rng.normal(np.log(np.sqrt(lo * hi)), 0.9, n_docs)).astype(np.int64)
    shards_dir = folder / "corpus" / "bench" / "v1"
    shards_dir.mkdir(parents=True, exist_ok=True)
    ids = sorted((f"s{i % 7}:{i}" for i in range(n_docs)), key=str.encode)
    entries, all_counts = [], []
    n_shards = -(-n_docs // shard_rows)
    for s in range(n_shards):
        chunk = ids[s * shard_rows:(s + 1) * shard_rows]
        texts, counts = [], []
        for j in range(len(chunk)):
            target = targets[s * shard_rows + j]
            picks, total = [], 0
            while total < target:
                p = int(rng.integers(len(paras)))
                total += int(pcounts[p]) + (sep_tokens if picks else 0)
                picks.append(p)
            texts.append(SEP.join(paras[p] for p in picks))
            counts.append(total)
        t = pa.table({
            "id": chunk, "text": texts, "source_id": [i.split(":")[0] for i in chunk],
            "url": [f"https://x.example/{i}" for i in chunk], "license_spdx": ["CC-BY-4.0"] * len(chunk),
            "lang": ["en"] * len(chunk), "n_chars": [len(x) for x in texts],
            "sha256": [hashlib.sha256(x.encode()).digest() for x in texts],
            "minhash_cluster": list(range(len(chunk))), "pii_redactions": [0] * len(chunk),
            "split": ["train"] * len(chunk),
        }, schema=SHARD_SCHEMA)
        name = shard_name(s, n_shards)
        pq.write_table(t, shards_dir / name, compression="zstd")
        entries.append({"name": name, "sha256": "0" * 64, "rows": len(chunk)})
        all_counts += [c + 1 for c in counts]  # the streams count EOD
    manifest = {"dataset": "bench", "version": "v1", "n_docs": n_docs, "n_shards": n_shards, "shards": entries,
                "filters": {"lang": 0, "gopher": 0, "repetition": 0, "ppl": 0},
                "dedup": {"exact_dropped": 0, "near_dropped": 0, "decontaminated": 0}}
    (shards_dir / "_MANIFEST.json").write_text(json.dumps(manifest))
    tdir = folder / "tokens"
    tdir.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": ids, "n_tokens": pa.array(all_counts, pa.int32()),
                             "tokenizer": [tok.name] * n_docs, "split": ["train"] * n_docs}),
                   tdir / "token_counts.parquet")
    (tdir / "_TOKENS.json").write_text(json.dumps({"tokenizer": {
        "name": tok.name, "vocab_sha256": tok.vocab_sha256(), "special_tokens": {"bos": None}}}))
    return shards_dir


def run_one(n_docs: int, workers: int, settings_json: str) -> dict:
    """Synthesize and build one size in this process; returns the measurements."""
    from corpus_dagster.core.config import fill_defaults, load_schema
    from corpus_dagster.core.settings import ReleaseSettings, TokenizeSettings
    from corpus_dagster.release.build import build_release
    from corpus_dagster.release.inputs import release_tokenizer_cfg
    from corpus_dagster.release.jobs import tokenizer

    full = fill_defaults({}, load_schema("corpus-config.schema.json"))
    settings = ReleaseSettings.from_dict(full["release"] | json.loads(settings_json))
    tokenize_cfg = TokenizeSettings.from_dict(full["tokenize"])
    tok = tokenizer(release_tokenizer_cfg(settings, tokenize_cfg))
    with tempfile.TemporaryDirectory(prefix="bench-release-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        shards = synthesize(root, n_docs, settings, tok)
        synth = time.perf_counter() - t
        sources = [{"source_id": f"s{i}", "license_spdx": "CC-BY-4.0", "url_field": "url"} for i in range(7)]
        t = time.perf_counter()
        stats = build_release(shards_dir=shards, out_dir=root / "release", settings=settings,
                              tokenize_cfg=tokenize_cfg, sources=sources,
                              token_counts=root / "tokens" / "token_counts.parquet", workers=workers)
        total = time.perf_counter() - t
        size = sum(p.stat().st_size for p in (root / "release").rglob("*") if p.is_file())
        shutil.rmtree(root / "release")
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    seg = stats["tokenize_segments"]
    return {"docs": n_docs, "synth_s": round(synth, 1), "total_s": round(total, 1), "steps": stats["seconds"],
            "peak_rss_mb": round(peak / 1024), "release_docs": stats["docs"], "segments": stats["segments"],
            "parts": stats["parts"], "out_mb": round(size / 1e6, 1),
            "segment_tokenize_mb": seg["mb"], "segment_tokenize_mb_s_core": round(seg["mb"] / seg["seconds"], 2) if seg["seconds"] else 0.0,
            "counts_reused": stats["counts_reused"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--settings", default=json.dumps({"bucket_width": 128, "min_tokens": 128, "max_tokens": 2048,
                                                      "per_bucket_cap": 6000, "part_tokens": 20_000_000}),
                    help="release settings (JSON) over the schema defaults; small buckets keep the texts small")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.workers, args.settings)))
        return 0
    rows = []
    for n in args.docs:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--workers", str(args.workers),
                              "--settings", args.settings], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    steps = list(rows[0]["steps"])
    head = ["docs", "total_s", *[f"{s}_s" for s in steps], "peak_rss_mb", "release_docs", "segments", "parts",
            "out_mb", "seg_tok_MB", "seg_tok_MB/s/core"]
    print(f"workers={args.workers} settings={args.settings} (synthesis time excluded)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        vals = [r["docs"], r["total_s"], *[r["steps"][s] for s in steps], r["peak_rss_mb"], r["release_docs"],
                r["segments"], r["parts"], r["out_mb"], r["segment_tokenize_mb"], r["segment_tokenize_mb_s_core"]]
        print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in vals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
