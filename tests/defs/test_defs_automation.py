"""Honest automation, through the Dagster instance: a broken ledger fails the tick and blocks nothing valid,
an unchanged refetch rebuilds nothing, removing a source leaves the automation evaluations healthy."""

import json
from pathlib import Path

import dagster as dg
import pytest

from corpus_dagster.core.errors import LedgerError
from corpus_dagster.defs import ASSETS, CHECKS, build_definitions
from corpus_dagster.defs.automation import ledger_sensor, read_ledger_rows
from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources

PROJECT = Path(__file__).resolve().parents[2]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines))


def _tick(instance, corpus, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"corpus": corpus})
    return ledger_sensor(ctx)


def test_invalid_row_fails_the_tick_with_file_line_and_path_while_valid_rows_sync(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    ledger = corpus.layout().ledger
    rows = _rows(ledger)
    bad = dict(rows[2], source_id="../x")
    _write(ledger, [json.dumps(rows[0]), json.dumps(bad), json.dumps(rows[1])])
    instance = dg.DagsterInstance.ephemeral()
    first = _tick(instance, corpus)
    # the valid rows are added and fetched although line 2 is broken
    assert [r.partition_key for r in first.run_requests] == ["alpha", "beta"]
    (add,) = first.dynamic_partitions_requests
    instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, list(add.partition_keys))
    # nothing valid left to do: the tick fails (it is not a quiet "0 runs requested" skip)
    with pytest.raises(LedgerError) as err:
        _tick(instance, corpus, first.cursor)
    message = str(err.value)
    assert str(ledger) in message and "line 2:" in message and "$.source_id" in message


def test_an_invalid_row_never_removes_the_source_it_names(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    ledger = corpus.layout().ledger
    rows = _rows(ledger)
    instance = dg.DagsterInstance.ephemeral()
    first = _tick(instance, corpus)
    instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, ["alpha", "beta", "gamma"])
    broken_gamma = dict(rows[2], format="nope")
    _write(ledger, [json.dumps(rows[0]), json.dumps(rows[1]), json.dumps(broken_gamma)])
    with pytest.raises(LedgerError, match=r"line 3: \$\.format"):
        _tick(instance, corpus, first.cursor)
    _write(ledger, [json.dumps(rows[0]), json.dumps(rows[1]), "{not json"])  # a row naming no source at all
    with pytest.raises(LedgerError, match="line 3: not valid JSON"):
        _tick(instance, corpus, first.cursor)
    assert sorted(instance.get_dynamic_partitions(SOURCE_PARTITIONS_NAME)) == ["alpha", "beta", "gamma"]


def test_rows_are_validated_one_by_one_and_duplicates_named(tmp_path):
    ledger = tmp_path / "LEDGER.jsonl"
    ok = {"source_id": "a", "urls": ["file:///x.jsonl"], "format": "jsonl", "license_spdx": "MIT"}
    _write(ledger, [json.dumps(ok), "", json.dumps(ok), json.dumps({"source_id": "b"})])
    rows = read_ledger_rows(ledger)
    assert [s.source_id for s in rows.sources] == ["a"]
    assert any(p.startswith("line 3: $.source_id: duplicate") for p in rows.problems)
    assert any(p.startswith("line 4:") for p in rows.problems) and rows.named_by_invalid == {"b"}


def _count(instance, key: str, partition: str | None = None) -> int:
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None)
    return len(instance.fetch_materializations(flt, limit=1000).records)


def test_unchanged_refetch_requests_nothing_downstream_and_a_changed_one_does(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"corpus": corpus})
    raw = [a for a in ASSETS if a.partitions_def is not None][:1]
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance).cursor
        dg.materialize(raw, partition_key="gamma", instance=instance, resources={"corpus": corpus})  # a scheduled refetch
        assert _count(instance, "raw_documents", "gamma") == 2
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        assert result.total_requested == 0, [str(r) for r in result.results if r.true_subset.size]
        # the bytes of one gamma file change: gamma's downstream (and only gamma's) is requested
        doc = sorted((setup_dir.parent / "sources" / "gamma").glob("*.txt"))[0]
        doc.write_text(doc.read_text() + " An added sentence about the river library.", encoding="utf-8")
        dg.materialize(raw, partition_key="gamma", instance=instance, resources={"corpus": corpus})
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
        assert result.get_requested_partitions(dg.AssetKey("clean_documents")) == {"gamma"}


def test_removing_a_source_keeps_automation_evaluations_healthy(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    defs = build_definitions(corpus)
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance).cursor
        ledger = corpus.layout().ledger
        _write(ledger, ledger.read_text().splitlines()[:2])  # gamma leaves the ledger
        result = _tick(instance, corpus, None)
        (delete,) = [r for r in result.dynamic_partitions_requests if isinstance(r, dg.DeleteDynamicPartitionsRequest)]
        assert list(delete.partition_keys) == ["gamma"]
        assert [r.job_name for r in result.run_requests] == ["build_corpus"]
        instance.delete_dynamic_partition(SOURCE_PARTITIONS_NAME, "gamma")
        # the Automation tab evaluates with the stored cursor: it must not fail on the deleted partition key
        for _ in range(2):
            cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor).cursor
        # the data stays until a corpus without the source is published (the run the tick requested)
        assert corpus.layout().stage("clean", "gamma").exists()
        materialize_global(corpus, instance)
        assert not corpus.layout().stage("clean", "gamma").exists()
        assert not corpus.layout().raw_source("gamma").exists()
        assert corpus.layout().stage("clean", "alpha").exists()


def test_every_downstream_asset_waits_for_new_data() -> None:
    conditions = {k.to_user_string(): a.automation_conditions_by_key.get(k) for a in ASSETS for k in a.keys
                  if a.asset_deps[k]}
    assert "review_sample" in conditions
    assert {name: c.get_label() if c else None for name, c in conditions.items()} == {
        name: "eager_on_new_data" for name in conditions}


def test_rematerializing_unchanged_upstream_launches_nothing(setup_dir):
    corpus = CorpusConfig(config_path=str(setup_dir))
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"corpus": corpus})
    by_name = {k.to_user_string(): a for a in ASSETS for k in a.keys}
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
        dg.materialize([by_name["review_sample"]], instance=instance, resources={"corpus": corpus})
        cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance).cursor
        cursor = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor).cursor
        # a person re-materializes clean data and dedup that did not change: same data versions
        dg.materialize([by_name["clean_documents"]], partition_key="alpha", instance=instance,
                       resources={"corpus": corpus})
        dg.materialize([by_name["dedup"]], instance=instance, resources={"corpus": corpus})
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        assert result.total_requested == 0, [str(r.asset_key) for r in result.results if r.true_subset.size]
