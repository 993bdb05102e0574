"""Benchmark of the clean stage: throughput per sub-step and end to end, and datatrove comparison.

Builds a corpus from real text on this machine (Python's pydoc topics, package license files,
/usr/share/doc/*/copyright, /usr/share/common-licenses, man pages in many languages), mixed and mutated
to the requested size with junk, repeated, mojibake and non-English documents so every rule fires.
Then measures MB/s and docs/s per core (CPU time, polars pinned to one thread) of each sub-step, runs
datatrove's GopherQualityFilter and GopherRepetitionFilter on the same documents in a subprocess of
bench/.venv-datatrove, and prints the throughput ratio and the keep/drop agreement.

    .venv/bin/python bench/clean.py            # >= 200 MB
    .venv/bin/python bench/clean.py --quick    # ~20 MB
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # per-core numbers: one polars thread

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))

if TYPE_CHECKING:
    from corpus_dagster.core.settings import CleanSettings

# ---------------------------------------------------------------- real text on this machine

_TROFF_FONT = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)")
_TROFF_SIZE = re.compile(r"\\s[+-]?\d+")
_TROFF_STRING = re.compile(r"\\\*(?:\[[^\]]*\]|\(..|.)")
_TROFF_SPECIAL = re.compile(r"\\\((..)|\\\[([^\]]*)\]")
_SPECIALS = {"em": "—", "en": "–", "aq": "'", "dq": '"', "bu": "•", "co": "©", "lq": "“", "rq": "”",
             "oq": "‘", "cq": "’", "hy": "-", "mi": "-", "ti": "~", "ha": "^", "rg": "®", "de": "°",
             "tm": "™", "fo": "«", "fc": "»", "Fo": "«", "Fc": "»", "ss": "ß", "+-": "±", "mu": "×"}


def troff_to_text(src: str) -> str:
    """Crude man-page source to plain text: macros dropped or unwrapped, escapes resolved."""
    out: list[str] = []
    for line in src.splitlines():
        if line.startswith(('.\\"', "'\\\"", '.\\\\"', "'.")):
            continue
        if line.startswith((".", "'")):
            parts = line.split(None, 1)
            macro, arg = parts[0][1:], (parts[1] if len(parts) > 1 else "")
            if macro in ("SH", "SS"):
                out.extend(["", arg.replace('"', ""), ""])
            elif macro in ("PP", "P", "LP", "TP", "sp", "IP"):
                out.append("")
                if macro == "IP" and arg:
                    out.append(arg.split('"')[1] if arg.startswith('"') and arg.count('"') > 1 else arg)
            elif macro in ("B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB", "UR", "MT"):
                out.append(arg.replace('"', ""))
            continue
        out.append(line)
    text = "\n".join(out)
    text = _TROFF_FONT.sub("", text)
    text = _TROFF_SIZE.sub("", text)
    text = _TROFF_STRING.sub("", text)
    text = _TROFF_SPECIAL.sub(lambda m: _SPECIALS.get(m.group(1) or m.group(2), ""), text)
    for esc, rep in (("\\-", "-"), ("\\e", "\\"), ("\\&", ""), ("\\|", ""), ("\\^", ""), ("\\/", ""),
                     ("\\,", ""), ("\\ ", " "), ("\\~", " "), ("\\0", " "), ("\\c", "")):
        text = text.replace(esc, rep)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _read(path: str) -> str | None:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace")


def load_real_texts(english_man_stride: int = 1) -> dict[str, list[str]]:
    """Real documents grouped by kind: 'en' prose-ish kinds and one kind per man-page language.

    English man pages (~90 MB of the ~115 MB) are read every `english_man_stride`-th file, so a small
    corpus does not pay for reading all of them."""
    from pydoc_data.topics import topics

    kinds: dict[str, list[str]] = {"pydoc": [t for _, t in sorted(topics.items()) if t.strip()]}
    lic = sorted(glob.glob(str(ROOT / ".venv/lib/python3.11/site-packages/*.dist-info/**/*LICEN*"),
                           recursive=True))
    lic += sorted(glob.glob(str(ROOT / ".venv/lib/python3.11/site-packages/*.dist-info/**/COPYING*"),
                            recursive=True))
    lic += sorted(glob.glob("/usr/share/common-licenses/*"))
    kinds["license"] = [t for t in map(_read, lic) if t and t.strip()]
    kinds["copyright"] = [t for t in map(_read, sorted(glob.glob("/usr/share/doc/*/copyright"))) if t]
    english = 0
    for path in sorted(glob.glob("/usr/share/man/**/*.gz", recursive=True)):
        rel = Path(path).relative_to("/usr/share/man").parts
        lang = "en" if rel[0].startswith("man") else rel[0].split("_")[0]
        if lang == "en":
            english += 1
            if english % english_man_stride:
                continue
        src = _read(path)
        if not src or src.startswith(".so "):
            continue
        text = troff_to_text(src)
        if text:
            kinds.setdefault(f"man-{lang}", []).append(text)
    return kinds


# ---------------------------------------------------------------- junk and mutations

_MENU = ["Home", "About us", "Contact", "Blog", "News", "Login", "Sign up", "Privacy Policy", "Terms of Use",
         "Search", "Menu", "FAQ", "Help", "Careers", "Shop", "Cart", "Subscribe", "Next", "Previous",
         "Skip to content", "Products", "Services", "Support", "Sitemap", "Follow us"]
_SYMBOLS = "{}[]<>|\\/=+*&^%$#@!~`;:"


def junk_doc(rng: random.Random, kind: str, prose: list[str]) -> str:
    """One synthetic junk document of the given kind, built around real prose where it makes sense."""
    para = rng.choice(prose)
    if kind == "symbol_soup":
        return "".join(rng.choice(_SYMBOLS) if rng.random() < 0.6 else rng.choice(para) for _ in range(3000))
    if kind == "table":
        rows = [" ".join(f"{rng.uniform(0, 1000):.{rng.randint(0, 3)}f}" for _ in range(rng.randint(1, 2)))
                for _ in range(rng.randint(40, 400))]
        return "Table of values\n" + "\n".join(rows)
    if kind == "nav":
        menu = "\n".join(rng.sample(_MENU, rng.randint(8, 20)))
        return f"{menu}\n\n{para[:400]}\n\n{menu}"
    if kind == "repeated":
        line = rng.choice([x for x in para.splitlines() if x.strip()] or ["buy now"])
        return "\n".join([line] * rng.randint(10, 200) + para.splitlines()[:5])
    if kind == "hashtags":
        words = para.split()
        return " ".join(w if rng.random() < 0.8 else "#" + w for w in words)
    if kind == "ellipsis":
        return "\n".join(x.rstrip() + "..." for x in para.splitlines() if x.strip())
    if kind == "bullets":
        return "\n".join(rng.choice("•-*") + " " + x.strip() for x in para.splitlines() if x.strip())
    if kind == "short":
        return " ".join(para.split()[: rng.randint(1, 60)])
    if kind == "ngram_spam":
        words = para.split()[:12] or ["spam"]
        return " ".join(words * rng.randint(3, 30)) + "\n\n" + para
    raise ValueError(kind)


JUNK_KINDS = ["symbol_soup", "table", "nav", "repeated", "hashtags", "ellipsis", "bullets", "short",
              "ngram_spam"]


def mutate(rng: random.Random, text: str) -> str:
    """Damage a document the way raw sources are damaged: mojibake, control bytes, CRLF."""
    r = rng.random()
    if r < 0.25:
        text = "It’s “quoted” — café déjà vu. " + text
        return text.encode("utf-8").decode("cp1252", errors="replace")
    if r < 0.5:
        pos = [rng.randrange(len(text) + 1) for _ in range(3)]
        for p, ch in zip(sorted(pos, reverse=True), ("\x00", "\x07", "\x1b"), strict=True):
            text = text[:p] + ch + text[p:]
        return text
    return text.replace("\n", "\r\n")


def build_corpus(target_bytes: int, seed: int = 0) -> list[str]:
    """Mix real documents, paragraph remixes, junk, damaged and duplicated documents up to target_bytes."""
    rng = random.Random(seed)
    kinds = load_real_texts(english_man_stride=max(1, int(60e6 // target_bytes)))
    en_kinds = ["pydoc", "license", "copyright", "man-en"]
    foreign = sorted(k for k in kinds if k.startswith("man-") and k != "man-en")
    paras = {k: [p for d in docs for p in re.split(r"\n{2,}", d) if len(p.split()) >= 3]
             for k, docs in kinds.items()}
    prose = [p for k in en_kinds for p in paras[k] if len(p) > 200]
    originals = [d for k in en_kinds + foreign for d in kinds[k]]
    rng.shuffle(originals)
    docs: list[str] = []
    size = 0
    for doc in originals:  # real documents as they are: up to 40% of the corpus
        if size >= 0.4 * target_bytes:
            break
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    while size < target_bytes:
        r = rng.random()
        if r < 0.80:
            pool = paras[rng.choice(en_kinds)]
            doc = "\n\n".join(rng.sample(pool, min(len(pool), max(1, int(rng.lognormvariate(2.3, 0.9))))))
        elif r < 0.88:
            pool = paras[rng.choice(foreign)]
            doc = "\n\n".join(rng.sample(pool, min(len(pool), rng.randint(2, 20))))
        elif r < 0.95:
            doc = junk_doc(rng, rng.choice(JUNK_KINDS), prose)
        elif r < 0.98:
            doc = mutate(rng, rng.choice(originals))
        else:
            doc = rng.choice(docs)  # exact duplicate: the clean stage keeps it, dedup drops it later
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    rng.shuffle(docs)
    return docs


def corpus_file(target_mb: int, seed: int = 0) -> Path:
    """Build (once) and cache the corpus as Parquet under bench/out/."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = OUT_DIR / f"clean-corpus-{target_mb}mb-s{seed}.parquet"
    if not path.exists():
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        docs = build_corpus(target_mb * 1_000_000, seed)
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.table({"text": pa.array(docs, pa.large_string())}), tmp, compression="zstd")
        tmp.rename(path)
    return path


