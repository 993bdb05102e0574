"""The tokenize stage's driver: published shards -> per-split Megatron datasets, token counts, _TOKENS.json.

A row group of a shard is the unit of work. The stage is a unit stage (`core.units.UnitStage`,
`TokensStage`): plan / units / finish in one work folder per key (`core.work.WorkFolder`): the plan writes the shard list (names, sha256, rows, rows per
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from corpus_dagster.core import records
from corpus_dagster.core.atomic import atomic_dir, atomic_path
from corpus_dagster.core.checks import CheckReport
from corpus_dagster.core.config import output_settings
from corpus_dagster.core.hashing import sha256_hex
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.progress import Log, Progress, heartbeat
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import Settings, TokenizeSettings
from corpus_dagster.core.stage import Outputs, Stage, run_cached
from corpus_dagster.core.units import Plan, UnitStage, run_stage
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


def tokens_key(layout: Layout, settings: Settings) -> tuple[str, dict[str, Any]]:
    """(key, inputs) of the token streams: the shards manifest's content hash and the tokenize settings."""
    _manifest, raw = read_shards_manifest(layout.shards)
    inputs = {"shards_manifest_sha256": sha256_hex(raw)}
    return TOKENS.key(inputs, output_settings(settings.resolved, "tokenize")), inputs


@dataclass(frozen=True)
class TokensResult:
    """One materialization of the stage: the build (None when the key was unchanged, `cached`), the
    streams' manifest (_TOKENS.json), the key."""

    build: BuildResult | None
    manifest: dict[str, Any]
    cached: bool
    key: str

    @property
    def n_docs(self) -> int:
        return int(self.manifest["n_docs"])

    @property
    def n_tokens(self) -> int:
        return int(self.manifest["n_tokens"])


