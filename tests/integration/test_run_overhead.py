"""What keeps a source run's cost flat as sources grow: per-process caches keyed by content, one instance
per pool process, and a progress watcher that stops reading finished runs."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from corpus_dagster.cli.progress_display import RunWatcher
from corpus_dagster.core.config import resolve_config
from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.ledger import Source, load_ledger, write_ledger


def _source(sid: str) -> Source:
    return Source(sid, (f"file:///data/{sid}.jsonl",), "jsonl", "MIT")


def test_ledger_cache_follows_the_file_content(tmp_path) -> None:
    path = tmp_path / "LEDGER.jsonl"
    write_ledger(path, [_source("a"), _source("b")])
    assert [s.source_id for s in load_ledger(path)] == ["a", "b"]
    write_ledger(path, [_source("a"), _source("c"), _source("d")])
    assert [s.source_id for s in load_ledger(path)] == ["a", "c", "d"]
    path.write_text(json.dumps({"source_id": "bad id!"}) + "\n")
    with pytest.raises(LedgerError):
        load_ledger(path)
    with pytest.raises(LedgerError):  # an invalid ledger is not kept as valid either
        load_ledger(path)


def test_ledger_rows_are_a_new_list_each_call(tmp_path) -> None:
    path = tmp_path / "LEDGER.jsonl"
    write_ledger(path, [_source("a")])
    first = load_ledger(path)
    first.append(_source("z"))
    assert [s.source_id for s in load_ledger(path)] == ["a"]


def test_resolved_config_is_a_copy() -> None:
    first = resolve_config({"workers": 3})
    first["near_dup"]["num_perm"] = 7
    first["workers"] = 99
    again = resolve_config({"workers": 3})
    assert again["workers"] == 3 and again["near_dup"]["num_perm"] == 128
    assert resolve_config({"workers": 2})["workers"] == 2


def test_pool_process_opens_one_instance_per_ref(monkeypatch) -> None:
    from corpus_dagster.defs import runner

    opened = []

    class FakeInstance:
        def __init__(self, ref: str) -> None:
            self.ref, self.disposed = ref, False
            opened.append(self)

        def dispose(self) -> None:
            self.disposed = True

    monkeypatch.setattr(runner.dg.DagsterInstance, "from_ref", staticmethod(FakeInstance))
    monkeypatch.setattr(runner, "_INSTANCE", [])
    a = runner._pool_instance("ref-a")
    assert runner._pool_instance("ref-a") is a and len(opened) == 1
    b = runner._pool_instance("ref-b")
    assert b is not a and a.disposed and not b.disposed and len(opened) == 2


class _FakeInstance:
    """Runs with a finished flag; counts how often each run's event log is read."""

    def __init__(self, finished: dict[str, bool]) -> None:
        self.finished = finished
        self.reads: dict[str, int] = dict.fromkeys(finished, 0)

    def get_runs(self, filters=None):  # noqa: ANN001, ARG002
        return [SimpleNamespace(run_id=r, tags={"dagster/partition": r}, is_finished=f)
                for r, f in self.finished.items()]

    def get_records_for_run(self, run_id, cursor=None, limit=None):  # noqa: ANN001, ARG002
        self.reads[run_id] += 1
        return SimpleNamespace(records=[], cursor=cursor, has_more=False)


def test_watcher_reads_a_finished_run_twice_then_leaves_it() -> None:
    instance = _FakeInstance({"done": True, "going": False})
    watcher = RunWatcher(instance, "session", log=io.StringIO(), out=io.StringIO())
    for _ in range(5):
        watcher.poll()
    assert instance.reads == {"done": 2, "going": 5}
    instance.finished["going"] = True
    for _ in range(5):
        watcher.poll()
    assert instance.reads == {"done": 2, "going": 7}
