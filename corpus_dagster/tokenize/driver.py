"""The tokenize stage's driver: published shards -> per-split Megatron datasets, token counts, _TOKENS.json.

A row group of a shard is the unit of work. The stage runs as plan / units / finish (`core.units`) in one
work folder per key (`core.work.WorkFolder`): the plan writes the shard list (names, sha256, rows, rows per
row group) and the tokenizer's identity; each unit reads one shard (checking its sha256), encodes one of
its row groups and writes its token arrays per split, in any process on any machine that mounts the
artifacts root; the finish step streams the units' arrays strictly in shard, row-group order through the
one writer (`tokenize.streams.write_streams`), one unit in memory at a time, so the output bytes never
depend on the worker count, the executor or which unit finished first.

A unit's outputs (`units/<unit>.<name>` in the work folder, `WorkFolder.unit_path`):

    docs.arrow              id, n_tokens (int32), split code (uint8) of every document, id order
    tokens-<split>.npy      the split's tokens, documents back to back
    lengths-<split>.npy     the split's document lengths (int32)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_path
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_hex
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log, Progress, heartbeat
from corpus_dagster.core.settings import Settings, TokenizeSettings, as_settings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.core.units import Plan, done_elsewhere, run_units
from corpus_dagster.core.work import WorkFolder, remove_all_work_folders
from corpus_dagster.lib.tokenizers import LoadedTokenizer, TokenizerInfo, load_tokenizer
from corpus_dagster.tokenize import checks
from corpus_dagster.tokenize.indexed import token_dtype
from corpus_dagster.tokenize.manifest import MANIFEST_NAME, TokenStreamError
from corpus_dagster.tokenize.outputs import STAGE
from corpus_dagster.tokenize.shards import (
    SPLITS,
    ShardTask,
    ShardTokens,
    read_shards_manifest,
    row_group_rows,
    shard_tasks,
    tokenize_shard,
)
from corpus_dagster.tokenize.streams import BuildResult, resolve_parallelism, set_thread_budget, write_streams

CODE_VERSION = "1"
TOKENS = Stage(STAGE, CODE_VERSION)
# tokenize keys that never change an output byte live in config.EXECUTION_KEYS; the rest decide the files.


def tokens_key(layout: Layout, resolved: Settings | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the token streams: the shards manifest's content hash and the tokenize settings."""
    _manifest, raw = read_shards_manifest(layout.shards)
    inputs = {"shards_manifest_sha256": sha256_hex(raw)}
    return TOKENS.key(inputs, output_settings(as_settings(resolved).resolved, "tokenize")), inputs


class StreamsRun(NamedTuple):
    """One materialization of the stage: the build (None when the key was unchanged), the manifest, the key."""

    result: BuildResult | None
    manifest: dict[str, Any]
    cached: bool
    key: str


def work_folder(layout: Layout, key: str) -> WorkFolder:
    """The work folder of one tokens key: the plan and every unit's token arrays."""
    return WorkFolder(layout.stage(STAGE), key, "token_streams", "plan_token_streams", "run_token_unit",
                      error=TokenStreamError)


def unit_name(index: int, row_group: int) -> str:
    """The unit of one row group of the shard at position `index` of the shards' manifest."""
    return f"shard-{index:05d}-rg{row_group:04d}"


