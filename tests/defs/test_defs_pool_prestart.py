"""A corpus run on the local executor starts its worker pool when its resources start; other runs do not."""

from types import SimpleNamespace

import pytest

from corpus_dagster.core.config import packaged_config_path
from corpus_dagster.defs import resources
from corpus_dagster.defs.automation import build_corpus_job
from corpus_dagster.defs.runner import GLOBAL_JOB


def _context(job_name: str | None) -> SimpleNamespace:
    return SimpleNamespace(dagster_run=None if job_name is None else SimpleNamespace(job_name=job_name))


@pytest.mark.parametrize(("job", "workers", "started"), [
    (GLOBAL_JOB, 2, [(2, resources.CORPUS_POOL_MODULES)]),
    ("build_source", 2, []),
    ("ingest_sources", 2, []),
    (None, 2, []),
])
def test_only_a_corpus_run_prestarts_the_pool(monkeypatch, tmp_path, job, workers, started):
    calls: list = []
    monkeypatch.setattr(resources, "prestart_pool", lambda w, modules: calls.append((w, modules)))
    corpus = resources.CorpusConfig(config_path=str(packaged_config_path()), artifacts=str(tmp_path), workers=workers)
    corpus.setup_for_execution(_context(job))
    assert calls == started


def test_the_corpus_job_is_the_one_that_prestarts():
    assert build_corpus_job.name == GLOBAL_JOB == resources.CORPUS_JOB


def test_the_pool_modules_import():
    import importlib

    for name in resources.CORPUS_POOL_MODULES:
        importlib.import_module(name)


def test_a_corpus_run_on_dask_starts_no_local_pool(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setattr(resources, "prestart_pool", lambda w, modules: calls.append((w, modules)))
    config = tmp_path / "config.yaml"
    config.write_text(f"dataset: t\nversion: v1\nworkers: 2\npaths:\n  artifacts: {tmp_path}\nexecutor:\n  kind: dask\n")
    resources.CorpusConfig(config_path=str(config)).setup_for_execution(_context(GLOBAL_JOB))
    assert calls == []
