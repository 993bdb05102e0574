"""The artifacts store: a local mirror per machine, pulled before work and pushed after it."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from corpus_dagster.core import storage
from corpus_dagster.core.config import artifacts_root, artifacts_store, load_config
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.storage import (
    StorageConflict,
    Store,
    UnsafeKey,
    client_options,
    default_mirror,
    is_remote,
    key_problem,
    redact,
    skipped,
)


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


def _seen_by_both(a: Store, b: Store, second_write: str) -> None:
    """For a second write that changes f.txt (not one that creates it), both mirrors first sync its old bytes."""
    if second_write == "change":
        _write(a.mirror / "f.txt", b"one")
        a.push()
        b.pull()


@pytest.mark.parametrize("second_write", ["change", "create"])
def test_two_writers_of_other_bytes_are_a_conflict_and_the_loser_heals_on_its_next_sync(tmp_path, url, second_write,
                                                                                       monkeypatch):
    monkeypatch.setattr(storage, "_ACTIVE", {})
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _seen_by_both(a, b, second_write)
    _write(a.mirror / "f.txt", b"from a")
    a.push()
    _write(b.mirror / "f.txt", b"from b, never seen a's")
    _write(b.mirror / "g.txt", b"b's alone")
    with pytest.raises(StorageConflict, match=f"f.txt holds other bytes.*the mirror {b.mirror} .*Rerun"):
        b.push()
    with a.fs.open(f"{a.root}/f.txt", "rb") as fh:
        assert fh.read() == b"from a"
    assert "g.txt" not in a.listing()  # nothing of a conflicting push went up
    pushed, pulled = storage.sync(storage.store_for(url, b.mirror))  # the next run: pull, then push
    assert pulled.names == ["f.txt"] and (b.mirror / "f.txt").read_bytes() == b"from a"
    assert [r.names for r in pushed] == [["g.txt"]]


@pytest.mark.parametrize("second_write", ["change", "create"])
def test_two_writers_of_the_same_bytes_are_no_conflict(tmp_path, url, second_write):
    a, b = Store(url, tmp_path / "a"), Store(url, tmp_path / "b")
    _seen_by_both(a, b, second_write)
    _write(a.mirror / "f.txt", b"deterministic")
    a.push()
    _write(b.mirror / "f.txt", b"deterministic")
    assert b.push().files == 0  # the store holds these bytes: nothing to upload, nothing to refuse
    assert b.pull().files == 0 and b.push().files == 0  # and b's mirror knows it


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


PLANTED = ["../escape-up.txt", "x/../../escape-climb.txt", "/abs-target.txt", "a\\b.txt", "./dot.txt", "n\x00ul.txt",
           "double//slash.txt"]


def test_keys_that_are_not_plain_relative_paths_are_refused():
    assert key_problem("stages/clean/s1/part-0.parquet") is None
    assert key_problem("..x/y..") is None  # dots inside a name are a name
    problems = {key: key_problem(key) for key in PLANTED}
    assert problems == {"../escape-up.txt": "a '..' component", "x/../../escape-climb.txt": "a '..' component",
                        "/abs-target.txt": "a leading slash", "a\\b.txt": "a backslash", "./dot.txt": "a '.' component",
                        "n\x00ul.txt": "a NUL byte", "double//slash.txt": "an empty component"}
    assert key_problem("") == "an empty key" and key_problem("trailing/") == "an empty component"


def test_planted_keys_write_nothing_are_warned_of_once_and_never_removed(tmp_path, url, caplog):
    memory = fsspec.filesystem("memory")
    a = Store(url, tmp_path / "m" / "a")
    for key in [*PLANTED, "ok.txt"]:
        memory.pipe_file(f"{a.root}/{key}", b"planted")
    memory.pipe_file(f"{a.root}/{tmp_path}/abs-target.txt", b"planted")  # `<prefix>//abs` replaced the base
    before = set(memory.find(a.root))
    with caplog.at_level("WARNING", logger="corpus_dagster.storage"):
        pulled = a.pull()
        assert a.pull().refused == {}  # said once per mirror
    assert pulled.names == ["ok.txt"] and len(pulled.refused) == len(PLANTED) + 1
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "refused 8 key(s)" in warnings[0] and "'../escape-up.txt'" in warnings[0]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()
                  and not skipped(p.name)) == ["m/a/ok.txt"]
    (a.mirror / "ok.txt").unlink()
    _write(a.mirror / "new.txt", b"n")
    assert a.push().removed == 1  # ok.txt, removed here; the planted keys were never this mirror's to remove
    assert set(memory.find(a.root)) == (before - {f"{a.root}/ok.txt"}) | {f"{a.root}/new.txt"}
    a.forget_warnings()
    assert len(a.pull().refused) == len(PLANTED) + 1  # a new CLI run names them again


def test_a_path_through_a_link_out_of_the_mirror_is_refused(tmp_path, url):
    a = Store(url, tmp_path / "a")
    a.mirror.mkdir()
    (tmp_path / "outside").mkdir()
    (a.mirror / "stages").symlink_to(tmp_path / "outside")
    fsspec.filesystem("memory").pipe_file(f"{a.root}/stages/x.txt", b"through the link")
    with pytest.raises(UnsafeKey, match="resolves outside the mirror"):
        a.pull()
    assert not (tmp_path / "outside" / "x.txt").exists()
    assert a.local("corpus/LEDGER.jsonl") == a.mirror / "corpus" / "LEDGER.jsonl"


def test_credentials_in_urls_and_signed_queries_are_redacted():
    text = ('Could not connect to "https://AKIA123:s3cr3t@store.example:9000/b?X-Amz-Credential=AKIA%2F1&'
            'X-Amz-Signature=abc123&part=2" nor gs://user:pw@bucket/x')
    shown = redact(text)
    assert "s3cr3t" not in shown and "AKIA123" not in shown and "abc123" not in shown and "pw@" not in shown
    assert shown == ('Could not connect to "https://***@store.example:9000/b?X-Amz-Credential=***&'
                     'X-Amz-Signature=***&part=2" nor gs://***@bucket/x')


def test_s3_clients_get_bounded_timeouts_and_retries_unless_the_config_sets_them():
    bounded = client_options("s3://b/p", {"anon": True}, 60)
    assert bounded == {"anon": True, "config_kwargs": {"connect_timeout": 15.0, "read_timeout": 15.0,
                                                       "retries": {"total_max_attempts": 2, "mode": "standard"}}}
    theirs = client_options("s3://b/p", {"config_kwargs": {"read_timeout": 300}}, 60)["config_kwargs"]
    assert theirs["read_timeout"] == 300 and theirs["connect_timeout"] == 15.0
    assert client_options("memory://x", {"k": 1}, 60) == {"k": 1}



def test_the_configs_mirror_wins_over_the_environment_which_wins_over_the_default(tmp_path, monkeypatch):
    cfg = {"paths": {"artifacts": "s3://bucket/corpus", "mirror": str(tmp_path / "configured")}}
    monkeypatch.setenv("CORPUS_MIRROR", str(tmp_path / "from-env"))
    assert artifacts_root(load_config(None, cfg)).parent == (tmp_path / "configured").resolve()
    assert artifacts_root(load_config(None, {"paths": {"artifacts": "s3://bucket/corpus"}})).parent == (
        tmp_path / "from-env").resolve()
    monkeypatch.delenv("CORPUS_MIRROR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_mirror("s3://bucket/corpus").parent == (tmp_path / "home" / ".cache" / "corpus-dagster" / "mirror")


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