def plan_units(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The units of a plan, in stream order: every row group of every shard (unit name, shard index, row group,
    rows), from the plan's shard list."""
    return [{"unit": unit_name(i, g), "shard": i, "row_group": g, "rows": rows}
            for i, s in enumerate(plan["shards"]) for g, rows in enumerate(s["row_groups"])]


def unit_files() -> list[str]:
    """The outputs of a unit (names under `WorkFolder.unit_path`)."""
    return ["docs.arrow"] + [f"{kind}-{s}.npy" for s in SPLITS for kind in ("tokens", "lengths")]


def _cached_manifest(layout: Layout) -> dict[str, Any]:
    return json.loads((layout.tokens / MANIFEST_NAME).read_text(encoding="utf-8"))


@records.locked(lambda a: "tokens")
def plan_token_streams(layout: Layout, resolved: Settings | Mapping[str, Any], log: Log | None = None) -> Plan:
    """Decide the tokens key; cached: the manifest and no units. Else write the plan (the shard list with
    sha256 and rows, the tokenizer's identity and dtype) into the key's work folder and name the units still
    to run, one per row group of each shard (`shard-00000-rg0000`, ...). A complete plan of the same key is
    reused with every unit output already written (resume); work folders of other keys are removed."""
    settings = as_settings(resolved)
    key, _inputs = tokens_key(layout, settings)
    folder = layout.stage(STAGE)
    if records.cached(folder, key) is not None:
        remove_all_work_folders(folder)
        manifest = _cached_manifest(layout)
        return Plan(key, (), cached={"manifest": manifest, "n_docs": manifest["n_docs"],
                                     "n_tokens": manifest["n_tokens"]})
    records.begin(folder)
    work = work_folder(layout, key)
    plan = work.start()
    shards_manifest, shards_raw = read_shards_manifest(layout.shards)
    tasks = shard_tasks(layout.shards, shards_manifest)  # a missing shard fails here, before any unit
    shards = [{"name": t.path.name, "sha256": t.sha256, "rows": t.rows, "row_groups": row_group_rows(t.path)}
              for t in tasks]
    if plan is None or plan["shards"] != shards:
        tok = load_tokenizer(settings.tokenize, threads=1)  # an unloadable tokenizer fails here, before any unit
        plan = work.write_plan({
            "shards_manifest_sha256": hashlib.sha256(shards_raw).hexdigest(),
            "tokenizer": dataclasses.asdict(tok.info),
            "vocab_sha256": tok.impl.vocab_sha256(),
            "dtype": token_dtype(tok.info.vocab_size).name,
            "engine": tok.engine,
            "shards": shards,
        })
    all_units = [u["unit"] for u in plan_units(plan)]
    todo = work.pending(all_units)
    n = len(all_units)
    if log is not None:
        log(f"token_streams: {n} unit(s) ({len(shards)} shard(s)) planned in {work.path}, {n - len(todo)} already done")
    return Plan(key, todo, info={"work": str(work.path), "n_units": n, "units_done": n - len(todo)})


_UNIT_TOKENIZERS: dict[str, LoadedTokenizer] = {}


def unit_threads(tok_cfg: TokenizeSettings) -> int:
    """Encode threads of a unit: `tokenize.threads_per_worker`, else RAYON_NUM_THREADS, else 1 (a unit never
    assumes it has the machine: an executor may run one per core)."""
    if tok_cfg.threads_per_worker:
        return int(tok_cfg.threads_per_worker)
    try:
        return max(1, int(os.environ.get("RAYON_NUM_THREADS", "1")))
    except ValueError:
        return 1


def _unit_tokenizer(tok_cfg: TokenizeSettings, threads: int, info: TokenizerInfo) -> LoadedTokenizer:
    """The tokenizer of a unit, loaded once per process (a pool worker runs many units)."""
    cache_key = json.dumps([tok_cfg.to_dict(), threads, dataclasses.asdict(info)], sort_keys=True, default=str)
    if cache_key not in _UNIT_TOKENIZERS:
        _UNIT_TOKENIZERS.clear()
        _UNIT_TOKENIZERS[cache_key] = load_tokenizer(tok_cfg, threads=threads, info=info)
    return _UNIT_TOKENIZERS[cache_key]


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:  # the temp name keeps `.npy` last, so np.save does not append one
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())


def _save_docs(path: Path, res: ShardTokens) -> None:
    table = pa.table({"id": res.ids, "n_tokens": pa.array(res.n_tokens, pa.int32()),
                      "split": pa.array(res.split_codes, pa.uint8())})
    with atomic_path(path) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())


