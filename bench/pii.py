"""PII scrub benchmark: precision/recall per type on the labeled set, and MB/s per core on realistic text.

    .venv/bin/python bench/pii.py [--quick] [--mb N] [--compare] [--quality-only]

Quality: tests/data/pii/labeled.jsonl (positives per type, real-shaped examples, hard negatives); a
prediction is a true positive when it overlaps a gold span of the same type (see scrub/evaluate.py).

Speed: a corpus built from real text on this machine (Python's pydoc topics, /usr/share/common-licenses,
a quarter of /usr/share/doc/*/copyright, man pages with troff markup stripped), shuffled, cut into 1-6 KB
documents; 10% of the
documents get 1-3 injected PII items (e-mails 40%, phones 25%, IPs 20%, keys 10%, cards 5%) on top of the
real addresses the copyright files already hold. One process, POLARS_MAX_THREADS=1, CPU time
(time.process_time), so MB/s is per core even on a shared machine. Wall time is printed too.

Cues and code: recall on the labeled national-format phone numbers with their cue and with the cue
replaced by neutral words, phone false positives on the hard negatives, and how many of the 10,000 real
code identifiers after secret cue words (tests/data/pii/code_identifiers.py) the key detector fires on.

--compare also runs two peers on the same inputs: datatrove's PIIFormatter (e-mails and IPv4 by regex, in
bench/.venv-datatrove) and detect-secrets 1.5 (keys, in bench/.venv-secrets, created on first use).
"""

from __future__ import annotations

import os

os.environ["POLARS_MAX_THREADS"] = "1"  # before polars is imported anywhere: measure one core

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data" / "pii"))

import pydoc_data.topics  # noqa: E402

import code_identifiers  # noqa: E402
import make_labeled as gen  # noqa: E402
import polars as pl  # noqa: E402

from corpus_dagster.core.config import load_settings  # noqa: E402
from corpus_dagster.scrub.api import PII_TYPES, _plan, find_pii_batch, scrub_texts  # noqa: E402
from corpus_dagster.scrub.evaluate import LabeledDoc, TypeScore, evaluate, load_labeled, score_doc  # noqa: E402
from corpus_dagster.scrub.phones import single_number_ok  # noqa: E402
from corpus_dagster.scrub.prescreen import candidate_regions  # noqa: E402

LABELED = ROOT / "tests" / "data" / "pii" / "labeled.jsonl"
OUT = ROOT / "bench" / "out"
TARGETS = {"emails": (0.99, 0.97), "phones": (0.99, 0.97), "cards": (0.99, 0.97), "ips": (0.99, 0.97),
           "keys": (0.99, 0.97)}  # (precision, recall)
_TROFF = re.compile(r"\\f[BIRPC]|\\f\(..|\\\(..|\\[&e|^]|\\s[+-]?[0-9]")


def _man_text(path: str) -> str:
    """A man page's text with request lines and the commonest troff escapes removed."""
    raw = gzip.open(path).read().decode("utf-8", "replace")
    lines = [ln for ln in raw.splitlines() if not ln.startswith((".", "'"))]
    return _TROFF.sub("", "\n".join(lines)).replace("\\-", "-")


def _source_items(rng: random.Random) -> list[str]:
    """Every source (pydoc topic key or file path) in a seeded shuffled order, so any prefix is a mix.

    Only a quarter of the copyright files are used: they are contact lists, far denser in real e-mail
    addresses than ordinary text.
    """
    copyrights = sorted(glob.glob("/usr/share/doc/*/copyright"))
    items = [f"topic:{k}" for k in sorted(pydoc_data.topics.topics)]
    items += sorted(glob.glob("/usr/share/common-licenses/*"))
    items += [p for i, p in enumerate(copyrights) if i % 4 == 0]
    items += sorted(glob.glob("/usr/share/man/man[1-8]/*.gz"))
    rng.shuffle(items)
    return items


