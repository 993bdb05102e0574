"""Deleting a source keeps the UI healthy: stored automation evaluations naming the deleted partition are
dropped (the Automation tab fails on them, dagster-io/dagster#33910); fetch reports progress at INFO."""

import datetime
import json
from pathlib import Path

import dagster as dg
from dagster._core.definitions.declarative_automation.serialized_objects import (
    AutomationConditionEvaluationWithRunIds,
)

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.defs import ASSETS, CHECKS
from corpus_dagster.defs.automation import ledger_sensor
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_sources
from corpus_dagster.ingest.driver import fetch_source


def _store_evaluations(instance: dg.DagsterInstance, defs: dg.Definitions) -> int:
    """Store evaluations as the automation daemon does (they name the partitions they evaluated)."""
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    with dg.partition_loading_context(datetime.datetime.now(datetime.UTC), instance):
        evaluations = [AutomationConditionEvaluationWithRunIds(r.serializable_evaluation, frozenset()) for r in result.results]
        instance.schedule_storage.add_auto_materialize_asset_evaluations(1, evaluations)
    return len(evaluations)


def test_removing_a_source_drops_evaluations_that_name_its_partition(setup_dir: Path) -> None:
    corpus = CorpusConfig(config_path=str(setup_dir))
    ledger = corpus.layout().ledger
    rows = [json.loads(x) for x in ledger.read_text().splitlines()]
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"corpus": corpus})
        assert _store_evaluations(instance, defs) > 0
        key = dg.AssetKey("clean_documents")
        assert instance.schedule_storage.get_auto_materialize_asset_evaluations(key=key, limit=10)
        tick = ledger_sensor(dg.build_sensor_context(instance=instance, resources={"corpus": corpus}))
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, list(request.partition_keys))
        ledger.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))  # gamma removed
        cursor = tick.cursor
        removal = ledger_sensor(dg.build_sensor_context(instance=instance, cursor=cursor, resources={"corpus": corpus}))
        assert [list(r.partition_keys) for r in removal.dynamic_partitions_requests] == [["gamma"]]
        assert instance.schedule_storage.get_auto_materialize_asset_evaluations(key=key, limit=10) == []


def test_fetch_logs_progress_lines_at_info(setup_dir: Path) -> None:
    settings = load_settings(setup_dir)
    layout = Layout.from_config(settings.resolved)
    source = next(s for s in load_ledger(layout.ledger) if s.source_id == "alpha")

    lines: list[str] = []
    fetch_source(source, layout, settings.ingest, log=lines.append, progress_interval_s=1e-9)
    progress = [line for line in lines if line.startswith("fetch alpha:")]
    assert len(progress) >= 40 and "documents" in progress[-1] and progress[-1].endswith("done")