@done_elsewhere(lambda layout: layout.stage(STAGE))
def run_token_unit(layout: Layout, resolved: Settings | Mapping[str, Any], key: str, unit: str) -> None:
    """Tokenize one row group of a shard of a plan into its unit files (atomically; nothing to do when already
    complete).

    Takes no lock: it writes only its own files in the key's work folder, so any process on any machine
    that mounts the artifacts root can run it, and two runs of one unit write the same bytes.
    """
    work = work_folder(layout, key)
    plan = work.read_plan()
    entry = next((u for u in plan_units(plan) if u["unit"] == unit), None)
    if entry is None:
        raise TokenStreamError(f"{work.path}: unit {unit!r} is not in {work.plan_path().name}")
    if work.done(unit) is not None:
        return
    settings = as_settings(resolved)
    current, _inputs = tokens_key(layout, settings)
    if current != key:
        raise TokenStreamError(
            f"{work.path}: planned for key {key}, but the shards and tokenize settings here give "
            f"{current}; run plan_token_streams again with this config"
        )
    tok_cfg = settings.tokenize
    threads = unit_threads(tok_cfg)
    set_thread_budget(threads)
    tok = _unit_tokenizer(tok_cfg, threads, TokenizerInfo(**plan["tokenizer"]))
    shard = plan["shards"][entry["shard"]]
    task = ShardTask(entry["shard"], layout.shards / shard["name"], shard["sha256"], int(entry["rows"]),
                     row_group=int(entry["row_group"]))
    started, clock = time.time(), time.perf_counter()
    res = tokenize_shard(task, tok, np.dtype(plan["dtype"]), tok_cfg.batch_docs)
    work.units_dir.mkdir(parents=True, exist_ok=True)
    _save_docs(work.unit_path(unit, "docs.arrow"), res)
    for s in SPLITS:
        _save_npy(work.unit_path(unit, f"tokens-{s}.npy"), res.tokens[s])
        _save_npy(work.unit_path(unit, f"lengths-{s}.npy"), res.lengths[s])
    work.mark_done(unit, unit_files(), shard=shard["name"], row_group=entry["row_group"], rows=len(res.ids),
                   text_bytes=res.text_bytes, started_at=started, seconds=round(time.perf_counter() - clock, 3))


def _load_unit(work: WorkFolder, unit: str, marker: dict[str, Any], rows: int) -> ShardTokens:
    """One unit's arrays, read back exactly as its row group was tokenized."""
    path = work.unit_path(unit, "docs.arrow")
    with pa.OSFile(str(path), "rb") as source:
        docs = pa.ipc.open_file(source).read_all()
    if docs.num_rows != rows:
        raise TokenStreamError(f"{path}: {docs.num_rows} documents, the plan's unit has {rows}; rerun the unit")
    tokens = {s: np.load(work.unit_path(unit, f"tokens-{s}.npy"), allow_pickle=False) for s in SPLITS}
    lengths = {s: np.load(work.unit_path(unit, f"lengths-{s}.npy"), allow_pickle=False) for s in SPLITS}
    return ShardTokens(
        ids=docs.column("id").combine_chunks(),
        n_tokens=docs.column("n_tokens").to_numpy(),
        split_codes=docs.column("split").to_numpy(),
        tokens=tokens,
        lengths=lengths,
        text_bytes=int(marker["text_bytes"]),
    )


@records.locked(lambda a: "tokens")
def finish_token_streams(layout: Layout, resolved: Settings | Mapping[str, Any], key: str,
                         log: Log | None = None) -> StreamsRun:
    """Assemble the units' arrays in shard order into tokens/<dataset>/<version>/ (replaced whole,
    atomically), commit the stage record and remove the work folder. Cached: the published result."""
    start = time.perf_counter()
    settings = as_settings(resolved)
    folder = layout.stage(STAGE)
    work = work_folder(layout, key)
    current, inputs = tokens_key(layout, settings)
    built: dict[str, Any] = {}

    def assemble(_key: str) -> Outputs:
        plan = work.read_plan()
        shards_manifest, shards_raw = read_shards_manifest(layout.shards)
        if current != key or hashlib.sha256(shards_raw).hexdigest() != plan["shards_manifest_sha256"]:
            raise TokenStreamError(
                f"{work.path}: planned for key {key}, but the shards and tokenize settings now give {current}; "
                f"run plan_token_streams again"
            )
        all_units = plan_units(plan)
        markers = work.require_done([u["unit"] for u in all_units])
        outputs = (_load_unit(work, u["unit"], m, int(u["rows"])) for u, m in zip(all_units, markers, strict=True))
        with heartbeat(log, "token_streams", float(settings.progress.interval_s), "writing the split files"):
            with atomic_dir(layout.tokens) as tmp:
                manifest, text_bytes = write_streams(
                    tmp, outputs, tok_cfg=settings.tokenize, info=TokenizerInfo(**plan["tokenizer"]),
                    vocab_sha256=plan["vocab_sha256"], dtype=np.dtype(plan["dtype"]),
                    shards_manifest=shards_manifest, shards_raw=shards_raw, n_shards=len(plan["shards"]),
                )
        progress = Progress(log, "token_streams", interval_s=float(settings.progress.interval_s))
        progress.update(manifest["n_docs"], text_bytes)
        progress.finish()
        built.update(plan=plan, manifest=manifest, text_bytes=text_bytes, markers=markers, n_units=len(all_units))
        names = sorted(p.name for p in layout.tokens.iterdir() if p.is_file())
        return Outputs(names, files={"streams": names},
                       stats={"n_docs": manifest["n_docs"], "n_tokens": manifest["n_tokens"]})

    run = run_cached(folder, TOKENS, inputs, output_settings(settings.resolved, "tokenize"), assemble, key=key,
                     clear=[layout.tokens.parent], output_dir=os.path.relpath(layout.tokens, folder))
    if run.cached:
        remove_all_work_folders(folder)
        return StreamsRun(None, _cached_manifest(layout), True, key)
    work.remove()
    workers, threads = resolve_parallelism(settings.tokenize, settings.workers, built["n_units"])
    # standalone (units run elsewhere): the time since the first unit started, on the units' clocks
    first = min((float(m["started_at"]) for m in built["markers"]), default=None)
    elapsed = max(time.time() - first, 0.0) if first is not None else time.perf_counter() - start
    result = BuildResult(layout.tokens, built["manifest"], built["plan"]["engine"], workers, threads, elapsed,
                         built["text_bytes"])
    return StreamsRun(result, built["manifest"], False, key)