def _read(item: str) -> str:
    """The text of one source item ('' when unreadable)."""
    try:
        if item.startswith("topic:"):
            return pydoc_data.topics.topics[item[6:]]
        if item.endswith(".gz"):
            return _man_text(item)
        return Path(item).read_text(encoding="utf-8", errors="replace")
    except (OSError, EOFError):
        return ""


def _pii_value(rng: random.Random) -> str:
    """One random PII value, drawn with the type mix of the docstring."""
    kind = rng.choices(["emails", "phones", "ips", "keys", "cards"], [40, 25, 20, 10, 5])[0]
    if kind == "emails":
        return gen.email()
    if kind == "phones":
        region = rng.choice(gen.PHONE_REGIONS)
        return gen.phonenumbers.format_number(gen.valid_number(region, 1), gen.PhoneNumberFormat.INTERNATIONAL)
    if kind == "ips":
        return gen.public_v4()
    if kind == "keys":
        return "token=" + gen.key_values()[rng.randrange(11)][1]
    return gen.card_number()[0]


def build_corpus(target_bytes: int, seed: int = 5) -> list[str]:
    """Documents of 1-6 KB from real text, 10% with injected PII, until `target_bytes` UTF-8 bytes."""
    rng = random.Random(seed)
    gen.R.seed(seed)
    docs: list[str] = []
    size = 0
    items = _source_items(rng)
    while True:  # a target above the ~100 MB of source text reuses it with fresh cuts and injections
        for item in items:
            cur: list[str] = []
            want = rng.randint(1000, 6000)
            for para in _read(item).split("\n\n"):
                cur.append(para)
                if sum(len(p) for p in cur) < want:
                    continue
                doc = "\n\n".join(cur)
                if rng.random() < 0.10:
                    for _ in range(rng.randint(1, 3)):
                        cut = doc.find(". ", rng.randrange(len(doc)))
                        cut = len(doc) if cut < 0 else cut + 1
                        doc = f"{doc[:cut]} Contact {_pii_value(rng)} for details.{doc[cut:]}"
                docs.append(doc)
                size += len(doc.encode("utf-8"))
                if size >= target_bytes:
                    return docs
                cur, want = [], rng.randint(1000, 6000)


def quality_table(scores: dict[str, TypeScore], title: str) -> None:
    """Print precision/recall per type with the targets."""
    print(f"\n{title}")
    print(f"{'type':8} {'gold':>5} {'tp':>5} {'fp':>4} {'fn':>4} {'exact':>6} {'precision':>9} {'recall':>7} "
          f"{'target P/R':>11}  ok")
    for kind, s in scores.items():
        p_t, r_t = TARGETS.get(kind, (0, 0))
        ok = "yes" if s.precision >= p_t and s.recall >= r_t else "NO"
        print(f"{kind:8} {s.tp + s.fn:5d} {s.tp:5d} {s.fp:4d} {s.fn:4d} {s.exact:6d} {s.precision:9.3f} "
              f"{s.recall:7.3f} {p_t:5.2f}/{r_t:4.2f}  {ok}")
    errors = [(k, *e) for k, s in scores.items() for e in s.errors]
    if errors:
        print("errors (kind, fp/fn, family, context):")
        for kind, what, family, ctx in errors[:20]:
            print(f"  {kind:7} {what} {family:24} {ctx!r}")


NATIONAL_FAMILIES = ("phone.national_cued", "phone.foreign_national", "phone.national_cue_phrases")


