"""Build the labeled language evaluation set from real text installed on this machine.

    python tests/data/langid/make_langid.py [--out PATH] [--per-lang N] [--en-man N]

Sources (Debian):
- English technical documentation: man pages from /usr/share/man/man[1-8] rendered with `man -l`
  (flag lists, synopses, examples and all), Python's pydoc topics, /usr/share/common-licenses texts.
- French, German, Spanish (and Portuguese, Italian when installed): /usr/share/man/<lang>/man[1-8]
  (packages manpages-fr, manpages-de, manpages-es), rendered the same way.

Translated man pages are often partial: po4a leaves untranslated paragraphs in English. A page whose
8-word shingles overlap its English original by more than MIXED_OVERLAP is not a clean example of its
language and is left out (counted in the summary); the label never comes from a language detector.

Output: one JSON object per line, gzip-compressed: {"lang", "source", "name", "text"}, documents capped at
MAX_CHARS characters, sorted by (lang, source, name). Seeded, so a rerun on the same machine gives the
same file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pydoc_data.topics
import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "langid.jsonl.gz"
MAN = Path("/usr/share/man")
OTHER_LANGS = ("fr", "de", "es", "pt", "it")
MIXED_OVERLAP = 0.2
MAX_CHARS = 30000
MIN_CHARS = 300
_WORDS = re.compile(r"\w+")


def render(path: Path) -> str:
    """A man page as a reader sees it in a terminal, 80 columns, without overstrike formatting."""
    env = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    try:
        out = subprocess.run(["man", "-l", str(path)], capture_output=True, env=env, timeout=60, check=False)
        plain = subprocess.run(["col", "-bx"], input=out.stdout, capture_output=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return ""
    return plain.stdout.decode("utf-8", "replace")


def shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """Word n-grams (lowercase) of a text, wrap-independent."""
    words = _WORDS.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def english_overlap(text: str, english: str) -> float:
    """Share of the text's 8-word shingles that also occur in its English original (0 without one)."""
    own = shingles(text)
    return len(own & shingles(english)) / len(own) if own and english else 0.0


def man_pages(root: Path) -> list[Path]:
    """Every man page file under root/man1..man8, sorted."""
    return sorted(p for sec in range(1, 9) for p in (root / f"man{sec}").glob("*.gz"))


def build(per_lang: int, en_man: int, seed: int) -> tuple[list[dict], dict[str, int]]:
    """The labeled documents and a summary of what was left out."""
    rng = random.Random(seed)
    docs: list[dict] = []
    skipped: dict[str, int] = {}
    en_pages = man_pages(MAN)
    rng.shuffle(en_pages)
    with ThreadPoolExecutor(max_workers=2) as pool:
        texts = list(pool.map(render, en_pages[:en_man]))
        docs += [{"lang": "en", "source": "man", "name": p.name, "text": t} for p, t in zip(en_pages[:en_man], texts, strict=True)]
        topics = pydoc_data.topics.topics
        docs += [{"lang": "en", "source": "pydoc", "name": k, "text": topics[k]} for k in sorted(topics)]
        for lic in sorted(Path("/usr/share/common-licenses").glob("*")):
            if lic.is_file():
                docs.append({"lang": "en", "source": "license", "name": lic.name,
                             "text": lic.read_text(encoding="utf-8", errors="replace")})
        for lang in OTHER_LANGS:
            pages = man_pages(MAN / lang)
            rng.shuffle(pages)
            pages = pages[: 3 * per_lang]  # enough to fill per_lang after partial translations are left out
            rendered = list(pool.map(render, pages))
            originals = list(pool.map(render, [MAN / p.parent.name / p.name for p in pages]))
            kept = 0
            for page, text, english in zip(pages, rendered, originals, strict=True):
                if kept >= per_lang:
                    break
                if english_overlap(text, english) > MIXED_OVERLAP:
                    skipped[f"{lang}_mixed"] = skipped.get(f"{lang}_mixed", 0) + 1
                    continue
                docs.append({"lang": lang, "source": "man", "name": page.name, "text": text})
                kept += 1
    out = []
    for doc in docs:
        if len(doc["text"].strip()) < MIN_CHARS:
            skipped["too_short"] = skipped.get("too_short", 0) + 1
            continue
        doc["text"] = doc["text"][:MAX_CHARS]
        out.append(doc)
    out.sort(key=lambda d: (d["lang"], d["source"], d["name"]))
    return out, skipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--per-lang", type=int, default=200, help="pages per non-English language (default 200)")
    ap.add_argument("--en-man", type=int, default=400, help="English man pages sampled (default 400)")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    docs, skipped = build(args.per_lang, args.en_man, args.seed)
    with gzip.GzipFile(args.out, "wb", mtime=0) as fh:
        for doc in docs:
            fh.write((json.dumps(doc, ensure_ascii=False) + "\n").encode("utf-8"))
    counts: dict[str, int] = {}
    for doc in docs:
        counts[f"{doc['lang']}/{doc['source']}"] = counts.get(f"{doc['lang']}/{doc['source']}", 0) + 1
    print(f"wrote {len(docs)} documents to {args.out}: {counts}; left out: {skipped}")


if __name__ == "__main__":
    main()
