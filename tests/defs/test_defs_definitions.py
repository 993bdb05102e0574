"""Definitions load and validate; the ledger sensor, the refresh schedule and automation behave."""

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.defs import ASSETS, CHECKS, build_definitions
from corpus_dagster.defs.automation import ledger_sensor, refresh_schedule_for
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_sources

PROJECT = Path(__file__).resolve().parents[2]


def test_definitions_validate_cli(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]


def test_assets_grouped_by_stage_with_checks():
    defs = build_definitions(CorpusConfig(config_path=str(PROJECT / "configs" / "demo.yaml")))
    graph = defs.resolve_asset_graph()
    groups = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    assert groups["raw_documents"] == "ingest"
    assert groups["clean_documents"] == "clean" and groups["rejects"] == "clean"
    assert groups["shards"] == "publish" and groups["manifest"] == "publish"
    assert groups["minhash_signatures"] == "dedup" and groups["dedup"] == "dedup"
    assert groups["scrubbed"] == "scrub" and groups["token_streams"] == "tokenize"
    assert graph.get(dg.AssetKey("raw_documents")).partitions_def.name == SOURCE_PARTITIONS_NAME
    assert defs.resolve_schedule_def("refresh_schedule").cron_schedule == "0 3 * * *"
    assert defs.resolve_sensor_def("ledger_sensor") is not None


def _ledger_rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_ledger_sensor_adds_removes_and_refetches_changed(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    ledger = corpus.layout().ledger
    rows = _ledger_rows(ledger)
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor=None):
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"corpus": corpus})
        return ledger_sensor(ctx)

    first = tick()
    assert [r.partition_key for r in first.run_requests] == ["alpha", "beta", "gamma"]
    (add,) = first.dynamic_partitions_requests
    assert list(add.partition_keys) == ["alpha", "beta", "gamma"]
    instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, list(add.partition_keys))
    assert isinstance(tick(first.cursor), dg.SkipReason)

    rows[1]["license_spdx"] = "Apache-2.0"  # beta changed
    _write_rows(ledger, [rows[1], rows[2]])  # alpha removed
    third = tick(first.cursor)
    # beta is refetched; alpha's removal rebuilds the corpus without it
    assert [(r.job_name, r.partition_key) for r in third.run_requests] == [("ingest_sources", "beta"), ("build_corpus", None)]
    (delete,) = third.dynamic_partitions_requests
    assert list(delete.partition_keys) == ["alpha"]


def test_ledger_sensor_fails_the_tick_on_an_invalid_ledger(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    corpus.layout().ledger.write_text('{"source_id": "../x"}\n')
    ctx = dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), resources={"corpus": corpus})
    with pytest.raises(LedgerError, match=r"line 1: \$\.source_id"):
        ledger_sensor(ctx)


def test_refresh_schedule_requests_every_source_in_the_ledger(setup_dir):
    refresh_schedule = refresh_schedule_for("0 3 * * *", "UTC")
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        ctx = dg.build_schedule_context(instance=instance, resources={"corpus": corpus},
                                        scheduled_execution_time=dt.datetime(2026, 11, 29, 3, 0))
        assert isinstance(refresh_schedule(ctx), dg.SkipReason)
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, ["beta", "alpha", "gone"])  # gone: no ledger row
        requests = refresh_schedule(ctx)
    assert [(r.partition_key, r.run_key) for r in requests] == [("alpha", "refresh:alpha:20261129T0300"),
                                                              ("beta", "refresh:beta:20261129T0300")]


def _materialization_count(instance, key: str, partition: str) -> int:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition]), limit=100
    )
    return len(records.records)


def test_adding_a_source_never_recomputes_other_sources(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    layout = corpus.layout()
    ledger = layout.ledger
    rows = _ledger_rows(ledger)
    _write_rows(ledger, rows[:2])
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        records = sorted(p for p in layout.root.glob("**/_RECORD.json") if {"alpha", "beta"} & set(p.parts))
        before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in records}
        _write_rows(ledger, rows)  # gamma added
        materialize_sources(corpus, instance, ["gamma"])
        for key in ("raw_documents", "clean_documents", "rejects", "minhash_signatures"):
            assert _materialization_count(instance, key, "alpha") == 1
            assert _materialization_count(instance, key, "gamma") == 1
        # Nothing of alpha or beta was rewritten on disk (a recompute rewrites its stage record).
        assert len(records) == 6 and {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in records} == before
        # Automation: after gamma's raw documents change again, only gamma's downstream partitions are requested.
        defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"corpus": corpus})
        cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance).cursor
        doc = sorted((setup_dir.parent / "sources" / "gamma").glob("*.txt"))[0]
        doc.write_text(doc.read_text() + " One more sentence.", encoding="utf-8")  # new bytes: a new data version
        dg.materialize([a for a in ASSETS if a.partitions_def is not None][:1], partition_key="gamma", instance=instance,
                       resources={"corpus": corpus})
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        requested = result.get_requested_partitions(dg.AssetKey("clean_documents"))
        assert requested == {"gamma"}
