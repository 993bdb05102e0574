"""The whole graph with the artifacts root on an object store (fsspec `memory://` here; S3 in the cluster test)
gives the bytes of a local-disk run of the same sources and ledger, and a machine that has never seen the
build pulls every published file from the store alone."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import dagster as dg
import fsspec
import yaml
from corpus_factory import write_setup
from dagster_runs import build_in_process, published_bytes

from corpus_dagster.core.config import load_config
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.storage import Store
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources


def store_setup(config: Path, tmp_path: Path) -> tuple[str, Path]:
    """A fresh `memory://` artifacts URL holding the local setup's ledger, and a copy of the config naming it."""
    url = f"memory://corpus-{uuid.uuid4().hex[:8]}/artifacts"
    ledger = Path(yaml.safe_load(config.read_text())["paths"]["artifacts"]) / "corpus" / "LEDGER.jsonl"
    fsspec.filesystem("memory").put_file(str(ledger), f"{url}/corpus/LEDGER.jsonl")
    cfg = yaml.safe_load(config.read_text())
    cfg["paths"]["artifacts"] = url
    remote_config = tmp_path / "store.yaml"
    remote_config.write_text(yaml.safe_dump(cfg))
    return url, remote_config


def test_a_build_on_an_object_store_gives_the_local_bytes(tmp_path, monkeypatch, capsys):
    config = write_setup(tmp_path / "local", workers=1)
    expected = published_bytes(build_in_process(config).layout().root)

    url, remote_config = store_setup(config, tmp_path)
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "mirror-a"))
    corpus = CorpusConfig(config_path=str(remote_config))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    assert materialize_global(corpus, instance).success
    mirror_a = corpus.layout().root
    assert mirror_a.is_relative_to(tmp_path / "mirror-a")
    assert published_bytes(mirror_a) == expected

    # A machine with an empty mirror sees the whole build in the store, and a rerun there reuses it all.
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "mirror-b"))
    layout_b = Layout.from_config(load_config(str(remote_config)))
    store_b = Store(url, layout_b.root)
    pulled = store_b.pull()
    assert pulled.files > 0 and published_bytes(layout_b.root) == expected
    # what a killed run of another key left in the store, named by no record: cleared on the next start, as
    # the local layout clears its leftovers, and the removal reaches the store
    stray = "stages/tokens/.work-0123456789abcdef/units/u-0.docs.arrow"
    fsspec.filesystem("memory").pipe_file(f"{url}/{stray}", b"half a unit")
    store_b.pull()
    rerun = materialize_global(corpus, instance)
    assert rerun.success
    assert stray not in store_b.listing()
    before = store_b.listing()
    rerun = materialize_global(corpus, instance)
    assert rerun.success
    after = store_b.listing()
    assert after == before  # nothing rewritten: every step found its outputs in the pulled mirror

    # A check that reads only paths (corpus.layout()) on a machine whose mirror is empty finds the build too.
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "mirror-c"))
    from corpus_dagster.defs.tokenize import token_counts_consistent

    result = token_counts_consistent(corpus=CorpusConfig(config_path=str(remote_config)))
    assert result.passed, result.metadata
    # and so does the explain CLI, on another empty mirror
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "mirror-d"))
    from corpus_dagster.cli import explain as explain_cli

    assert explain_cli.main(["alpha:0", "--config", str(remote_config), "--json"]) == 0
    assert '"alpha:0"' in capsys.readouterr().out
    assert published_bytes(layout_b.root) == expected


def test_the_ledger_sensor_reads_the_ledger_in_the_store(tmp_path, monkeypatch):
    """A sensor runs in the daemon, on a machine that may have no mirror yet: it pulls the ledger alone and
    follows the store's ledger as another machine changes it."""
    from corpus_dagster.core.reconcile import read_ledger_rows
    from corpus_dagster.defs.automation import ledger_sensor, refresh_schedule_for
    from corpus_dagster.defs.partitions import SOURCE_PARTITIONS_NAME

    config = write_setup(tmp_path / "local", workers=1)
    url, remote_config = store_setup(config, tmp_path)
    ledger = (tmp_path / "local" / "artifacts" / "corpus" / "LEDGER.jsonl").read_bytes()
    memory = fsspec.filesystem("memory")
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "daemon-mirror"))
    corpus = CorpusConfig(config_path=str(remote_config))
    with dg.instance_for_test() as instance:
        added = ledger_sensor(dg.build_sensor_context(instance=instance, resources={"corpus": corpus}))
        assert [sorted(r.partition_keys) for r in added.dynamic_partitions_requests] == [["alpha", "beta", "gamma"]]
        mirror = corpus.layout().root
        assert sorted(p.relative_to(mirror).as_posix() for p in mirror.rglob("*") if p.is_file()
                      and not p.name.startswith(".")) == ["corpus/LEDGER.jsonl"]  # the ledger, nothing else
        instance.add_dynamic_partitions(SOURCE_PARTITIONS_NAME, ["alpha", "beta", "gamma"])
        rows = [line for line in ledger.decode().splitlines(keepends=True) if '"gamma"' not in line]
        memory.pipe_file(f"{url}/corpus/LEDGER.jsonl", "".join(rows).encode())  # another machine edits it
        removed = ledger_sensor(dg.build_sensor_context(instance=instance, resources={"corpus": corpus}))
        assert [(type(r).__name__, list(r.partition_keys)) for r in removed.dynamic_partitions_requests] == [
            ("DeleteDynamicPartitionsRequest", ["gamma"])]
        assert read_ledger_rows(corpus.layout().ledger).ids == ["alpha", "beta"]
        # the refresh schedule reads the ledger from the store too: beta's row leaves it on another machine
        only_alpha = [line for line in rows if '"beta"' not in line]
        memory.pipe_file(f"{url}/corpus/LEDGER.jsonl", "".join(only_alpha).encode())
        schedule = refresh_schedule_for("0 3 * * *", "UTC")
        ctx = dg.build_schedule_context(instance=instance, resources={"corpus": corpus},
                                        scheduled_execution_time=dt.datetime(2026, 1, 1, 3, tzinfo=dt.UTC))
        assert [r.partition_key for r in schedule(ctx)] == ["alpha"]