def cue_and_code_table(labeled: list[LabeledDoc], cfg: dict) -> None:
    """National-format phone recall with and without a cue, phone fps on hard negatives, identifier hits."""
    national = [d for d in labeled if d.family in NATIONAL_FAMILIES]
    cued = evaluate(national, cfg)["phones"]
    bare = [LabeledDoc(d.family, f"The value {d.text[s:e]} was noted.", (("phones", 10, 10 + e - s),))
            for d in national for kind, s, e in d.spans if kind == "phones"]
    uncued = evaluate(bare, cfg)["phones"]
    phrases = evaluate([d for d in labeled if d.family == "phone.national_cue_phrases"], cfg)["phones"]
    negatives = evaluate([d for d in labeled if d.family.startswith("neg.")], cfg)["phones"]
    lines = code_identifiers.code_lines()
    hits = sum(any(k == "keys" for k, _, _ in spans) for spans in find_pii_batch(lines, cfg))
    print("\nCues and code")
    print(f"{'measure':58} {'value':>12}")
    print(f"{'national phones, with cue: recall (tp/gold)':58} {cued.recall:6.3f} {cued.tp:>3}/{cued.tp + cued.fn}")
    print(f"{'  of which cue phrasings (office number, reach us on ...)':58} {phrases.recall:6.3f} "
          f"{phrases.tp:>3}/{phrases.tp + phrases.fn}")
    print(f"{'national phones, cue replaced by neutral words: recall':58} {uncued.recall:6.3f} "
          f"{uncued.tp:>3}/{uncued.tp + uncued.fn}")
    print(f"{'phone false positives on the hard negatives':58} {negatives.fp:12d}")
    print(f"{'code identifiers after secret cues: <KEY> hits':58} {hits:6d}/{len(lines)}")


def speed(docs: list[str], cfg: dict, as_series: bool = False) -> dict[str, float]:
    """CPU seconds (one core) and wall seconds for regions only and for the whole scrub, in 10k batches.

    as_series: hand each batch over as a polars String Series (what a Parquet reader yields) instead of a
    list of str; the scrub then returns a Series and skips a copy of every text each way.
    """
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    plan = _plan(cfg)
    scrub_texts(docs[:200], cfg)  # warm-up: compile regexes
    for region in sorted(gen.phonenumbers.SUPPORTED_REGIONS):  # libphonenumber loads a region's metadata on
        gen.phonenumbers.PhoneMetadata.metadata_for_region(region)  # first use: once per worker, not per batch
    for code in sorted(gen.phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS):
        gen.phonenumbers.PhoneMetadata.metadata_for_nongeo_region(code)
    batches = [docs[i : i + 10000] for i in range(0, len(docs), 10000)]
    if as_series:
        batches = [pl.Series("text", b, dtype=pl.String) for b in batches]
    res: dict[str, float] = {"bytes": nbytes, "docs": len(docs)}
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    for b in batches:
        candidate_regions(b, plan.all_patterns)
    res["regions_cpu"] = time.process_time() - t_cpu
    counts = dict.fromkeys(PII_TYPES, 0)
    changed = 0
    single_number_ok.cache_clear()  # no head start from an earlier run over the same corpus
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    for b in batches:
        out = scrub_texts(b, cfg)
        changed += sum(1 for r in out.redactions if r)
        for k in PII_TYPES:
            counts[k] += sum(out.counts[k])
    res["scrub_cpu"] = time.process_time() - t_cpu
    res["scrub_wall"] = time.perf_counter() - t_wall
    res["changed_docs"] = changed
    res.update({f"n_{k}": v for k, v in counts.items()})
    return res


def speed_table(rows: list[tuple[str, dict[str, float]]]) -> None:
    """Print the throughput rows."""
    print(f"\n{'run':34} {'MB':>7} {'docs':>7} {'CPU s':>7} {'MB/s/core':>10} {'wall s':>7}  placeholders")
    for name, r in rows:
        mb = r["bytes"] / 1e6
        placed = " ".join(f"{k}={int(r.get('n_' + k, 0))}" for k in PII_TYPES)
        cpu = r.get("scrub_cpu", r.get("regions_cpu", 0.0))
        print(f"{name:34} {mb:7.1f} {int(r['docs']):7d} {cpu:7.2f} {mb / cpu:10.1f} "
              f"{r.get('scrub_wall', float('nan')):7.2f}  {placed}")


# --------------------------------------------------------------------------------------------------- peers

