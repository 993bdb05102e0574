"""The whole graph on Dagster's dask executor against a `distributed.LocalCluster` of 2 worker processes,
the global fan-outs (LSH bands, verification chunks, shards, token files) spread over 2 steps each, gives
the same bytes as the in-process run of the same sources and ledger.

The dask run goes through the CLI's own path (`RunPool`: one run per source, then `build_corpus`, each
`execute_job` on the job's configured executor), so every step runs in a dask worker process.
"""

from __future__ import annotations

import os
import shutil

import dagster as dg
import pytest
import yaml

pytest.importorskip("dagster_dask")
distributed = pytest.importorskip("distributed")

from corpus_factory import write_setup  # noqa: E402
from dagster_runs import build_in_process, failures, published_bytes  # noqa: E402

from corpus_dagster.core.ledger import load_ledger  # noqa: E402
from corpus_dagster.defs.resources import CorpusConfig  # noqa: E402
from corpus_dagster.defs.runner import GLOBAL_JOB, source_pool  # noqa: E402

FAN_OUT_STEPS = ("dedup_lsh_1", "dedup_verify_1", "shards_write_1", "token_streams_encode_1")


@pytest.fixture(scope="module")
def cluster():
    import dask

    # As docs/scaling.md asks of a cluster: non-daemonic workers, so a step may start `workers` processes
    # (the rebuild checks use the other worker count, 2 here).
    with dask.config.set({"distributed.worker.daemon": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield c, set(client.run(os.getpid).values())


def test_dask_executor_with_fan_out_gives_the_in_process_bytes(tmp_path, cluster):
    local, worker_pids = cluster
    config = write_setup(tmp_path / "local", workers=1)
    local_corpus = build_in_process(config)
    expected = published_bytes(local_corpus.layout().root)
    assert any(k.startswith("tokens/") for k in expected) and any(k.endswith(".parquet") for k in expected)

    # Same sources and ledger, another artifacts root, every step on the cluster, each fan-out over 2 steps.
    artifacts = tmp_path / "dask" / "artifacts"
    (artifacts / "corpus").mkdir(parents=True)
    shutil.copy(local_corpus.layout().ledger, artifacts / "corpus" / "LEDGER.jsonl")
    cfg = yaml.safe_load(config.read_text())
    cfg["paths"]["artifacts"] = str(artifacts)
    cfg["executor"] = {"kind": "dask", "dask_address": local.scheduler_address, "fan_out": 2}
    dask_config = tmp_path / "dask" / "corpus.yaml"
    dask_config.write_text(yaml.safe_dump(cfg))
    corpus = CorpusConfig(config_path=str(dask_config))
    ids = [s.source_id for s in load_ledger(corpus.layout().ledger)]

    (tmp_path / "dagster_home").mkdir()
    # No compute-log capture: Dagster's local capture runs `tail -F` per step and waits up to 2 x 30 s for it
    # to end on SIGTERM; in one full-suite CI run the dask workers' tails ignored SIGTERM and every step
    # took 60 s. Events (what this test reads) do not depend on it.
    no_compute_logs = {"compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                                        "class": "NoOpComputeLogManager"}}
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home"), overrides=no_compute_logs) as instance:
        with source_pool(corpus, instance, ids) as pool:
            sources = pool.run_sources(ids)
            corpus_run = pool.run_global()
        assert [o.success for o in sources] == [True] * len(ids), failures(instance, sources[0].run_id)
        assert corpus_run.success, failures(instance, corpus_run.run_id)
        steps = {}
        for record in instance.get_records_for_run(corpus_run.run_id).records:
            event = record.event_log_entry.dagster_event
            if event is not None and event.event_type_value == "STEP_SUCCESS":
                steps[event.step_key] = event.pid
        run = instance.get_run_by_id(corpus_run.run_id)
        assert run.job_name == GLOBAL_JOB

    # Every fan-out ran as 2 steps, and every step ran in a dask worker process, not here.
    for name in FAN_OUT_STEPS:
        assert any(key.endswith(name) for key in steps), (name, sorted(steps))
    assert set(steps.values()) <= worker_pids, (set(steps.values()), worker_pids)
    assert published_bytes(artifacts) == expected
