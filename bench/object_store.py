"""What an artifacts root on S3 costs against local disk: `python -m corpus_dagster.run` on the bench corpus,
once with `paths.artifacts` a local folder and once an `s3://` URL on moto's S3 server on 127.0.0.1, in
alternation, same sources (local files), same config otherwise. Prints CPU seconds of the CLI's process tree
(the S3 server's own CPU is not counted: it is not the CLI's child), wall, what went to the store, and
whether the shards, manifest and token streams are byte-identical.

    python bench/object_store.py            # the 160 MB bench corpus, one pair
    python bench/object_store.py --quick    # ~16 MB
    python bench/object_store.py --pairs 2
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests"))  # the S3 server helper is shared with the cluster test

import pipeline  # noqa: E402
from cluster_box import s3_server  # noqa: E402

BUCKET = "bench"
PUBLISHED = ("corpus/bench", "tokens/bench")


def published(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for top in PUBLISHED for p in sorted((root / top).rglob("*")) if p.is_file() and not p.name.startswith(".")}


def run_cli(config: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU s of the CLI and every process it started, wall s, exit code)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.monotonic() - start, proc.returncode


def one_pass(kind: str, corpus: Path, kinds: list[str], workers: int, out: Path, s3_env: dict[str, str]) -> dict:
    import s3fs
    import yaml

    run_dir = out / f"object-store-{kind}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = pipeline.write_config(run_dir, corpus, kinds, workers, True)
    env = {**os.environ, **s3_env, "DAGSTER_HOME": str(run_dir / "dagster_home"),
           "CORPUS_MIRROR": str(run_dir / "mirror")}
    root = run_dir / "artifacts"
    fs = s3fs.S3FileSystem()
    if kind == "s3":
        prefix = f"{BUCKET}/{run_dir.name}-{int(time.time())}"
        cfg = yaml.safe_load(config.read_text())
        cfg["paths"]["artifacts"] = f"s3://{prefix}"
        config.write_text(yaml.safe_dump(cfg, sort_keys=True))
        fs.put_file(str(root / "corpus" / "LEDGER.jsonl"), f"{prefix}/corpus/LEDGER.jsonl")
        shutil.rmtree(root)
    cpu, wall, rc = run_cli(config, env)
    row = {"pass": kind, "cpu": cpu, "wall": wall, "rc": rc}
    if kind == "s3":
        objects = [p for p in fs.find(prefix, detail=True).values()]
        row["objects"] = len(objects)
        row["mb"] = sum(o["size"] for o in objects) / 1e6
        mirrors = [p for p in (run_dir / "mirror").iterdir() if p.is_dir()]
        root = mirrors[0]
    row["published"] = published(root)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=160)
    ap.add_argument("--quick", action="store_true", help="~16 MB corpus")
    ap.add_argument("--pairs", type=int, default=1, help="local/s3 pairs, alternating")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    corpus = pipeline.build_corpus(16 if args.quick else args.mb)
    kinds = sorted(p.stem for p in corpus.glob("*.jsonl"))
    out = pipeline.OUT_DIR
    rows = []
    with s3_server(out / "object-store-s3-server") as s3_env:
        os.environ.update(s3_env)
        import s3fs

        s3fs.S3FileSystem().mkdir(BUCKET)
        for i in range(args.pairs):
            for kind in ("local", "s3"):
                row = one_pass(kind, corpus, kinds, args.workers, out, s3_env)
                print(f"  pair {i + 1} {kind:<5} cpu {row['cpu']:7.1f} s  wall {row['wall']:6.1f} s  rc {row['rc']}",
                      file=sys.stderr, flush=True)
                rows.append(row)
    local = [r for r in rows if r["pass"] == "local"]
    s3 = [r for r in rows if r["pass"] == "s3"]
    print(f"\nObject store against local disk, `python -m corpus_dagster.run`, {corpus.name}, workers {args.workers}")
    print("| pass | CPU s | wall s | exit | objects in the store | MB in the store |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['pass']} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['rc']} | {r.get('objects', '')} | "
              f"{r['mb']:.1f} |" if "mb" in r else f"| {r['pass']} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['rc']} | | |")
    ratio = min(r["cpu"] for r in s3) / min(r["cpu"] for r in local)
    same = all(r["published"] == local[0]["published"] for r in rows) and bool(local[0]["published"])
    print(f"\nCPU ratio (best s3 / best local): {ratio:.2f}x; shards, manifest and token streams identical: {same}"
          f" ({len(local[0]['published'])} files)")
    return 0 if same and all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
