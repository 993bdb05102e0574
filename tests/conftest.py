"""Shared fixtures: generated corpora, configs, an ephemeral Dagster instance."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def setup_dir(tmp_path: Path) -> Path:
    """A generated three-source corpus with its ledger and config; returns the config path."""
    from corpus_factory import write_setup

    return write_setup(tmp_path)


def _late_resets_never_restore_a_closed_storage() -> None:
    """An instance entered and never exited (a build_*_context re-entering an instance, an ephemeral instance
    dropped) sets dagster's defs-state storage context variable; when the garbage collector later finalizes
    it, its reset puts back whatever storage was current at its enter, often a closed instance's, in the
    middle of another test ("undefined DagsterInstance weakref"). Here a reset only undoes its own value."""
    from contextlib import contextmanager

    from dagster._core.storage.defs_state import base

    @contextmanager
    def set_defs_state_storage(storage):
        token = base._current_storage.set(storage)
        try:
            yield
        finally:
            if base._current_storage.get() is storage:
                try:
                    base._current_storage.reset(token)
                except ValueError:
                    base._current_storage.set(None)

    base.set_defs_state_storage = set_defs_state_storage


_late_resets_never_restore_a_closed_storage()


@pytest.fixture(autouse=True, scope="module")
def _no_defs_state_storage_left_by_an_earlier_module():
    """The same leak at module scope: a module fixture's instance, closed at its teardown after the last test's
    restore, must not reach the next module's module fixtures (which run before any test-level fixture)."""
    from dagster._core.storage.defs_state import base

    before = base._current_storage.get()
    base._current_storage.set(None)
    yield
    base._current_storage.set(before)


@pytest.fixture(autouse=True)
def _restore_dagster_defs_state_storage():
    """dagster.instance_for_test leaves its (closed) defs-state storage in a context variable, and every
    later Definitions load then fails with "undefined DagsterInstance weakref". Restore it per test."""
    from dagster._core.storage.defs_state import base

    before = base._current_storage.get()
    yield
    base._current_storage.set(before)


@pytest.fixture
def count_row_group_reads(monkeypatch):
    """Call it to count, from then on, every `ParquetFile.read_row_group` call: returns the list the row
    group numbers are appended to."""
    import pyarrow.parquet as pq

    def start() -> list[int]:
        reads: list[int] = []
        original = pq.ParquetFile.read_row_group

        def counting(self, i, *args, **kwargs):  # noqa: ANN001, ANN202
            reads.append(i)
            return original(self, i, *args, **kwargs)

        monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
        return reads

    return start


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 for one module's tests: the endpoint and keys as environment values
    (tests/store_box.py)."""
    from store_box import s3_in_a_thread

    with s3_in_a_thread() as env:
        yield env


@pytest.fixture
def make_settings():
    """Typed settings from a config file and/or overrides (deep-merged over the defaults, validated): the one
    way tests build the settings a driver or logic entry takes. `make_settings(overrides)` or
    `make_settings(overrides, path=config_file)`."""
    from corpus_dagster.core.config import load_settings

    def make(overrides: dict | None = None, path: Path | str | None = None):
        return load_settings(path, overrides)

    return make