_DATATROVE_SCRIPT = r"""
import json, sys, time
from datatrove.pipeline.formatters.pii import PIIFormatter, public_ip_validator
f = PIIFormatter()
mode, path = sys.argv[1], sys.argv[2]
texts = [json.loads(l)["text"] for l in open(path, encoding="utf-8")]
if mode == "spans":
    out = []
    for t in texts:
        spans = [("emails", m.start(), m.end()) for m in f.emails_replacer.regex.finditer(t)]
        spans += [("ips", m.start(), m.end()) for m in f.ip_replacer.regex.finditer(t)
                  if public_ip_validator(m.group(0), True)]
        out.append(spans)
    print(json.dumps(out))
else:
    t0 = time.process_time()
    for t in texts:
        f.format(t)
    print(json.dumps({"cpu": time.process_time() - t0}))
"""

_SECRETS_SCRIPT = r"""
import json, os, sys, tempfile, time
from detect_secrets import SecretsCollection
from detect_secrets.settings import default_settings
mode, path = sys.argv[1], sys.argv[2]
texts = [json.loads(l)["text"] for l in open(path, encoding="utf-8")]
out, t0 = [], time.process_time()
with default_settings(), tempfile.TemporaryDirectory() as tmp:
    for i, t in enumerate(texts):
        name = os.path.join(tmp, f"doc{i}.txt")
        with open(name, "w", encoding="utf-8") as fh:
            fh.write(t)
        secrets = SecretsCollection()
        secrets.scan_file(name)
        values = sorted({s.secret_value for _, s in secrets if s.secret_value})
        spans, pos = [], 0
        for v in values:
            j = t.find(v)
            if j >= 0:
                spans.append(("keys", j, j + len(v)))
        out.append(spans)
cpu = time.process_time() - t0
print(json.dumps(out if mode == "spans" else {"cpu": cpu}))
"""


def _secrets_python() -> Path:
    """The python of bench/.venv-secrets (detect-secrets 1.5.0), created on first use."""
    env = ROOT / "bench" / ".venv-secrets"
    python = env / "bin" / "python"
    if not (env / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "detect-secrets==1.5.0"], check=True)
        (env / ".ready").write_text("ok\n")
    return python


