"""The artifacts store: a local mirror per machine, pulled before work and pushed after it."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from corpus_dagster.core.config import artifacts_root, artifacts_store, load_config
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.storage import StorageConflict, Store, default_mirror, is_remote, skipped


@pytest.fixture()
def url() -> str:
    return f"memory://corpus-test-{uuid.uuid4().hex[:8]}/artifacts"


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not skipped(p.relative_to(root).as_posix())}


def test_a_push_then_a_pull_elsewhere_gives_the_same_files(tmp_path, url):
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _write(a.mirror / "stages" / "clean" / "s1" / "part-0.parquet", b"rows")
    _write(a.mirror / "stages" / "clean" / "s1" / "_RECORD.json", b"{}")
    pushed = a.push()
    assert pushed.files == 2 and pushed.bytes == 6
    pulled = b.pull()
    assert pulled.files == 2
    assert _tree(b.mirror) == _tree(a.mirror)
    assert a.push().files == 0 and b.pull().files == 0  # nothing changed since


def test_json_files_are_uploaded_after_the_data_they_name(tmp_path, url, monkeypatch):
    a = Store(url, tmp_path / "a")
    for name in ("_RECORD.json", "b.parquet", "units/u1.json", "units/u1.npy", "a.bin"):
        _write(a.mirror / "stage" / name, name.encode())
    order: list[str] = []
    put = a.fs.put_file
    monkeypatch.setattr(a.fs, "put_file", lambda lpath, rpath, **kw: (order.append(rpath.split("/stage/")[1]),
                                                                       put(lpath, rpath, **kw)))
    a.push()
    assert order == ["a.bin", "b.parquet", "units/u1.npy", "_RECORD.json", "units/u1.json"]


def test_temp_names_locks_and_scratch_stay_on_the_machine(tmp_path, url):
    a = Store(url, tmp_path / "a")
    _write(a.mirror / "stages" / "x" / ".part.tmp-0123456789ab.parquet", b"half")
    _write(a.mirror / ".locks" / "clean.lock", b"pid")
    _write(a.mirror / "tokens" / ".v1.rebuild-abc" / "f.bin", b"scratch")
    _write(a.mirror / "stages" / "x" / ".work-k1" / "units" / "u.json", b"{}")  # a work folder is shared
    a.push()
    assert set(a.listing()) == {"stages/x/.work-k1/units/u.json"}


def test_removals_travel_both_ways(tmp_path, url):
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _write(a.mirror / "keep.txt", b"k")
    _write(a.mirror / "old.txt", b"o")
    a.push()
    b.pull()
    (a.mirror / "old.txt").unlink()
    assert a.push().removed == 1
    assert "old.txt" not in a.listing()
    assert b.pull().removed == 1
    assert not (b.mirror / "old.txt").exists() and (b.mirror / "keep.txt").exists()


def test_a_pull_keeps_a_change_made_here_and_not_yet_pushed(tmp_path, url):
    a = Store(url, tmp_path / "a")
    _write(a.mirror / "f.txt", b"one")
    a.push()
    _write(a.mirror / "f.txt", b"two, longer")
    a.pull()
    assert (a.mirror / "f.txt").read_bytes() == b"two, longer"
    a.push()
    with a.fs.open(f"{a.root}/f.txt", "rb") as fh:
        assert fh.read() == b"two, longer"


def test_a_pull_replaces_a_file_the_store_changed(tmp_path, url):
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _write(a.mirror / "f.txt", b"one")
    a.push()
    b.pull()
    _write(a.mirror / "f.txt", b"two!")
    a.push()
    assert b.pull().files == 1 and (b.mirror / "f.txt").read_bytes() == b"two!"


@pytest.mark.parametrize("second_write", ["change", "create"])
def test_two_writers_of_one_object_are_a_conflict_not_an_overwrite(tmp_path, url, second_write):
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    if second_write == "change":
        _write(a.mirror / "f.txt", b"one")
        a.push()
        b.pull()
        _write(a.mirror / "f.txt", b"from a")
    else:
        _write(a.mirror / "f.txt", b"from a")
    a.push()
    _write(b.mirror / "f.txt", b"from b, never seen a's")
    with pytest.raises(StorageConflict, match="f.txt was changed by another writer"):
        b.push()
    with a.fs.open(f"{a.root}/f.txt", "rb") as fh:
        assert fh.read() == b"from a"


def test_an_artifacts_url_roots_the_layout_in_this_machines_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "m"))
    resolved = load_config(None, {"paths": {"artifacts": "s3://bucket/corpus/", "storage_options": {"anon": True}}})
    assert is_remote("s3://b/p") and not is_remote("file:///x") and not is_remote("./artifacts")
    assert artifacts_store(resolved) == "s3://bucket/corpus"
    root = artifacts_root(resolved)
    assert root == default_mirror("s3://bucket/corpus") and root.parent == (tmp_path / "m").resolve()
    layout = Layout.from_config(resolved)
    assert layout.root == root and layout.store_url == "s3://bucket/corpus"
    local = Layout.from_config(load_config(None, {"paths": {"artifacts": f"file://{tmp_path}/a"}}))
    assert local.root == (tmp_path / "a").resolve() and local.store() is None


def test_a_missing_store_root_lists_as_empty(tmp_path):
    store = Store(f"memory://never-{uuid.uuid4().hex[:8]}/x", tmp_path / "m")
    assert store.listing() == {}
    assert store.pull().files == 0
    assert fsspec.filesystem("memory").exists(store.root) is False


class ListingCacheFS(MemoryFileSystem):
    """A memory file system that keeps its first listing until told to forget it, as s3fs does."""

    protocol = "listingcache"
    cachable = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.listed = None

    def find(self, path, *args, **kwargs):
        if self.listed is None:
            self.listed = super().find(path, *args, **kwargs)
        return self.listed

    def invalidate_cache(self, path=None):
        self.listed = None


def test_a_pull_sees_what_another_writer_pushed_through_a_caching_file_system(tmp_path):
    fsspec.register_implementation("listingcache", ListingCacheFS, clobber=True)
    url = f"listingcache://cached-{uuid.uuid4().hex[:8]}/artifacts"
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _write(b.mirror / "seed.txt", b"s")
    b.push()
    assert a.pull().files == 1  # a's file system now holds a listing
    _write(b.mirror / "tokens" / "_TOKENS.json", b"{}")
    b.push()
    assert a.pull().names == ["tokens/_TOKENS.json"]


def test_pushes_closer_than_the_interval_are_skipped(tmp_path, url, monkeypatch):
    from corpus_dagster.core import storage

    monkeypatch.setattr(storage, "_ACTIVE", {})
    monkeypatch.setattr(storage, "_LAST_PUSH", [float("-inf")])
    store = storage.store_for(url, tmp_path / "m")
    _write(store.mirror / "a.txt", b"a")
    assert [r.files for r in storage.push_all(min_interval_s=60)] == [1]  # the first push of the process
    _write(store.mirror / "b.txt", b"b")
    assert storage.push_all(min_interval_s=60) == []  # within a minute of the last: left for the step's push
    assert [r.files for r in storage.push_all()] == [1]


def test_redact_hides_url_passwords_and_credential_options():
    from corpus_dagster.core.storage import redact

    options = {"key": "AKIAEXAMPLE", "secret": "s3cr3t-value", "endpoint_url": "http://127.0.0.1:9000",
               "client_kwargs": {"aws_session_token": "tok-123456"}}
    text = ("cannot list sftp://bob:hunter2@host/corpus: denied for AKIAEXAMPLE with s3cr3t-value and tok-123456 "
            "at http://127.0.0.1:9000")
    assert redact(text, options) == ("cannot list sftp://***@host/corpus: denied for *** with *** and *** "
                                     "at http://127.0.0.1:9000")


def test_a_store_error_carries_no_credential(tmp_path, url, monkeypatch):
    from corpus_dagster.core.storage import StorageError

    store = Store(url, tmp_path / "m", {"secret": "s3cr3t-value"})
    assert "s3cr3t" not in repr(store)

    def refuse(*args, **kwargs):
        raise OSError("signature for s3cr3t-value does not match")

    monkeypatch.setattr(store.fs, "find", refuse)
    monkeypatch.setattr(store.fs, "exists", lambda path: True)
    with pytest.raises(StorageError) as err:
        store.listing()
    assert "s3cr3t-value" not in str(err.value) and "***" in str(err.value)


def test_a_layout_repr_carries_no_storage_option():
    resolved = load_config(None, {"paths": {"artifacts": "memory://b/x", "storage_options": {"secret": "s3cr3t-value"}}})
    assert "s3cr3t-value" not in repr(Layout.from_config(resolved))


def test_an_env_option_is_read_from_the_environment_when_the_store_opens(tmp_path, url, monkeypatch):
    from corpus_dagster.core.storage import StorageError, resolve_options

    monkeypatch.setenv("CORPUS_TEST_SECRET", "from-env")
    assert resolve_options({"secret": {"env": "CORPUS_TEST_SECRET"}, "client_kwargs": {"region_name": "x"}}) == {
        "secret": "from-env", "client_kwargs": {"region_name": "x"}}
    monkeypatch.delenv("CORPUS_TEST_SECRET")
    with pytest.raises(StorageError, match=r"paths.storage_options.secret: the environment variable CORPUS_TEST_SECRET"):
        Store(url, tmp_path / "m", {"secret": {"env": "CORPUS_TEST_SECRET"}})