def work_folder(layout: Layout, key: str) -> WorkFolder:
    """The work folder of one tokens key: the plan and every unit's token arrays."""
    return WorkFolder(layout.stage(STAGE), key, "token_streams", "token_streams_plan (or run_token_streams)",
                      "token_streams_encode",
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


class TokensStage(UnitStage[TokensResult]):
    """The token streams as a unit stage: plan (the shard list), one unit per row group, finish (the split
    files in shard, row-group order)."""

    name: ClassVar[str] = "token_streams"
    lock: ClassVar[str] = "tokens"
    phases: ClassVar[tuple[str, ...]] = ("encode",)

    def folder(self, layout: Layout) -> Path:
        return layout.stage(STAGE)

    def key(self, layout: Layout, settings: Settings) -> str:
        return tokens_key(layout, settings)[0]

    def plan(self, layout: Layout, settings: Settings, key: str, log: Log | None) -> Plan:
        """Write the plan (the shard list with sha256 and rows, the tokenizer's identity and dtype) into the
        key's work folder and name the units still to run, one per row group of each shard
        (`shard-00000-rg0000`, ...). A complete plan of the same key is reused with every unit output already
        written (resume); work folders of other keys are removed."""
        return _plan(layout, settings, key, log)

    def run_unit(self, layout: Layout, settings: Settings, key: str, unit: str) -> None:
        """Tokenize one row group of a shard into its unit files (atomically; nothing to do when already
        complete). It writes only its own files in the key's work folder, so any process on any machine that
        mounts the artifacts root can run it, and two runs of one unit write the same bytes."""
        _run_unit(layout, settings, key, unit)

    def finish(self, layout: Layout, settings: Settings, plan: Plan, log: Log | None) -> TokensResult:
        """Assemble the units' arrays in shard order into tokens/<dataset>/<version>/ (replaced whole,
        atomically), commit the stage record and remove the work folder."""
        return _finish(layout, settings, plan.key, log)

    def reuse(self, layout: Layout, settings: Settings, key: str, record: StageRecord) -> TokensResult:
        remove_all_work_folders(self.folder(layout))
        return TokensResult(None, _cached_manifest(layout), True, key)

    def local_workers(self, settings: Settings, plan: Plan) -> tuple[int, Settings]:
        """`workers` processes of `threads` encode threads each (`resolve_parallelism`): the units of an
        in-process run get this run's thread budget."""
        workers, threads = resolve_parallelism(settings.tokenize, settings.workers,
                                               int(plan.info.get("n_units", len(plan.units))))
        return workers, dataclasses.replace(
            settings, tokenize=dataclasses.replace(settings.tokenize, threads_per_worker=threads))


TOKENS_UNITS = TokensStage()


def _plan(layout: Layout, settings: Settings, key: str, log: Log | None) -> Plan:
    folder = layout.stage(STAGE)
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


def _run_unit(layout: Layout, settings: Settings, key: str, unit: str) -> None:
    work = work_folder(layout, key)
    plan = work.read_plan()
    entry = next((u for u in plan_units(plan) if u["unit"] == unit), None)
    if entry is None:
        raise TokenStreamError(f"{work.path}: unit {unit!r} is not in {work.plan_path().name}")
    if work.done(unit) is not None:
        return
    current, _inputs = tokens_key(layout, settings)
    if current != key:
        raise TokenStreamError(
            f"{work.path}: planned for key {key}, but the shards and tokenize settings here give "
            f"{current}; run token_streams_plan again with this config"
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


def _finish(layout: Layout, settings: Settings, key: str, log: Log | None) -> TokensResult:
    start = time.perf_counter()
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
                f"run token_streams_plan again"
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
        return TOKENS_UNITS.reuse(layout, settings, key, run.record)
    work.remove()
    workers, threads = resolve_parallelism(settings.tokenize, settings.workers, built["n_units"])
    # standalone (units run elsewhere): the time since the first unit started, on the units' clocks
    first = min((float(m["started_at"]) for m in built["markers"]), default=None)
    elapsed = max(time.time() - first, 0.0) if first is not None else time.perf_counter() - start
    result = BuildResult(layout.tokens, built["manifest"], built["plan"]["engine"], workers, threads, elapsed,
                         built["text_bytes"])
    return TokensResult(result, built["manifest"], False, key)


def run_token_streams(layout: Layout, settings: Settings, log: Log | None = None) -> TokensResult:
    """Build tokens/<dataset>/<version>/ unless its key is unchanged: plan, every unit through a pool of
    `workers` processes (`TokensStage.local_workers`), finish. The lock is held throughout, so a concurrent
    run waits and finds it cached.

    `log` (a callable taking a line) hears a heartbeat every `progress.interval_s` seconds and a closing line.
    """
    return run_stage(TOKENS_UNITS, layout, settings, log)


# --- Checks of the built streams, as the Dagster layer runs them (the check logic is in tokenize.checks) ----

def check_streams_counts(layout: Layout) -> CheckReport:
    """_TOKENS.json totals equal the per-document counts and the .idx sizes; files match their sha256."""
    return checks.check_counts(layout.tokens)


def check_streams_decode(layout: Layout, settings: Settings) -> CheckReport:
    """A sample of documents decodes back to exactly their shard text."""
    return checks.check_decode_sample(layout.shards, layout.tokens, settings.tokenize)


def check_streams_rebuild(layout: Layout, settings: Settings) -> CheckReport:
    """A rebuild with another worker count gives the same streams: a seeded sample of document batches
    (`tokenize.rebuild_check_batches`, seeded by the stage key) or, with 0, every file byte for byte."""
    sample = int(settings.tokenize.rebuild_check_batches)
    if not sample:
        return checks.check_rebuild(layout.shards, layout.tokens, settings.tokenize, settings.workers)
    seed = records.require_record(layout.stage(STAGE), "token_streams").key
    return checks.check_rebuild_sample(layout.shards, layout.tokens, settings.tokenize, settings.workers,
                                       sample, seed)
