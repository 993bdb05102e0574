"""Publishing as units (plan, one unit per shard, finish): any unit order gives the bytes of run_publish with
any worker count, a finished unit is never redone, a plan survives for a resume, and a unit without a plan
says what to run."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from corpus_factory import write_setup

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.core import records
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import Plan, finish_stage, plan_stage, run_stage_unit
from corpus_dagster.dedup.driver import run_global_dedup
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.minhash.driver import run_signatures
from corpus_dagster.publish import driver
from corpus_dagster.scrub.driver import run_scrub

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


# The stage's steps one by one, as the Dagster graph runs them (core.units with the publish stage object).
def plan_publish(layout: Layout, settings: Settings) -> Plan:
    return plan_stage(driver.PUBLISH_UNITS, layout, settings)


def run_publish_unit(layout: Layout, settings: Settings, key: str, unit: str) -> None:
    run_stage_unit(driver.PUBLISH_UNITS, layout, settings, key, unit)


def finish_publish(layout: Layout, settings: Settings, key: str) -> driver.PublishResult:
    return finish_stage(driver.PUBLISH_UNITS, layout, settings, Plan(key))


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    """A corpus scrubbed and ready to publish (built once); returns its config path."""
    root = tmp_path_factory.mktemp("upstream")
    config = write_setup(root, shard_rows=10)
    resolved = load_settings(config)
    layout = Layout.from_config(resolved.resolved)
    ids = []
    for src in load_ledger(layout.ledger):
        fetch_source(src, layout, resolved.ingest, now=NOW)
        ids.append(src.source_id)
    for sid in ids:
        run_clean_source(layout, resolved, sid)
        run_signatures(layout, resolved, sid)
    run_global_dedup(layout, resolved, ids)
    run_scrub(layout, resolved)
    return config


def fresh(upstream: Path, tmp_path: Path, name: str, **overrides) -> tuple[Settings, Layout]:
    """A private copy of the upstream artifacts root (same document ids), with config overrides."""
    source = Layout.from_config(load_settings(upstream).resolved).root
    art = tmp_path / name
    shutil.copytree(source, art, symlinks=True)
    settings = load_settings(upstream, overrides={"paths": {"artifacts": str(art)}, **overrides})
    return settings, Layout.from_config(settings.resolved)


def published(layout: Layout) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(layout.shards.iterdir())}


def stats(paths: list[Path]) -> list[tuple[int, int]]:
    return [(p.stat().st_ino, p.stat().st_mtime_ns) for p in paths]


def unit_files(layout: Layout, key: str, unit: str) -> list[Path]:
    """The shard and done-marker a unit wrote into the work folder."""
    work = driver.work_folder(layout, key)
    return [work.unit_path(unit, driver.SHARD), work.units_dir / f"{unit}.json"]


def test_units_in_reversed_order_publish_the_bytes_of_run_publish_with_1_and_2_workers(upstream, tmp_path):
    expected = {}
    for workers in (1, 2):
        resolved, layout = fresh(upstream, tmp_path, f"run{workers}", workers=workers)
        result = driver.run_publish(layout, resolved)
        expected[workers] = (published(layout), result)
    assert expected[1][0] == expected[2][0]
    assert len([n for n in expected[1][0] if n.endswith(".parquet")]) > 3

    resolved, layout = fresh(upstream, tmp_path, "units")
    plan = plan_publish(layout, resolved)
    assert plan.cached is False and list(plan.units) == sorted(plan.units) and len(plan.units) > 3
    for unit in reversed(plan.units):
        run_publish_unit(layout, resolved, plan.key, unit)
    work = driver.work_folder(layout, plan.key)
    for i, unit in enumerate(plan.units):  # unit times whose float sum is inexact: 0.1 + 0.2 + 0.0 ...
        marker = work.units_dir / f"{unit}.json"
        marker.write_text(json.dumps(json.loads(marker.read_text()) | {"seconds": (0.1, 0.2)[i] if i < 2 else 0.0}))
    result = finish_publish(layout, resolved, plan.key)
    assert published(layout) == expected[1][0]
    reference = expected[1][1]
    assert (result.manifest, result.sources, result.shards.shards, result.shards.n_docs, result.key) == (
        reference.manifest, reference.sources, reference.shards.shards, reference.shards.n_docs, reference.key)
    assert not result.cached and result.shards_rewritten
    assert not driver.work_folder(layout, plan.key).path.exists()
    assert [p.name for p in layout.shards.parent.iterdir()] == [layout.version]
    reused = driver.run_publish(layout, resolved)
    assert reused.cached  # the record was committed as run_publish commits it
    assert reused.shards.seconds == result.shards.seconds  # the build's time, as the record keeps it


def test_rerunning_a_finished_unit_does_nothing_and_a_damaged_one_is_redone(upstream, tmp_path):
    resolved, layout = fresh(upstream, tmp_path, "a")
    plan = plan_publish(layout, resolved)
    unit = plan.units[1]
    run_publish_unit(layout, resolved, plan.key, unit)
    files = unit_files(layout, plan.key, unit)
    before = stats(files)
    run_publish_unit(layout, resolved, plan.key, unit)
    assert stats(files) == before

    shard = files[0]
    good = shard.read_bytes()
    shard.write_bytes(good[:100])  # cut short (a full disk, a copy gone wrong): the unit writes it again
    run_publish_unit(layout, resolved, plan.key, unit)
    assert shard.read_bytes() == good

    for other in plan.units:
        run_publish_unit(layout, resolved, plan.key, other)
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF  # same size, other bytes: finish catches it before anything is published
    shard.write_bytes(bytes(data))
    with pytest.raises(driver.PublishUnitError, match=unit):
        finish_publish(layout, resolved, plan.key)
    assert not layout.shards.exists()
    run_publish_unit(layout, resolved, plan.key, unit)  # its done-marker no longer matches: it is redone
    assert shard.read_bytes() == good
    finish_publish(layout, resolved, plan.key)


def test_a_new_plan_of_the_same_key_resumes_with_the_finished_units(upstream, tmp_path):
    ref_resolved, ref_layout = fresh(upstream, tmp_path, "ref")
    driver.run_publish(ref_layout, ref_resolved)
    resolved, layout = fresh(upstream, tmp_path, "resume")
    plan = plan_publish(layout, resolved)
    half = plan.units[: len(plan.units) // 2]
    for unit in half:
        run_publish_unit(layout, resolved, plan.key, unit)
    finished = [f for unit in half for f in unit_files(layout, plan.key, unit)]
    before = stats(finished)

    records.begin(layout.shards.parent)  # what a stage start clears never includes the current work folder
    records.begin(layout.stage("publish"))
    again = plan_publish(layout, resolved)
    assert (again.key, again.units) == (plan.key, plan.units)
    assert stats(finished) == before
    driver.run_publish(layout, resolved)  # the remaining units, then finish; the finished ones are kept
    assert published(layout) == published(ref_layout)


def test_a_plan_of_another_key_removes_the_old_work_folder(upstream, tmp_path):
    resolved, layout = fresh(upstream, tmp_path, "a")
    old = plan_publish(layout, resolved)
    run_publish_unit(layout, resolved, old.key, old.units[0])
    other = load_settings(upstream, overrides={"paths": {"artifacts": str(layout.root)}, "shard_rows": 7})
    new = plan_publish(layout, other)
    assert new.key != old.key and len(new.units) != len(old.units)
    assert not driver.work_folder(layout, old.key).path.exists() and driver.work_folder(layout, new.key).path.is_dir()
    with pytest.raises(CorpusError, match="shards_plan"):
        finish_publish(layout, resolved, old.key)  # nothing planned under the old key any more


def test_a_unit_or_finish_without_a_plan_names_the_work_folder(upstream, tmp_path):
    resolved, layout = fresh(upstream, tmp_path, "a")
    key, _ = driver.publish_key(layout, resolved)
    work = driver.work_folder(layout, key).path
    with pytest.raises(CorpusError) as err:
        run_publish_unit(layout, resolved, key, "shard-00000")
    assert str(work) in str(err.value) and "run shards_plan (or run_publish) first" in str(err.value)
    with pytest.raises(CorpusError) as err:
        finish_publish(layout, resolved, key)
    assert str(work) in str(err.value) and "shards_plan" in str(err.value)

    plan = plan_publish(layout, resolved)
    with pytest.raises(driver.PublishUnitError, match=r"have no complete output.*run shards_write"):
        finish_publish(layout, resolved, plan.key)  # planned, but no unit ran
    with pytest.raises(driver.PublishUnitError, match="plans no unit"):
        run_publish_unit(layout, resolved, plan.key, "shard-99999")


def test_cached_and_manifest_only_plans_have_no_units_and_finish_returns_their_result(upstream, tmp_path):
    resolved, layout = fresh(upstream, tmp_path, "a")
    first = driver.run_publish(layout, resolved)
    shards = sorted(layout.shards.glob("shard-*.parquet"))
    before = stats(shards)

    plan = plan_publish(layout, resolved)
    assert plan.units == () and plan.cached is True
    cached = finish_publish(layout, resolved, plan.key)
    assert cached.cached and cached.key == first.key and cached.manifest == first.manifest
    assert cached.sources == first.sources and cached.shards.shards == first.manifest["shards"]

    # A setting outside the shards (it enters the manifest's config_sha256): only the manifest is rewritten.
    changed = load_settings(upstream, overrides={"paths": {"artifacts": str(layout.root)},
                                               "tokenize": {"max_file_bytes": 1 << 20}})
    plan = plan_publish(layout, changed)
    assert plan.units == () and plan.cached is False and plan.info == {"manifest_only": True}
    result = finish_publish(layout, changed, plan.key)
    assert not result.cached and not result.shards_rewritten and result.key == plan.key != first.key
    assert result.manifest["config_sha256"] != first.manifest["config_sha256"]
    assert result.manifest["shards"] == first.manifest["shards"]
    assert json.loads(layout.manifest.read_text()) == result.manifest
    assert stats(shards) == before
    assert plan_publish(layout, changed).cached is True
    assert [p.name for p in layout.shards.parent.iterdir()] == [layout.version]