def _write_jsonl(texts: list[str], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for t in texts:
            fh.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")


def _peer_scores(docs: list[LabeledDoc], spans: list[list[list]], kinds: tuple[str, ...]) -> dict[str, TypeScore]:
    """Score a peer's predicted spans against the labeled set, for the types the peer covers."""
    scores = {k: TypeScore() for k in PII_TYPES}
    for doc, pred in zip(docs, spans, strict=True):
        gold = LabeledDoc(doc.family, doc.text, tuple(g for g in doc.spans if g[0] in kinds))
        merged: list[tuple[str, int, int]] = []  # a peer may report pieces of one secret: count it once
        for kind, start, end in sorted(tuple(p) for p in pred if p[0] in kinds):
            if merged and merged[-1][0] == kind and start < merged[-1][2]:
                merged[-1] = (kind, merged[-1][1], max(end, merged[-1][2]))
            else:
                merged.append((kind, start, end))
        score_doc(gold, merged, scores)
    return {k: scores[k] for k in kinds}


def compare(labeled: list[LabeledDoc], corpus: list[str], ours: dict[str, TypeScore]) -> None:
    """Run datatrove's PIIFormatter and detect-secrets on the labeled set and a corpus sample."""
    sys.path.insert(0, str(ROOT / "bench"))
    from datatrove_env import ensure_datatrove_env

    lab_path, corpus_path = OUT / "pii_labeled_texts.jsonl", OUT / "pii_corpus_sample.jsonl"
    _write_jsonl([d.text for d in labeled], lab_path)
    sample = corpus[: max(1, len(corpus) // 4)]
    _write_jsonl(sample, corpus_path)
    sample_mb = sum(len(t.encode("utf-8")) for t in sample) / 1e6
    dt = str(ensure_datatrove_env())
    spans = json.loads(subprocess.run([dt, "-c", _DATATROVE_SCRIPT, "spans", str(lab_path)], check=True,
                                      capture_output=True, text=True).stdout)
    quality_table(_peer_scores(labeled, spans, ("emails", "ips")), "datatrove PIIFormatter on the labeled set")
    cpu = json.loads(subprocess.run([dt, "-c", _DATATROVE_SCRIPT, "speed", str(corpus_path)], check=True,
                                    capture_output=True, text=True).stdout)["cpu"]
    print(f"datatrove PIIFormatter (e-mails + IPv4 only): {sample_mb:.1f} MB in {cpu:.2f} CPU s = "
          f"{sample_mb / cpu:.1f} MB/s/core")
    ds = str(_secrets_python())
    spans = json.loads(subprocess.run([ds, "-c", _SECRETS_SCRIPT, "spans", str(lab_path)], check=True,
                                      capture_output=True, text=True).stdout)
    quality_table(_peer_scores(labeled, spans, ("keys",)), "detect-secrets 1.5 (default plugins) on the labeled set")
    small = sample[: max(1, len(sample) // 10)]
    small_mb = sum(len(t.encode("utf-8")) for t in small) / 1e6
    _write_jsonl(small, corpus_path)
    cpu = json.loads(subprocess.run([ds, "-c", _SECRETS_SCRIPT, "speed", str(corpus_path)], check=True,
                                    capture_output=True, text=True).stdout)["cpu"]
    print(f"detect-secrets (keys only): {small_mb:.1f} MB in {cpu:.2f} CPU s = {small_mb / cpu:.2f} MB/s/core")
    print(f"ours, keys on the labeled set: P={ours['keys'].precision:.3f} R={ours['keys'].recall:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small corpus (~24 MB), for a run under 2 minutes")
    ap.add_argument("--mb", type=float, default=None, help="corpus size in MB (default 200, quick 24)")
    ap.add_argument("--compare", action="store_true", help="also run datatrove and detect-secrets")
    ap.add_argument("--quality-only", action="store_true", help="labeled set and cue/code tables, no speed runs")
    args = ap.parse_args()
    cfg = load_settings().pii

    labeled = load_labeled(LABELED)
    scores = evaluate(labeled, cfg)
    quality_table(scores, f"Labeled set: {len(labeled)} texts, {sum(len(d.spans) for d in labeled)} gold spans")
    # the scrubbed labeled set must be clean (idempotence and the shard check)
    scrubbed = scrub_texts([d.text for d in labeled], cfg)
    leftover = sum(len(s) for s in find_pii_batch(scrubbed.text, cfg))
    again = scrub_texts(scrubbed.text, cfg)
    print(f"after scrubbing: detections left={leftover}, texts changed by a second scrub="
          f"{sum(a != b for a, b in zip(again.text, scrubbed.text, strict=True))}")
    cue_and_code_table(labeled, cfg)
    if args.quality_only:
        return

    mb = args.mb if args.mb is not None else (24 if args.quick else 200)
    t0 = time.perf_counter()
    corpus = build_corpus(int(mb * 1e6))
    print(f"\ncorpus: {len(corpus)} docs, {sum(len(d.encode()) for d in corpus) / 1e6:.1f} MB "
          f"(built in {time.perf_counter() - t0:.1f} s)")
    rows = []
    base = speed(corpus, cfg)
    rows.append(("regions only (polars, Rust regex)", {**base, "scrub_cpu": base["regions_cpu"],
                                                        "scrub_wall": float("nan")}))
    rows[-1][1].update({f"n_{k}": 0 for k in PII_TYPES})
    rows.append(("scrub, default config", base))
    one = dataclasses.replace(cfg, max_passes=1)
    rows.append(("scrub, max_passes=1 (no re-check)", speed(corpus, one)))
    rows.append(("scrub, default, polars Series in/out", speed(corpus, cfg, as_series=True)))
    speed_table(rows)
    print(f"documents changed: {int(base['changed_docs'])} of {int(base['docs'])}")
    if args.compare:
        compare(labeled, corpus, scores)


if __name__ == "__main__":
    main()
