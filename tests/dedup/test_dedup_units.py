"""The global dedup step as plan / units / finish: any unit order, any process, resumable, same bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path

import pytest
from dedup_factory import NEAR_KEYS, mutate, plant_clean, random_doc

from corpus_dagster.core import records
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan, finish_stage, plan_next_stage, plan_stage, run_stage_unit
from corpus_dagster.core.work import WorkFolder
from corpus_dagster.dedup import units
from corpus_dagster.dedup.driver import DedupResult, run_global_dedup
from corpus_dagster.dedup.key import DEDUP, TABLES
from corpus_dagster.dedup.units import DEDUP_UNITS, DedupStage

SOURCES = ("alpha", "beta")


# The stage's steps one by one, as the Dagster graph runs them (core.units with the dedup's stage object).
def plan_dedup(layout: Layout, settings: Settings, sources: list[str]) -> Plan:
    return plan_stage(DedupStage(tuple(sorted(sources))), layout, settings)


def run_dedup_unit(layout: Layout, settings: Settings, key: str, unit: str) -> None:
    run_stage_unit(DEDUP_UNITS, layout, settings, key, unit)


def plan_verify(layout: Layout, settings: Settings, key: str) -> Plan:
    return plan_next_stage(DEDUP_UNITS, layout, settings, Plan(key))


def finish_dedup(layout: Layout, settings: Settings, key: str) -> DedupResult:
    return finish_stage(DEDUP_UNITS, layout, settings, Plan(key))


def units_corpus(seed: int = 5) -> tuple[dict[str, list[str]], list[str]]:
    """Two sources with exact copies, near-copy families of three (chains), unrelated documents and two
    documents that quote a protected text; returns (corpus, protected texts)."""
    rng = random.Random(seed)
    protected = [random_doc(rng, 40) for _ in range(3)]
    corpus: dict[str, list[str]] = {"alpha": [], "beta": []}
    for f in range(40):
        base = random_doc(rng, rng.randint(60, 120))
        first = mutate(rng, base, rng.randint(1, 4))
        second = mutate(rng, first, rng.randint(1, 4))
        corpus[SOURCES[f % 2]].extend([base, second])
        corpus[SOURCES[(f + 1) % 2]].append(first)
        if f % 5 == 0:
            corpus[SOURCES[(f + 1) % 2]].append(base)  # an exact copy in the other source
    for _ in range(30):
        corpus[SOURCES[rng.randrange(2)]].append(random_doc(rng, rng.randint(30, 90)))
    corpus["alpha"].append(random_doc(rng, 30) + " " + protected[0] + " " + random_doc(rng, 10))
    corpus["beta"].append(" ".join(protected[2].split(" ")[5:25]) + " " + random_doc(rng, 50))
    return corpus, protected


def build_root(root: Path, workers: int = 1, **dedup) -> tuple[Layout, Settings]:
    """An artifacts root holding the clean stage of the units corpus; (layout, settings)."""
    corpus, protected = units_corpus()
    eval_file = root / "eval.jsonl"
    root.mkdir(parents=True, exist_ok=True)
    eval_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in protected), encoding="utf-8")
    settings = load_settings(overrides={
        "paths": {"artifacts": str(root / "artifacts")},
        "workers": workers,
        "dedup": {"protected_sets": [{"name": "evalset", "path": str(eval_file)}],
                  **{k: v for k, v in dedup.items() if k not in NEAR_KEYS}},
        "near_dup": {k: v for k, v in dedup.items() if k in NEAR_KEYS},
    })
    layout = Layout.from_config(settings.resolved)
    for sid, texts in corpus.items():
        plant_clean(layout, sid, texts)
    return layout, settings


def table_hashes(layout: Layout) -> dict[str, str]:
    """sha256 of the three dedup tables and the outputs part of the stage record (names without the key,
    sorted: the key holds the protected file's path, which differs between two roots)."""
    folder = layout.stage(DEDUP)
    record = records.read_record(folder)
    out = {t: hashlib.sha256((folder / record.key / t).read_bytes()).hexdigest() for t in TABLES}
    out["record_outputs"] = json.dumps(
        sorted([n.split("/", 1)[1], e["sha256"], e["bytes"]] for n, e in record.outputs.items())
    )
    return out


def stable_stats(result: DedupResult) -> dict:
    """The record's stats without the per-process timings."""
    return {k: v for k, v in result.stats.items() if k not in ("seconds", "peak_rss_mb")}


def reference(root: Path, workers: int, **dedup) -> tuple[dict[str, str], DedupResult]:
    """Table hashes and stats of `run_global_dedup` on a fresh root."""
    layout, resolved = build_root(root, workers, **dedup)
    stats = run_global_dedup(layout, resolved, list(SOURCES))
    return table_hashes(layout), stats


def run_by_hand(layout: Layout, resolved: Settings, units_order=reversed) -> DedupResult:
    """plan, every LSH unit in its own call, verification plan, every verification unit, finish."""
    plan = plan_dedup(layout, resolved, list(SOURCES))
    assert plan.cached is False and plan.units == tuple(f"lsh-band-{b:03d}" for b in range(32))  # banded for 0.7
    for unit in units_order(plan.units):
        run_dedup_unit(layout, resolved, plan.key, unit)
    verify = plan_verify(layout, resolved, plan.key)
    for unit in units_order(verify.units):
        run_dedup_unit(layout, resolved, plan.key, unit)
    return finish_dedup(layout, resolved, plan.key)


CHUNK = {"verify_chunk_pairs": 10}  # several verification units on the small corpus


@pytest.mark.parametrize("workers", [1, 2])
def test_units_in_reversed_order_write_the_bytes_of_run_global_dedup(tmp_path: Path, workers: int) -> None:
    want, want_stats = reference(tmp_path / "ref", workers)
    layout, resolved = build_root(tmp_path / "units", workers, **CHUNK)
    stats = run_by_hand(layout, resolved)
    assert table_hashes(layout) == want
    assert stable_stats(stats) == stable_stats(want_stats) and stats.cached is False
    assert want_stats.decontaminated == 2 and want_stats.exact_dropped > 0 and want_stats.near_dropped > 0
    assert sorted(stats.seconds) == ["blocks", "components", "decontaminate", "exact", "lsh", "verify", "write"]
    assert not list(layout.stage(DEDUP).glob(".work-*"))  # the finish removed its work folder
    assert run_global_dedup(layout, resolved, list(SOURCES)).cached is True


def _lsh_outputs(work: WorkFolder) -> list[Path]:
    return sorted(work.units_dir.glob("lsh-band-*.pairs.npy"))


def test_rerunning_a_finished_unit_does_nothing(tmp_path: Path) -> None:
    layout, resolved = build_root(tmp_path, 1, **CHUNK)
    plan = plan_dedup(layout, resolved, list(SOURCES))
    work = units.work_folder(layout, plan.key)
    for unit in plan.units:
        run_dedup_unit(layout, resolved, plan.key, unit)
    verify = plan_verify(layout, resolved, plan.key)
    assert len(verify.units) > 1
    run_dedup_unit(layout, resolved, plan.key, verify.units[0])
    outputs = [work.unit_path("lsh-band-000", "pairs.npy"), work.unit_path("verify-00000", "counts.npy")]
    before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in outputs]
    run_dedup_unit(layout, resolved, plan.key, plan.units[0])
    run_dedup_unit(layout, resolved, plan.key, verify.units[0])
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in outputs] == before
    assert plan_verify(layout, resolved, plan.key).units == verify.units


