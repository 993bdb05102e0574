"""Do long documents reach a release built from configs/long-context.yaml? Real long texts from this machine.

    PYTHONPATH=. python bench/long_context.py               # collect (cached), fresh build, table
    PYTHONPATH=. python bench/long_context.py --limit 200   # fewer documents per source (faster)
    PYTHONPATH=. python bench/long_context.py --config configs/demo.yaml   # the same texts at another config

Texts: English man pages rendered with `man -P cat` (MANWIDTH=80) and the text files of /usr/share/doc
(changelogs, READMEs, copyright files), each of at least --min-words (3,000) whitespace words, one file per
document under bench/out/long-context-corpus/<source>/ (built once). A fresh artifacts root gets a ledger of
two `text` sources (globs relative to the ledger), the config gets that root as its one `paths` line, and
`python -m corpus_dagster.run` builds everything.

Distinct texts: documents are grouped by near-duplicate at the config's dedup.jaccard_threshold (exact
Jaccard of the 5-word shingle sets of the normalized text, as dedup compares them, over the candidate pairs
of a MinHash LSH index); a group counts once, and it reached the release when one of its documents is the
parent of a release row (whole or a segment). The table gives per source: texts, distinct groups, groups
that reached the release and their share.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
CORPUS = BENCH_DIR / "out" / "long-context-corpus"
DESCRIPTIONS = {  # the ledger's description and homepage of each source (the card's summary and links)
    "man-pages": ("English manual pages of a Debian system, rendered to text with `man -P cat`, 3,000 words "
                  "and more.", "https://manpages.debian.org/"),
    "doc-texts": ("Changelogs, READMEs and copyright files under /usr/share/doc of a Debian system, 3,000 "
                  "words and more.", "https://www.debian.org/doc/"),
}
SKIP_SUFFIXES = (".png", ".gif", ".jpg", ".css", ".js", ".svg", ".pdf", ".html", ".htm", ".xml", ".json", ".py",
                 ".c", ".h", ".pl", ".sh", ".ttf", ".mo", ".bz2", ".xz", ".zip")


def _words(text: str) -> int:
    return len(text.split())


def _safe_name(rel: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", rel).strip("_") + ".txt"


def man_pages(min_words: int, min_gz_bytes: int = 3000) -> list[tuple[str, str]]:
    """(file name, text) of English man pages of at least min_words words, rendered as `man -P cat` shows them."""
    out = []
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "", "LC_ALL": "C.UTF-8"}
    for section in sorted(Path("/usr/share/man").glob("man[1-8]")):
        for page in sorted(section.glob("*.gz")):
            if page.is_symlink() or page.stat().st_size < min_gz_bytes:
                continue
            proc = subprocess.run(["man", "-P", "cat", "-l", str(page)], capture_output=True, env=env, check=False)
            text = proc.stdout.decode("utf-8", errors="replace")
            if proc.returncode == 0 and _words(text) >= min_words:
                out.append((_safe_name(f"{section.name}/{page.name.removesuffix('.gz')}"), text))
    return out


def doc_texts(min_words: int) -> list[tuple[str, str]]:
    """(file name, text) of the text files under /usr/share/doc (gunzipped) of at least min_words words."""
    out = []
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        if not path.is_file() or path.is_symlink() or "/test-" in str(path):
            continue
        if path.name.removesuffix(".gz").lower().endswith(SKIP_SUFFIXES):
            continue
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        if b"\x00" in raw[:4096]:
            continue
        text = raw.decode("utf-8", errors="replace")
        if _words(text) >= min_words:
            out.append((_safe_name(str(path.relative_to("/usr/share/doc")).removesuffix(".gz")), text))
    return out


def collect(min_words: int) -> Path:
    """Write the corpus once (bench/out/long-context-corpus/<source>/<name>.txt); returns its folder."""
    ready = CORPUS / f"_READY-{min_words}.json"
    if ready.exists():
        return CORPUS
    shutil.rmtree(CORPUS, ignore_errors=True)
    info = {}
    for source, docs in (("man-pages", man_pages(min_words)), ("doc-texts", doc_texts(min_words))):
        folder = CORPUS / source
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in docs:
            (folder / name).write_text(text, encoding="utf-8")
        info[source] = len(docs)
    ready.write_text(json.dumps(info, indent=1))
    return CORPUS


def pick(files: list[Path], limit: int) -> list[Path]:
    """At most `limit` files, evenly spread over the sorted list (all when limit is 0)."""
    if not limit or len(files) <= limit:
        return files
    return [f for i, f in enumerate(files) if (i + 1) * limit // len(files) > i * limit // len(files)]


def texts_of(corpus: Path, max_bytes: int, limit: int) -> dict[str, list[Path]]:
    """The files of each source the build reads: at most max_bytes each (larger ones are rare multi-MB
    changelogs, cut to max_segments segments anyway), `limit` per source."""
    return {src.name: pick(sorted(f for f in src.glob("*.txt") if f.stat().st_size <= max_bytes), limit)
            for src in sorted(p for p in corpus.iterdir() if p.is_dir())}


def near_groups(texts: list[str], threshold: float, shingle_size: int, num_perm: int = 128, bands: int = 32) -> list[int]:
    """Group id per text: connected components of the pairs with exact shingle Jaccard >= threshold,
    candidates from a MinHash LSH index (bands of num_perm // bands rows)."""
    import numpy as np

    from corpus_dagster.lib.jaccard import shingle_sets

    values, lengths = shingle_sets(texts, shingle_size)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    sets = [values[offsets[i]:offsets[i + 1]] for i in range(len(texts))]
    rng = np.random.default_rng(0)
    prime = np.uint64((1 << 61) - 1)
    a = rng.integers(1, 1 << 30, num_perm, dtype=np.uint64)
    b = rng.integers(0, 1 << 30, num_perm, dtype=np.uint64)
    sigs = np.full((len(texts), num_perm), np.iinfo(np.uint64).max, dtype=np.uint64)
    for i, s in enumerate(sets):
        if len(s):
            sigs[i] = ((np.outer(s & np.uint64((1 << 30) - 1), a) + b) % prime).min(axis=0)
    rows = num_perm // bands
    candidates: set[tuple[int, int]] = set()
    for band in range(bands):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        for i in range(len(texts)):
            if len(sets[i]):
                buckets[sigs[i, band * rows:(band + 1) * rows].tobytes()].append(i)
        for members in buckets.values():
            candidates.update((x, y) for k, x in enumerate(members) for y in members[k + 1:])
    parent = list(range(len(texts)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in sorted(candidates):
        inter = len(np.intersect1d(sets[x], sets[y], assume_unique=True))
        union = len(sets[x]) + len(sets[y]) - inter
        if union and inter / union >= threshold:
            parent[find(x)] = find(y)
    return [find(i) for i in range(len(texts))]


def write_inputs(run: Path, config: Path, chosen: dict[str, list[Path]]) -> Path:
    """The run's ledger (one `text` source per folder, its files copied beside it) and its config, whose
    `paths` is the run's artifacts root; returns the config's path."""
    import yaml

    from corpus_dagster.core.ledger import Source, write_ledger

    artifacts = run / "artifacts"
    sources = []
    for source, files in chosen.items():
        folder = run / "sources" / source
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(f, folder / f.name)
        sources.append(Source(source, (f"{folder}/*.txt",), "text", "NOASSERTION", description=DESCRIPTIONS[source][0],
                              homepage=DESCRIPTIONS[source][1], category="docs"))
    ledger = artifacts / "corpus" / "LEDGER.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    write_ledger(ledger, sources)
    cfg = yaml.safe_load(config.read_text())
    cfg["paths"] = {"artifacts": str(artifacts)}
    cfg["workers"] = 2
    out = run / "config.yaml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


def release_parents(release: Path) -> set[str]:
    """File names of the documents with a row in the release (whole or a segment)."""
    import pyarrow.parquet as pq

    names = set()
    for part in sorted(release.glob("data/*/*.parquet")):
        for meta in pq.read_table(part, columns=["metadata"])["metadata"].to_pylist():
            m = json.loads(meta)
            names.add(Path((m.get("source_file") or m.get("url") or "").split("#")[0]).name)
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "long-context.yaml")
    parser.add_argument("--min-words", type=int, default=3000)
    parser.add_argument("--max-bytes", type=int, default=400_000)
    parser.add_argument("--limit", type=int, default=0, help="most documents per source (0: all)")
    parser.add_argument("--keep", type=Path, default=None, help="build here and keep it (default: a temp folder)")
    args = parser.parse_args()
    import yaml

    from corpus_dagster.core.config import resolve_config

    corpus = collect(args.min_words)
    chosen = texts_of(corpus, args.max_bytes, args.limit)
    resolved = resolve_config(yaml.safe_load(args.config.read_text()))
    threshold = float(resolved["dedup"]["jaccard_threshold"])
    run = args.keep or Path(tempfile.mkdtemp(prefix="long-context-"))
    config = write_inputs(run, args.config, chosen)
    env = {**os.environ, "DAGSTER_HOME": str(run / "dagster_home"), "PYTHONPATH": str(ROOT)}
    (run / "dagster_home").mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config), "--keep-going"], cwd=run, env=env,
                          check=False)
    releases = sorted(p for p in (run / "artifacts" / "release").glob("*/*") if p.is_dir())
    if not releases:
        print(f"no release was built (exit {proc.returncode}); see {run}", file=sys.stderr)
        return 1
    reached = release_parents(releases[0])
    names = [(src, f.name) for src, files in chosen.items() for f in files]
    groups = near_groups([f.read_text(encoding="utf-8") for files in chosen.values() for f in files], threshold,
                         int(resolved["near_dup"]["shingle_size"]))
    rows: dict[str, dict[str, Any]] = {}
    for (src, name), g in zip(names, groups, strict=True):
        row = rows.setdefault(src, {"texts": 0, "groups": {}})
        row["texts"] += 1
        row["groups"][g] = row["groups"].get(g, False) or name in reached
    print(f"\n{args.config.name}: texts of >= {args.min_words:,} words, <= {args.max_bytes:,} bytes; near-duplicate "
          f"groups at Jaccard {threshold} (build exit {proc.returncode}, {run})\n")
    print("| source | texts | distinct | reached | % |\n|---|---:|---:|---:|---:|")
    total = [0, 0, 0]
    for src, row in rows.items():
        distinct, hit = len(row["groups"]), sum(row["groups"].values())
        total = [total[0] + row["texts"], total[1] + distinct, total[2] + hit]
        print(f"| {src} | {row['texts']:,} | {distinct:,} | {hit:,} | {100 * hit / max(distinct, 1):.1f} |")
    print(f"| all | {total[0]:,} | {total[1]:,} | {total[2]:,} | {100 * total[2] / max(total[1], 1):.1f} |")
    if args.keep is None:
        shutil.rmtree(run, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