@records.locked(lambda a: "tokens")
def run_token_streams(layout: Layout, resolved: Settings | Mapping[str, Any], log: Log | None = None) -> StreamsRun:
    """Build tokens/<dataset>/<version>/ unless its key is unchanged: plan, every unit through a pool of
    `workers` processes, finish. The lock is held throughout, so a concurrent run waits and finds it cached.

    `log` (a callable taking a line) hears a heartbeat every `progress.interval_s` seconds and a closing line.
    """
    start = time.perf_counter()
    settings = as_settings(resolved)
    plan = plan_token_streams(layout, settings, log)
    if plan.cached is not None:
        return StreamsRun(None, plan.cached["manifest"], True, plan.key)
    workers, threads = resolve_parallelism(settings.tokenize, settings.workers, plan.info["n_units"])
    # the units get this run's thread budget: `threads` encode threads in each of `workers` processes
    budget = dataclasses.replace(settings, tokenize=dataclasses.replace(settings.tokenize, threads_per_worker=threads))
    with heartbeat(log, "token_streams", float(settings.progress.interval_s), f"{len(plan.units)} shard(s) to tokenize"):
        run_units(run_token_unit, (layout, budget, plan.key), plan.units, workers)
    run = finish_token_streams(layout, settings, plan.key, log)
    assert run.result is not None  # the lock is held: nobody committed the key in between
    result = dataclasses.replace(run.result, workers=workers, threads=threads,
                                 elapsed_s=time.perf_counter() - start)
    return run._replace(result=result)


# --- Checks of the built streams, as the Dagster layer runs them (the check logic is in tokenize.checks) ----

def check_streams_counts(layout: Layout) -> CheckReport:
    """_TOKENS.json totals equal the per-document counts and the .idx sizes; files match their sha256."""
    return checks.check_counts(layout.tokens)


def check_streams_decode(layout: Layout, resolved: Settings | Mapping[str, Any]) -> CheckReport:
    """A sample of documents decodes back to exactly their shard text."""
    return checks.check_decode_sample(layout.shards, layout.tokens, as_settings(resolved).tokenize)


def check_streams_rebuild(layout: Layout, resolved: Settings | Mapping[str, Any]) -> CheckReport:
    """A rebuild with another worker count gives the same streams: a seeded sample of document batches
    (`tokenize.rebuild_check_batches`, seeded by the stage key) or, with 0, every file byte for byte."""
    settings = as_settings(resolved)
    sample = int(settings.tokenize.rebuild_check_batches)
    if not sample:
        return checks.check_rebuild(layout.shards, layout.tokens, settings.tokenize, settings.workers)
    seed = records.require_record(layout.stage(STAGE), "token_streams").key
    return checks.check_rebuild_sample(layout.shards, layout.tokens, settings.tokenize, settings.workers,
                                       sample, seed)
