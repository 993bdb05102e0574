"""A step hands the memory it freed back to the system when it ends, whether it succeeded or failed: the
steps of a corpus run share one process, and glibc's heap and Arrow's pool keep freed pages otherwise."""

import dagster as dg
import pytest

from corpus_dagster.core import memory
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.defs import common


@pytest.fixture
def releases(monkeypatch):
    calls = []
    monkeypatch.setattr(common, "release_memory", lambda: calls.append(1))
    return calls


def test_a_step_that_succeeds_releases_memory_once(releases):
    with common.corpus_failure("shards"):
        pass
    assert releases == [1]


def test_a_step_that_fails_still_releases_memory_and_keeps_its_error(releases):
    with pytest.raises(dg.Failure, match="shards: broken"), common.corpus_failure("shards"):
        raise CorpusError("broken")
    with pytest.raises(KeyError), common.corpus_failure("shards"):
        raise KeyError("not a corpus error")
    assert releases == [1, 1]


def test_release_memory_trims_the_heap_where_glibc_has_malloc_trim(monkeypatch):
    trimmed = []

    class Libc:
        def malloc_trim(self, pad):  # noqa: ANN001, ANN202
            trimmed.append(pad)
            return 1

    monkeypatch.setattr(memory, "_libc", lambda: Libc())
    memory.release_memory()
    assert trimmed == [0]
    monkeypatch.setattr(memory, "_libc", lambda: None)  # no glibc (musl, macOS): Arrow's pool only
    memory.release_memory()
    assert trimmed == [0]
