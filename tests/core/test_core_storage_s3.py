"""The artifacts store on S3 (moto's server on 127.0.0.1): a push's put carries its one-writer condition, so an
object another writer puts between the push's listing and its upload is never overwritten."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

from store_box import BUCKET, client  # noqa: E402

from corpus_dagster.core.storage import StorageConflict, Store, StoreUnavailable  # noqa: E402


def _store(s3: dict[str, str], url: str, mirror) -> Store:
    return Store(url, mirror, {"endpoint_url": s3["AWS_ENDPOINT_URL"], "key": s3["AWS_ACCESS_KEY_ID"],
                               "secret": s3["AWS_SECRET_ACCESS_KEY"]})


def _object(s3: dict[str, str], key: str) -> bytes:
    return client(s3).get_object(Bucket=BUCKET, Key=key)["Body"].read()


@pytest.mark.parametrize("seen", [True, False], ids=["overwrite", "create"])
@pytest.mark.parametrize("theirs", [b"other bytes", b"mine"], ids=["other-bytes", "same-bytes"])
def test_an_object_put_between_listing_and_upload_is_never_overwritten(s3, tmp_path, monkeypatch, seen, theirs):
    prefix = f"race-{uuid.uuid4().hex[:8]}"
    url, key = f"s3://{BUCKET}/{prefix}", f"{prefix}/f.txt"
    store = _store(s3, url, tmp_path / "m")
    store.mirror.mkdir()
    if seen:
        (store.mirror / "f.txt").write_bytes(b"first")
        store.push()
    (store.mirror / "f.txt").write_bytes(b"mine")
    real_put = store.fs.put_file
    conditions = []

    def another_writer_first(lpath, rpath, **kwargs):
        conditions.append(sorted(kwargs))
        client(s3).put_object(Bucket=BUCKET, Key=key, Body=theirs)  # after the push listed the store
        return real_put(lpath, rpath, **kwargs)

    monkeypatch.setattr(store.fs, "put_file", another_writer_first)
    if theirs == b"mine":
        store.push()  # the same bytes: no conflict, whichever writer won
        assert _object(s3, key) == b"mine"
    else:
        with pytest.raises(StorageConflict, match="f.txt holds other bytes"):
            store.push()
        assert _object(s3, key) == theirs  # the other writer's object stands
    assert conditions == [["IfMatch"] if seen else ["mode"]]


def test_a_missing_bucket_is_a_store_fault_not_an_empty_store(s3, tmp_path):
    store = _store(s3, "s3://no-such-bucket-here/corpora/x", tmp_path / "m")
    with pytest.raises(StoreUnavailable, match=r"^artifacts store s3://no-such-bucket-here/corpora/x: bucket missing"):
        store.pull()


def test_refused_credentials_are_a_store_fault_naming_no_secret(s3, tmp_path, monkeypatch):
    from moto import settings

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks every request's keys
    store = Store(f"s3://{BUCKET}/corpora/keys", tmp_path / "m",
                  {"endpoint_url": s3["AWS_ENDPOINT_URL"], "key": "AKIAUNKNOWN0000000", "secret": "sk-not-valid-9876"})
    with pytest.raises(StoreUnavailable, match="credentials refused") as raised:
        store.pull()
    assert "sk-not-valid-9876" not in str(raised.value)
