"""Language ID benchmark: per language, kept / dropped by the `lang` rule at the default settings, label
accuracy, and MB/s per core of the lang step.

    .venv/bin/python bench/langid.py [--data PATH] [--allowed en,fr] [--errors N]

Data: tests/data/langid/langid.jsonl.gz, real documents from this machine labeled by where they come from
(English man pages, pydoc topics and license texts; French, German, Spanish, Portuguese, Italian man
pages), built by tests/data/langid/make_langid.py (run it first if the file is missing).

Columns: `docs`; `label ok` = share whose recorded label is the true language (the label the clean table
stores; `und` counts as wrong); `kept` / `dropped` = what the `lang` rule does with only `allowed` kept
(default config: `en`), so English wants kept near 1 and every other language dropped near 1; `target`
is the bar a release must meet. Speed: the lang step alone (sampling + model + decision) over every document, one
process, POLARS_MAX_THREADS=1, CPU time (time.process_time), so MB/s is per core on a shared machine.
"""

from __future__ import annotations

import os

os.environ["POLARS_MAX_THREADS"] = "1"  # before polars is imported anywhere: measure one core

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from corpus_dagster.clean.cleaner import RULE_ORDER, clean_texts  # noqa: E402
from corpus_dagster.clean.langid import detect_languages  # noqa: E402
from corpus_dagster.core.config import load_config  # noqa: E402
from corpus_dagster.core.settings import CleanSettings, Settings  # noqa: E402

DATA = ROOT / "tests" / "data" / "langid" / "langid.jsonl.gz"
TARGETS = {"en": 0.98, "fr": 0.97, "de": 0.97, "es": 0.97}


def load(path: Path) -> list[dict]:
    """The labeled documents."""
    if not path.exists():
        sys.exit(f"{path} is missing: run tests/data/langid/make_langid.py first")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def lang_only_config(allowed: list[str] | None) -> CleanSettings:
    """The default `clean` section with every rule but `lang` switched off."""
    overrides: dict = {key: {"enabled": False} for key in RULE_ORDER if key != "lang"}
    if allowed is not None:
        overrides["lang"] = {"allowed": allowed}
    return Settings.from_resolved(load_config(overrides={"clean": overrides})).clean


def labels_of(result: object) -> list[str]:
    """Recorded labels from detect_languages' result (a (langs, scores) tuple or an object with .lang)."""
    return list(result[0]) if isinstance(result, tuple) else list(result.lang)  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--allowed", default=None, help="comma-separated allowed languages (default: the config's)")
    ap.add_argument("--errors", type=int, default=8, help="wrong labels to print per language")
    args = ap.parse_args()
    docs = load(args.data)
    cfg = lang_only_config(args.allowed.split(",") if args.allowed else None)
    texts = [d["text"] for d in docs]
    truth = [d["lang"] for d in docs]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)

    series = pl.Series("text", texts, dtype=pl.String)
    detect_languages(series.head(50), cfg.lang)  # warm-up: load the model
    t0 = time.process_time()
    result = detect_languages(series, cfg.lang)
    cpu = time.process_time() - t0
    labels = labels_of(result)
    reasons = clean_texts(texts, cfg, "bench").reason

    allowed = None if cfg.lang.allowed is None else list(cfg.lang.allowed)
    print(f"lang rule at the default settings, allowed={allowed}; {len(docs)} documents, {nbytes / 1e6:.1f} MB")
    print(f"{'lang':5} {'source':8} {'docs':>5} {'label ok':>9} {'kept':>6} {'dropped':>8} {'target':>7}  labels seen")
    groups = sorted({(d["lang"], d["source"]) for d in docs}, key=lambda g: (g[0] != "en", g))
    for lang in sorted({g[0] for g in groups}, key=lambda lang: (lang != "en", lang)):
        rows = [(lang, src) for g_lang, src in groups if g_lang == lang] + [(lang, "all")]
        for g_lang, src in rows:
            idx = [i for i, d in enumerate(docs) if d["lang"] == g_lang and (src == "all" or d["source"] == src)]
            if src == "all" and len(rows) == 2:
                continue
            ok = sum(labels[i] == g_lang for i in idx) / len(idx)
            kept = sum(reasons[i] is None for i in idx) / len(idx)
            seen: dict[str, int] = {}
            for i in idx:
                seen[labels[i]] = seen.get(labels[i], 0) + 1
            top = " ".join(f"{k}={v}" for k, v in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
            want = TARGETS.get(g_lang)
            target = "" if want is None or (src != "all" and len(rows) > 2) else f">={want:.2f}"
            print(f"{g_lang:5} {src:8} {len(idx):5d} {ok:9.3f} {kept:6.3f} {1 - kept:8.3f} {target:>7}  {top}")
    print(f"\nlang step: {nbytes / 1e6:.1f} MB in {cpu:.2f} CPU s = {nbytes / 1e6 / cpu:.1f} MB/s per core "
          f"({len(docs) / cpu:.0f} docs/s)")
    if args.errors:
        print("\nwrong labels (lang, source, name: label):")
        for lang in sorted(set(truth)):
            wrong = [i for i in range(len(docs)) if truth[i] == lang and labels[i] != lang][: args.errors]
            for i in wrong:
                print(f"  {lang} {docs[i]['source']} {docs[i]['name']}: {labels[i]}")


if __name__ == "__main__":
    main()
