"""Dagster is the source of truth for which sources a global build covers; configs load when definitions load."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from corpus_dagster.core.errors import ConfigError
from corpus_dagster.core.records import RECORD
from corpus_dagster.defs import ASSETS, build_definitions
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources

PROJECT = Path(__file__).resolve().parents[2]


def _latest_metadata(instance: dg.DagsterInstance, key: str, partition: str | None = None) -> dict:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None), limit=1
    ).records
    meta = records[0].asset_materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def test_a_ledger_source_not_yet_materialized_is_left_out_and_named(setup_dir: Path) -> None:
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance, ["alpha", "beta"])
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, ["gamma"])  # the sensor saw it; no run yet
        result = materialize_global(corpus, instance)
        assert result.success
        meta = _latest_metadata(instance, "dedup")
    assert meta["sources"] == 2 and meta["sources_waiting"] == "gamma"
    shards = pl.read_parquet(corpus.layout().shards / "*.parquet")
    assert set(shards["source_id"].unique()) == {"alpha", "beta"}


def test_removing_a_source_partition_republishes_without_it(setup_dir: Path) -> None:
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
        assert "gamma" in set(pl.read_parquet(corpus.layout().shards / "*.parquet")["source_id"])
        instance.delete_dynamic_partition(SOURCE_PARTITIONS_NAME, "gamma")
        materialize_global(corpus, instance)
    assert set(pl.read_parquet(corpus.layout().shards / "*.parquet")["source_id"]) == {"alpha", "beta"}


def test_adding_a_source_recomputes_no_other_source(setup_dir: Path) -> None:
    """Rerunning every source partition after one was added must leave the others' stage records untouched."""
    corpus = CorpusConfig(config_path=str(setup_dir))
    layout = corpus.layout()
    lines = layout.ledger.read_text().splitlines(keepends=True)
    layout.ledger.write_text("".join(lines[:2]))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
        per_source = sorted(p for p in layout.root.glob(f"**/{RECORD}") if "alpha" in p.parts or "beta" in p.parts)
        assert len(per_source) == 8  # raw, clean, minhash, scrub for alpha and beta
        before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in per_source}
        layout.ledger.write_text("".join(lines))  # gamma added
        materialize_sources(corpus, instance)  # every partition runs again, as a refresh would
        materialize_global(corpus, instance)
        for sid in ("alpha", "beta"):
            assert _latest_metadata(instance, "clean_documents", sid)["cached"] is True
            assert _latest_metadata(instance, "minhash_signatures", sid)["cached"] is True
            assert _latest_metadata(instance, "raw_documents", sid)["unchanged"] is True
    after = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in per_source}
    assert after == before, "another source's per-source outputs were recomputed"


def test_an_invalid_config_fails_when_definitions_load_naming_file_and_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"refresh": {"cron": 5}, "workers": 0}))
    with pytest.raises(ConfigError) as err:
        build_definitions(CorpusConfig(config_path=str(bad)))
    assert str(bad) in str(err.value) and "$.refresh.cron" in str(err.value) and "$.workers" in str(err.value)


def test_importing_definitions_reads_no_config_and_dagster_reports_a_bad_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("refresh:\n  cron: 5\n")
    env = {**os.environ, "CORPUS_CONFIG": str(bad), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    imported = subprocess.run([sys.executable, "-c", "import corpus_dagster.definitions"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr[-2000:]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", str(PROJECT / "workspace.yaml")],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode != 0
    assert "$.refresh.cron" in out.stdout + out.stderr and str(bad) in out.stdout + out.stderr


def test_the_refresh_cron_comes_from_the_loaded_config(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"refresh": {"cron": "15 4 * * 1", "timezone": "Europe/Paris"}, "workers": 3}))
    defs = build_definitions(CorpusConfig(config_path=str(cfg)))
    schedule = defs.resolve_schedule_def("refresh_schedule")
    assert schedule.cron_schedule == "15 4 * * 1" and schedule.execution_timezone == "Europe/Paris"


def test_every_asset_declares_its_code_version() -> None:
    for assets_def in ASSETS:
        for key in assets_def.keys:
            assert assets_def.code_versions_by_key[key], f"{key.to_user_string()} has no code_version"