# ---------------------------------------------------------------- datatrove side (runs in its own venv)

def datatrove_worker(in_path: str, out_path: str) -> None:
    """Run datatrove's Gopher filters over the texts in `in_path`; write decisions and CPU seconds."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datatrove.data import Document
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter

    texts = pq.read_table(in_path).column("text").to_pylist()
    quality, repetition = GopherQualityFilter(), GopherRepetitionFilter()
    q_reason, r_reason = [], []
    q_time = r_time = 0.0
    for i, text in enumerate(texts):  # as in a datatrove pipeline: both filters on a document in turn
        doc = Document(text=text, id=str(i))
        t0 = time.process_time()
        q = quality.filter(doc)
        t1 = time.process_time()
        r = repetition.filter(doc)
        t2 = time.process_time()
        q_time += t1 - t0
        r_time += t2 - t1
        q_reason.append(None if q is True else q[1])
        r_reason.append(None if r is True else r[1])
    pq.write_table(pa.table({"q_reason": pa.array(q_reason, pa.string()),
                             "r_reason": pa.array(r_reason, pa.string())}), out_path)
    Path(out_path).with_suffix(".json").write_text(json.dumps({"quality_s": q_time, "repetition_s": r_time}))


def ensure_datatrove_python() -> Path:
    """The datatrove virtualenv's python, with spaCy added (datatrove tokenizes English with it)."""
    import fcntl

    from datatrove_env import ENV_DIR, ensure_datatrove_env

    python = ensure_datatrove_env()
    probe = subprocess.run([str(python), "-c", "import spacy"], capture_output=True)
    if probe.returncode != 0:
        with open(ENV_DIR.parent / ".datatrove-env.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "spacy"], check=True)
    return python


def run_datatrove(texts: list[str], tag: str, procs: int) -> dict:
    """datatrove decisions for `texts` (split over `procs` subprocesses) and its summed CPU seconds."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    python = ensure_datatrove_python()
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x00")
    cache = OUT_DIR / f"datatrove-{tag}-{digest.hexdigest()[:12]}.parquet"  # reused only for the same texts
    if not cache.exists():
        bounds = [len(texts) * i // procs for i in range(procs + 1)]
        jobs = []
        for p in range(procs):
            src = OUT_DIR / f"datatrove-{tag}-in{p}.parquet"
            pq.write_table(pa.table({"text": pa.array(texts[bounds[p]:bounds[p + 1]], pa.large_string())}), src)
            dst = OUT_DIR / f"datatrove-{tag}-out{p}.parquet"
            jobs.append((dst, subprocess.Popen([str(python), __file__, "--datatrove-worker", str(src), str(dst)])))
        for _, proc in jobs:
            if proc.wait() != 0:
                raise RuntimeError("datatrove worker failed")
        parts = [pq.read_table(dst) for dst, _ in jobs]
        times = [json.loads(dst.with_suffix(".json").read_text()) for dst, _ in jobs]
        table = pa.concat_tables(parts)
        meta = {"quality_s": sum(t["quality_s"] for t in times), "repetition_s": sum(t["repetition_s"] for t in times)}
        pq.write_table(table.replace_schema_metadata({"times": json.dumps(meta)}), cache)
        for p in range(procs):
            for suffix in (f"in{p}.parquet", f"out{p}.parquet", f"out{p}.json"):
                (OUT_DIR / f"datatrove-{tag}-{suffix}").unlink(missing_ok=True)
    table = pq.read_table(cache)
    times = json.loads(table.schema.metadata[b"times"])
    return {"q_reason": table.column("q_reason").to_pylist(), "r_reason": table.column("r_reason").to_pylist(),
            **times}


# ---------------------------------------------------------------- our side

def timed(fn, *args):
    """(result, CPU seconds) of fn(*args)."""
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def run_ours(texts: list[str], cfg: CleanSettings, end_to_end_cfg: CleanSettings) -> dict:
    """Time every sub-step over all documents, batch by batch, and clean_texts end to end.

    Like a datatrove pipeline, where the repetition filter reuses the quality filter's (cached) words,
    the gopher row includes tokenization and the repetition row reuses the batch's words; the words row
    shows the tokenization alone. The per-process chunk cache is cleared before every timed step.
    """
    from corpus_dagster.clean import fineweb, gopher, repetition, rules
    from corpus_dagster.clean.batch import DocBatch
    from corpus_dagster.clean.cleaner import BATCH_DOCS, clean_texts
    from corpus_dagster.clean.langid import detect_languages
    from corpus_dagster.clean.repair import repair_texts
    from corpus_dagster.clean.word_tokens import tokenize_chunk
    from corpus_dagster.clean.words import split_words

    (repaired, repairs, series), t_repair = timed(repair_texts, texts, cfg.repair)
    lang_result, t_lang = timed(detect_languages, series, cfg.lang)
    langs = lang_result.lang
    fired: Counter = Counter()
    secs = {"repair": t_repair, "lang": t_lang, "words": 0.0, "gopher": 0.0, "repetition": 0.0, "rules": 0.0}
    q_reason: list = []
    r_reason: list = []
    rule_fns = [(rules.symbol_soup, "symbol_soup"), (rules.table_dump, "table_dump"), (rules.repeated, "repeated"),
                (rules.nav_menu, "nav_menu"), (rules.non_english, "non_english"), (fineweb.fineweb_quality, "fineweb")]
    tokenize_chunk.cache_clear()
    for start in range(0, len(repaired), BATCH_DOCS):
        _, t = timed(split_words, series.slice(start, BATCH_DOCS))
        secs["words"] += t
    tokenize_chunk.cache_clear()
    for start in range(0, len(repaired), BATCH_DOCS):
        batch = DocBatch(repaired[start:start + BATCH_DOCS], series.slice(start, BATCH_DOCS))
        v, t = timed(gopher.gopher_quality, batch, cfg.gopher)
        secs["gopher"] += t
        q_reason += v.reason.tolist()
        v, t = timed(repetition.gopher_repetition, batch, cfg.repetition)
        secs["repetition"] += t
        r_reason += v.reason.tolist()
        for fn, key in rule_fns:
            v, t = timed(fn, batch, getattr(cfg, key))
            secs["rules"] += t
            fired.update(r for r in v.reason.tolist() if r is not None)
    tokenize_chunk.cache_clear()
    outcome, secs["end to end"] = timed(clean_texts, texts, end_to_end_cfg, "bench")
    return {"secs": secs, "q_reason": q_reason, "r_reason": r_reason, "repaired": repaired, "outcome": outcome,
            "langs": Counter(langs), "fired": fired, "repairs": Counter(k for done in repairs for k in done)}


# ---------------------------------------------------------------- report

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="~20 MB corpus instead of >= 200 MB")
    ap.add_argument("--mb", type=int, default=None, help="corpus size in MB (overrides --quick)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datatrove-procs", type=int, default=2, help="datatrove subprocesses (CPU time is summed)")
    ap.add_argument("--datatrove-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.datatrove_worker:
        datatrove_worker(*args.datatrove_worker)
        return
    import pyarrow.parquet as pq

    from corpus_dagster.clean.cleaner import reason_counts
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.settings import Settings

    mb = args.mb or (20 if args.quick else 200)
    t0 = time.time()
    texts = pq.read_table(corpus_file(mb, args.seed)).column("text").to_pylist()
    total_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"corpus: {len(texts):,} docs, {total_mb:.1f} MB (built/loaded in {time.time() - t0:.0f}s)")
    cfg = Settings.from_resolved(load_config(overrides={"clean": {"fineweb": {"enabled": True}}})).clean
    default_cfg = Settings.from_resolved(load_config()).clean
    ours = run_ours(texts, cfg, default_cfg)
    theirs = run_datatrove(ours["repaired"], f"{mb}mb-s{args.seed}", args.datatrove_procs)

    n = len(texts)
    secs = ours["secs"]
    notes = {"words": "tokenization alone (part of the gopher row)", "gopher": "includes tokenization",
             "repetition": "reuses the batch's words", "rules": "docs1 rules + FineWeb",
             "end to end": "clean_texts, default config", "datatrove repetition": "reuses cached spaCy words"}
    print("\nper core (CPU seconds, POLARS_MAX_THREADS=1), every document through every sub-step:")
    print(f"{'sub-step':<22}{'seconds':>9}{'MB/s':>9}{'docs/s':>10}  note")
    rows = list(secs.items())
    rows += [("gopher+repetition", secs["gopher"] + secs["repetition"]),
             ("datatrove quality", theirs["quality_s"]), ("datatrove repetition", theirs["repetition_s"]),
             ("datatrove both", theirs["quality_s"] + theirs["repetition_s"])]
    for name, s in rows:
        print(f"{name:<22}{s:>9.1f}{total_mb / s:>9.2f}{n / s:>10,.0f}  {notes.get(name, '')}")
    ratio_q = theirs["quality_s"] / secs["gopher"]
    ratio_r = theirs["repetition_s"] / secs["repetition"]
    ratio_b = (theirs["quality_s"] + theirs["repetition_s"]) / (secs["gopher"] + secs["repetition"])
    print(f"\nthroughput vs datatrove (same documents): quality {ratio_q:.1f}x, repetition {ratio_r:.1f}x, "
          f"both filters {ratio_b:.1f}x")

    q_ours = [r is None for r in ours["q_reason"]]
    r_ours = [r is None for r in ours["r_reason"]]
    q_dt = [r is None for r in theirs["q_reason"]]
    r_dt = [r is None for r in theirs["r_reason"]]
    agree_q = sum(a == b for a, b in zip(q_ours, q_dt, strict=True)) / n
    agree_r = sum(a == b for a, b in zip(r_ours, r_dt, strict=True)) / n
    agree = sum((a and b) == (c and d) for a, b, c, d in zip(q_ours, r_ours, q_dt, r_dt, strict=True)) / n
    print(f"keep/drop agreement with datatrove: quality {agree_q:.2%}, repetition {agree_r:.2%}, "
          f"both filters {agree:.2%} of {n:,} docs")
    print(f"kept by quality: ours {sum(q_ours):,}, datatrove {sum(q_dt):,}; "
          f"kept by repetition: ours {sum(r_ours):,}, datatrove {sum(r_dt):,}")
    pairs = Counter((a, b) for a, b, x, y in zip(ours["q_reason"], theirs["q_reason"], q_ours, q_dt, strict=True)
                    if x != y)
    pairs += Counter((a, b) for a, b, x, y in zip(ours["r_reason"], theirs["r_reason"], r_ours, r_dt, strict=True)
                     if x != y)
    for (a, b), count in pairs.most_common(8):
        print(f"  disagree {count:>5,}: ours {a or 'keep'} / datatrove {b or 'keep'}")
    print("\nrepairs: " + ", ".join(f"{k} {ours['repairs'][k]:,}" for k in ("nul", "control", "mojibake")))
    print("languages: " + ", ".join(f"{k} {v:,}" for k, v in ours["langs"].most_common(8)))
    print("rules sub-step, each rule on every document: "
          + ", ".join(f"{k} {v:,}" for k, v in sorted(ours["fired"].items())))
    out = ours["outcome"]
    print(f"\nend to end (default config): kept {sum(r is None for r in out.reason):,} of {n:,}")
    for code, count in reason_counts(out.reason).items():
        print(f"  {code:<30}{count:>8,}")

if __name__ == "__main__":
    main()
