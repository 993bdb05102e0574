"""The token streams as units: plan, one unit per shard in any order and any process, finish.

The units' path must write the very bytes of `run_token_streams`, resume from finished units, and leave
completed unit outputs alone.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from corpus_dagster.core import records
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import CorpusError, TokenStreamError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings, TokenizeSettings
from corpus_dagster.core.units import Plan, finish_stage, plan_stage, run_stage_unit
from corpus_dagster.tokenize.driver import (
    TOKENS_UNITS,
    TokensResult,
    run_token_streams,
    unit_threads,
    work_folder,
)
from corpus_dagster.tokenize.sample import sample_texts, train_sample_bpe, write_sample_shards

EXTRA = ["hello <|endoftext|> world", "", "ünïcödé 😀 日本語", "x" * 3000]
MAX_FILE_BYTES = 2048  # small enough that the train split rolls over into several files


# The stage's steps one by one, as the Dagster graph runs them (core.units with the tokens stage object).
def plan_token_streams(layout: Layout, settings: Settings) -> Plan:
    return plan_stage(TOKENS_UNITS, layout, settings)


def run_token_unit(layout: Layout, settings: Settings, key: str, unit: str) -> None:
    run_stage_unit(TOKENS_UNITS, layout, settings, key, unit)


def finish_token_streams(layout: Layout, settings: Settings, key: str) -> TokensResult:
    return finish_stage(TOKENS_UNITS, layout, settings, Plan(key))


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory) -> Path:
    return train_sample_bpe(sample_texts(40), tmp_path_factory.mktemp("bpe") / "tiny" / "tokenizer.json")


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    """50 documents in 5 shards of 10 rows, some of them in split val."""
    folder = tmp_path_factory.mktemp("shards") / "v1"
    write_sample_shards(sample_texts(46) + EXTRA, folder, dataset="demo", version="v1", shard_rows=10,
                        val_permille=200)
    return folder


def setup(root: Path, shards: Path, bpe_file: Path, workers: int = 1, **tokenize) -> tuple[Layout, Settings]:
    """An artifacts root holding a copy of the shards, and its settings."""
    shutil.copytree(shards, root / "corpus" / "demo" / "v1")
    tok = {"kind": "huggingface", "path": str(bpe_file), "max_file_bytes": MAX_FILE_BYTES, "batch_docs": 4,
           **tokenize}
    settings = load_settings(None, {"dataset": "demo", "version": "v1", "workers": workers,
                                    "paths": {"artifacts": str(root)}, "tokenize": tok})
    return Layout.from_config(settings.resolved), settings


def file_hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def stats(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("workers", [1, 2])
def test_units_in_reversed_order_write_the_bytes_of_run_token_streams(shards, bpe_file, tmp_path, workers):
    ref_layout, ref_resolved = setup(tmp_path / "ref", shards, bpe_file, workers=workers)
    ref = run_token_streams(ref_layout, ref_resolved)
    assert ref.build is not None and ref.build.workers == workers

    layout, resolved = setup(tmp_path / "units", shards, bpe_file, workers=workers)
    plan = plan_token_streams(layout, resolved)
    assert plan.key == ref.key and plan.cached is False
    assert plan.units == tuple(f"shard-{i:05d}-rg0000" for i in range(5))
    for unit in reversed(plan.units):
        run_token_unit(layout, resolved, plan.key, unit)
    run = finish_token_streams(layout, resolved, plan.key)

    assert not run.cached and run.key == ref.key and run.manifest == ref.manifest
    assert len(run.manifest["splits"]["train"]["files"]) >= 2
    assert run.manifest["splits"]["val"]["n_docs"] > 0
    assert file_hashes(layout.tokens) == file_hashes(ref_layout.tokens)
    assert run.build is not None and run.build.text_bytes == ref.build.text_bytes
    assert records.read_record(layout.stage("tokens")).key == plan.key
    assert not work_folder(layout, plan.key).path.exists()


def test_rerunning_a_finished_unit_does_nothing(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path, shards, bpe_file)
    plan = plan_token_streams(layout, resolved)
    run_token_unit(layout, resolved, plan.key, "shard-00001-rg0000")
    units = work_folder(layout, plan.key).units_dir
    before = stats(units)
    assert len(before) == 6 and "shard-00001-rg0000.json" in before  # docs, tokens and lengths per split, marker
    run_token_unit(layout, resolved, plan.key, "shard-00001-rg0000")
    assert stats(units) == before


def test_a_damaged_unit_output_is_rewritten(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path / "a", shards, bpe_file)
    ref = run_token_streams(layout, resolved)
    layout, resolved = setup(tmp_path / "b", shards, bpe_file)
    plan = plan_token_streams(layout, resolved)
    for unit in plan.units:
        run_token_unit(layout, resolved, plan.key, unit)
    damaged = work_folder(layout, plan.key).unit_path("shard-00002-rg0000", "tokens-train.npy")
    damaged.write_bytes(damaged.read_bytes()[:-6])
    with pytest.raises(TokenStreamError, match=r"1 of 5 unit\(s\) have no complete output in .* \(shard-00002-rg0000\)"):
        finish_token_streams(layout, resolved, plan.key)
    assert plan_token_streams(layout, resolved).units == ("shard-00002-rg0000",)
    run_token_unit(layout, resolved, plan.key, "shard-00002-rg0000")
    finish_token_streams(layout, resolved, plan.key)
    assert file_hashes(layout.tokens) == file_hashes(tmp_path / "a" / "tokens" / "demo" / "v1")
    assert ref.key == plan.key


def test_resume_keeps_finished_units_and_gives_the_same_bytes(shards, bpe_file, tmp_path):
    ref_layout, ref_resolved = setup(tmp_path / "ref", shards, bpe_file)
    run_token_streams(ref_layout, ref_resolved)

    layout, resolved = setup(tmp_path / "units", shards, bpe_file)
    plan = plan_token_streams(layout, resolved)
    for unit in plan.units[:2]:
        run_token_unit(layout, resolved, plan.key, unit)
    units = work_folder(layout, plan.key).units_dir
    before = stats(units)
    records.begin(layout.stage("tokens"))  # what every plan does under the lock: keeps the current work
    again = plan_token_streams(layout, resolved)
    assert again.key == plan.key
    assert again.units == plan.units[2:]
    assert again.info["units_done"] == 2 and again.info["n_units"] == 5
    assert stats(units) == before
    for unit in again.units:
        run_token_unit(layout, resolved, again.key, unit)
    assert {k: v for k, v in stats(units).items() if k in before} == before
    finish_token_streams(layout, resolved, again.key)
    assert file_hashes(layout.tokens) == file_hashes(ref_layout.tokens)


def test_a_plan_of_another_key_removes_the_old_work_folder(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path, shards, bpe_file)
    old = plan_token_streams(layout, resolved)
    run_token_unit(layout, resolved, old.key, "shard-00000-rg0000")
    changed = load_settings(None, {**{k: resolved.resolved[k] for k in ("dataset", "version", "paths")},
                                   "tokenize": {**resolved.resolved["tokenize"], "max_file_bytes": 4096}})
    new = plan_token_streams(layout, changed)
    assert new.key != old.key and len(new.units) == 5
    assert not work_folder(layout, old.key).path.exists() and work_folder(layout, new.key).path.is_dir()
    with pytest.raises(TokenStreamError, match="run token_streams_plan again"):
        finish_token_streams(layout, resolved, new.key)


def test_a_unit_without_a_plan_names_the_work_folder(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path, shards, bpe_file)
    key = "0123456789abcdef"
    folder = work_folder(layout, key).path
    with pytest.raises(CorpusError, match=re.escape(str(folder)) + r".*run token_streams_plan \(or run_token_streams\) first"):
        run_token_unit(layout, resolved, key, "shard-00000-rg0000")
    with pytest.raises(CorpusError, match=re.escape(str(folder)) + r".*run token_streams_plan \(or run_token_streams\) first"):
        finish_token_streams(layout, resolved, key)


def test_a_unit_outside_the_plan_is_refused(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path, shards, bpe_file)
    plan = plan_token_streams(layout, resolved)
    with pytest.raises(TokenStreamError, match="unit 'shard-00009-rg0000' is not in plan.json"):
        run_token_unit(layout, resolved, plan.key, "shard-00009-rg0000")


def test_cached_streams_plan_no_units_and_finish_returns_the_cached_result(shards, bpe_file, tmp_path):
    layout, resolved = setup(tmp_path, shards, bpe_file)
    built = run_token_streams(layout, resolved)
    before = stats(layout.tokens)
    plan = plan_token_streams(layout, resolved)
    assert plan.key == built.key and plan.units == ()
    assert plan.cached is True
    run = finish_token_streams(layout, resolved, plan.key)
    assert run.cached and run.build is None and run.manifest == built.manifest and run.key == built.key
    assert run.n_tokens == built.manifest["n_tokens"]
    assert stats(layout.tokens) == before
    assert [p.name for p in layout.stage("tokens").iterdir() if p.name.startswith(".work-")] == []


def test_unit_thread_budget(monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    assert unit_threads(TokenizeSettings(threads_per_worker=3)) == 3
    assert unit_threads(TokenizeSettings(threads_per_worker=None)) == 1  # never the whole machine by default
    monkeypatch.setenv("RAYON_NUM_THREADS", "2")
    assert unit_threads(TokenizeSettings(threads_per_worker=None)) == 2
    assert unit_threads(TokenizeSettings(threads_per_worker=4)) == 4


def test_a_unit_per_row_group_writes_the_bytes_of_whole_shards(bpe_file, tmp_path):
    # shards of 10 rows in row groups of at most 3: 4 units per shard, run in reverse; the streams must be
    # the in-memory whole-shard build's bytes (build_token_streams, what the rebuild check runs)
    from corpus_dagster.tokenize.streams import build_token_streams

    folder = tmp_path / "grouped" / "v1"
    write_sample_shards(sample_texts(26) + EXTRA, folder, dataset="demo", version="v1", shard_rows=10,
                        val_permille=200, row_group_rows=3)
    layout, resolved = setup(tmp_path / "units", folder, bpe_file, workers=2)
    plan = plan_token_streams(layout, resolved)
    assert plan.units == tuple(f"shard-{i:05d}-rg{g:04d}" for i, groups in enumerate([4, 4, 4]) for g in range(groups))
    for unit in reversed(plan.units):
        run_token_unit(layout, resolved, plan.key, unit)
    run = finish_token_streams(layout, resolved, plan.key)
    whole = build_token_streams(folder, tmp_path / "whole", resolved.tokenize, workers=1)
    assert file_hashes(layout.tokens) == file_hashes(tmp_path / "whole")
    assert run.manifest == whole.manifest and run.manifest["n_docs"] == 30


def test_a_row_group_unit_checks_its_rows(bpe_file, tmp_path):
    from corpus_dagster.lib.tokenizers import load_tokenizer
    from corpus_dagster.tokenize.shards import ShardTask, tokenize_shard

    folder = tmp_path / "shards" / "v1"
    manifest = write_sample_shards(sample_texts(10), folder, shard_rows=10, row_group_rows=4)
    entry = manifest["shards"][0]
    _layout, resolved = setup(tmp_path / "root", folder, bpe_file)
    tok = load_tokenizer(resolved.tokenize)
    task = ShardTask(0, folder / entry["name"], entry["sha256"], 4, row_group=1)
    assert len(tokenize_shard(task, tok, np.dtype("uint16"), 3).ids) == 4
    with pytest.raises(TokenStreamError, match="2 rows in row group 2, the plan says 4"):
        tokenize_shard(ShardTask(0, task.path, task.sha256, 4, row_group=2), tok, np.dtype("uint16"), 3)
    with pytest.raises(TokenStreamError, match="no row group 3"):
        tokenize_shard(ShardTask(0, task.path, task.sha256, 4, row_group=3), tok, np.dtype("uint16"), 3)
