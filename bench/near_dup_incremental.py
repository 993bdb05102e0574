"""Adding one source to a built corpus: what the near-duplicate graph generates and scores, against a build
from scratch.

On the bench corpus of bench/pipeline.py (every clean filter off, ingest and clean prepared once as
bench/near_dup.py does), in fresh interpreters, workers 1:

1. scratch: a fresh root, signatures of every source, the global dedup of every source;
2. incremental: a fresh root, signatures of every source, the global dedup without the added source, then
   with it (the measured step).

It prints the added source's share of the documents, the LSH pairs with one of its documents that a build
from scratch holds in its blocks (the pairs that involve its documents), what the incremental dedup
generated, kept in its blocks and scored, the blocks it computed and reused, the dedup CPU of both builds,
and whether the three tables are byte-identical.

    .venv/bin/python bench/near_dup_incremental.py                   # the source nearest 5% of the documents
    .venv/bin/python bench/near_dup_incremental.py --source man-fr --mb 160
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))

import near_dup  # noqa: E402  (a sibling bench script: its prepared corpus and fresh roots)


def _artifacts(config: Path) -> Path:
    import yaml

    return Path(yaml.safe_load(config.read_text())["paths"]["artifacts"])


def source_docs(artifacts: Path) -> dict[str, int]:
    """Documents kept by each source's clean stage."""
    out = {}
    for record in sorted((artifacts / "stages" / "clean").glob("*/_RECORD.json")):
        out[record.parent.name] = int(json.loads(record.read_text())["stats"].get("kept", 0))
    return out


def table_hashes(artifacts: Path) -> dict[str, str]:
    folder = artifacts / "stages" / "dedup"
    key = json.loads((folder / "_RECORD.json").read_text())["key"]
    return {t: hashlib.sha256((folder / key / t).read_bytes()).hexdigest()[:16]
            for t in ("dropped.parquet", "clusters.parquet", "pairs.parquet")}


def pairs_involving(artifacts: Path, source: str) -> int:
    """Pairs in the dedup record's blocks with a document of `source` (its clean documents' ids)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    clean = artifacts / "stages" / "clean" / source
    record = json.loads((clean / "_RECORD.json").read_text())
    ids = pa.concat_arrays([pq.read_table(clean / name, columns=["id"]).column("id").combine_chunks()
                            for name in record["files"]["docs"]])
    folder = artifacts / "stages" / "dedup"
    names = json.loads((folder / "_RECORD.json").read_text())["files"]["blocks"]
    total = 0
    for name in names:
        table = pq.read_table(folder / name, columns=["id_a", "id_b"])
        hit = pc.or_(pc.is_in(table.column("id_a"), value_set=ids), pc.is_in(table.column("id_b"), value_set=ids))
        total += pc.sum(hit.cast("int64")).as_py() or 0
    return total


def _record_file(artifacts: Path) -> Path:
    return artifacts / "stages" / "dedup" / "_RECORD.json"


def dedup_stats(artifacts: Path) -> dict[str, Any]:
    return json.loads(_record_file(artifacts).read_text())["stats"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=160, help="bench corpus size (bench/pipeline.py's corpus)")
    parser.add_argument("--source", default=None, help="the source to add (default: nearest 5%% of the documents)")
    args = parser.parse_args()
    log = near_dup._stderr
    prepared = near_dup.prepared_root(args.mb, log)
    docs = source_docs(prepared / "artifacts")
    total = sum(docs.values())
    added = args.source or min(sorted(docs), key=lambda s: abs(docs[s] / total - 0.05))
    if added not in docs:
        raise SystemExit(f"no source {added!r} in the bench corpus; it has {sorted(docs)}")
    others = sorted(s for s in docs if s != added)
    out = near_dup.OUT_DIR / f"incremental-{args.mb}mb"

    scratch_cfg = near_dup.fresh_run(prepared, out / "scratch")
    near_dup.run_part(ROOT, scratch_cfg, "minhash")
    scratch = near_dup.run_part(ROOT, scratch_cfg, "dedup")
    log(f"scratch dedup: cpu {scratch['cpu']:.2f} s")

    inc_cfg = near_dup.fresh_run(prepared, out / "incremental")
    near_dup.run_part(ROOT, inc_cfg, "minhash")
    first = near_dup.run_part(ROOT, inc_cfg, "dedup", others)
    log(f"dedup without {added}: cpu {first['cpu']:.2f} s")
    incremental = near_dup.run_part(ROOT, inc_cfg, "dedup")
    log(f"dedup adding {added}: cpu {incremental['cpu']:.2f} s")
    if scratch["stats"]["cached"] or incremental["stats"]["cached"]:
        raise RuntimeError("a dedup was served from its cache; the run roots were not fresh")

    s_art, i_art = _artifacts(scratch_cfg), _artifacts(inc_cfg)
    s_stats, i_stats = dedup_stats(s_art), dedup_stats(i_art)
    involving = pairs_involving(s_art, added)
    identical = table_hashes(s_art) == table_hashes(i_art)
    rows = [
        ("added source", added),
        ("its documents (share of the corpus)", f"{docs[added]:,} of {total:,} ({docs[added] / total:.1%})"),
        ("block pairs with one of its documents (scratch build)", f"{involving:,}"),
        ("LSH pairs generated: scratch | incremental",
         f"{s_stats['generated_pairs']:,} | {i_stats['generated_pairs']:,}"),
        ("pairs kept in computed blocks: scratch | incremental",
         f"{s_stats['block_pairs']:,} | {i_stats['block_pairs']:,}"),
        ("pairs scored: scratch | incremental", f"{s_stats['scored_this_build']:,} | {i_stats['scored_this_build']:,}"),
        ("documents shingled: scratch | incremental", f"{s_stats['shingled_docs']:,} | {i_stats['shingled_docs']:,}"),
        ("generated / pairs involving its documents",
         f"{i_stats['generated_pairs'] / involving:.3f}" if involving else "n/a"),
        ("scored / pairs involving its documents",
         f"{i_stats['scored_this_build'] / involving:.3f}" if involving else "n/a"),
        ("blocks computed | reused (incremental)", f"{i_stats['blocks']['computed']} | {i_stats['blocks']['reused']}"),
        ("dedup CPU s: scratch | incremental", f"{scratch['cpu']:.2f} | {incremental['cpu']:.2f}"),
        ("dedup peak RSS MB: scratch | incremental", f"{scratch['rss_mb']:.0f} | {incremental['rss_mb']:.0f}"),
        ("tables byte-identical to scratch", "yes" if identical else "NO"),
    ]
    print(f"## Adding one source, bench corpus {args.mb} MB (every clean filter off), workers 1\n")
    print("| | |\n|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if not identical:
        raise SystemExit("the incremental tables differ from the build from scratch")


if __name__ == "__main__":
    main()