def test_a_fresh_plan_of_the_same_key_keeps_finished_units(tmp_path: Path) -> None:
    want, _ = reference(tmp_path / "ref", 1)
    layout, resolved = build_root(tmp_path / "units", 1, **CHUNK)
    plan = plan_dedup(layout, resolved, list(SOURCES))
    work = units.work_folder(layout, plan.key)
    half = plan.units[: len(plan.units) // 2]
    for unit in half:
        run_dedup_unit(layout, resolved, plan.key, unit)
    kept = {p: p.stat().st_ino for p in [*_lsh_outputs(work), work.plan_path()]}
    stale = layout.stage(DEDUP) / ".work-0123456789abcdef"  # another key's work folder
    stale.mkdir()
    killed_plan = work.path / ".verify.json.tmp-0123456789ab"  # a killed plan step's temp file
    killed_plan.write_bytes(b"partial")
    writing = work.units_dir / ".lsh-band-015.pairs.tmp-0123456789ab.npy"  # a unit being written elsewhere
    writing.write_bytes(b"partial")
    again = plan_dedup(layout, resolved, list(SOURCES))
    assert again == plan
    assert {p: p.stat().st_ino for p in kept} == kept  # plan and finished units reused, not recomputed
    assert work.pending(again.units) == plan.units[len(half):]
    assert not stale.exists() and not killed_plan.exists()
    assert writing.exists()  # a plan never removes a unit's files: the unit may still be running
    run_by_hand(layout, resolved, units_order=list)
    assert table_hashes(layout) == want


def test_a_unit_or_step_without_its_plan_names_the_work_folder(tmp_path: Path) -> None:
    layout, resolved = build_root(tmp_path, 1)
    work = units.work_folder(layout, "0123456789abcdef").path
    for call in (
        lambda: run_dedup_unit(layout, resolved, "0123456789abcdef", "lsh-band-000"),
        lambda: plan_verify(layout, resolved, "0123456789abcdef"),
        lambda: finish_dedup(layout, resolved, "0123456789abcdef"),
    ):
        with pytest.raises(CorpusError, match=str(work)):
            call()
    plan = plan_dedup(layout, resolved, list(SOURCES))
    with pytest.raises(units.DedupWorkError, match=r"verify\.json.*dedup_verify_plan"):
        run_dedup_unit(layout, resolved, plan.key, "verify-00000")
    with pytest.raises(units.DedupWorkError, match="lsh-band-000.*run the dedup units"):
        plan_verify(layout, resolved, plan.key)
    with pytest.raises(units.DedupWorkError, match="lsh-band-999"):
        run_dedup_unit(layout, resolved, plan.key, "lsh-band-999")


def test_a_cached_dedup_plans_no_units(tmp_path: Path) -> None:
    layout, resolved = build_root(tmp_path, 1, verify=False)
    plan = plan_dedup(layout, resolved, list(SOURCES))
    for unit in plan.units:
        run_dedup_unit(layout, resolved, plan.key, unit)
    # verify: false merges every candidate pair, yet the graph the analysis reads is still scored
    verify = plan_verify(layout, resolved, plan.key)
    assert verify.units
    for unit in verify.units:
        run_dedup_unit(layout, resolved, plan.key, unit)
    stats = finish_dedup(layout, resolved, plan.key)
    cached = plan_dedup(layout, resolved, list(SOURCES))
    assert cached.units == () and cached.key == plan.key and cached.cached is True
    assert finish_dedup(layout, resolved, plan.key) == dataclasses.replace(stats, cached=True)
    assert not list(layout.stage(DEDUP).glob(".work-*"))


def test_an_incomplete_plan_is_recomputed_from_scratch(tmp_path: Path) -> None:
    layout, resolved = build_root(tmp_path, 1)
    plan = plan_dedup(layout, resolved, list(SOURCES))
    work = units.work_folder(layout, plan.key)
    run_dedup_unit(layout, resolved, plan.key, plan.units[0])
    (work.path / "band_gids.npy").unlink()
    (work.path / "marker").write_text("from the incomplete plan")
    assert plan_dedup(layout, resolved, list(SOURCES)) == plan
    assert (work.path / "band_gids.npy").exists() and work.plan_path().exists()
    assert not (work.path / "marker").exists() and _lsh_outputs(work) == []  # the folder was started afresh
