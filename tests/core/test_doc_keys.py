"""Stable document keys: the id_field value, else the url, else the text's sha256 with its occurrence; never a
row position, so removing an earlier record keeps every other key."""

import numpy as np

from corpus_dagster.core.doc_keys import positional_url, stable_keys
from corpus_dagster.dedup.components import cluster_keepers
from corpus_dagster.dedup.exact import exact_duplicates

LEDGER = ["file:///data/web/*.jsonl"]


def test_keys_by_own_id_then_url_then_text_hash():
    assert stable_keys("s", ["aa", "bb"], own_ids=["x-1", "x-2"]) == ["s:x-1", "s:x-2"]
    assert stable_keys("s", ["aa", "bb"], urls=["https://a/1", "https://a/2"]) == ["s:https://a/1", "s:https://a/2"]
    assert stable_keys("s", ["aa", "bb", "aa"]) == ["s:sha256:aa#0", "s:sha256:bb#0", "s:sha256:aa#1"]


def test_repeats_and_missing_values_are_told_apart_without_positions():
    got = stable_keys("s", ["aa", "bb", "cc", "dd"], urls=["https://a/1", "https://a/1", None,
                                                          "file:///data/web/x.jsonl#3"], ledger_urls=LEDGER)
    assert got == ["s:https://a/1", "s:https://a/1#~1", "s:sha256:cc#0", "s:sha256:dd#0"]
    assert stable_keys("s", ["aa", "bb"], own_ids=[None, "k"]) == ["s:sha256:aa#0", "s:k"]


def test_positional_urls_are_the_ones_ingest_writes_for_a_missing_url_field():
    assert positional_url("file:///elsewhere/a.jsonl#2", [])
    assert positional_url("s3://b/web/x.jsonl#2", ["s3://b/web/*.jsonl"])
    assert not positional_url("https://example.org/page#2", LEDGER)
    assert not positional_url("https://example.org/page", LEDGER)


def test_removing_an_earlier_record_keeps_every_other_key():
    digests = ["aa", "bb", "aa", "cc"]
    before = stable_keys("s", digests)
    assert stable_keys("s", ["bb", "cc"]) == [before[1], before[3]]
    # only a later copy of the removed text renumbers (it becomes the text's first occurrence)
    assert stable_keys("s", digests[1:]) == [before[1], before[0], before[3]]
    urls = [f"https://a/{i}" for i in range(4)]
    assert stable_keys("s", digests[1:], urls=urls[1:]) == stable_keys("s", digests, urls=urls)[1:]


def test_exact_keeper_is_the_smallest_rank_not_the_smallest_gid():
    sha = np.zeros((3, 32), np.uint8)  # three copies of one text
    dropped, kept_as = exact_duplicates(sha, np.arange(3))
    assert dropped.tolist() == [1, 2] and kept_as.tolist() == [0, 0]
    dropped, kept_as = exact_duplicates(sha, np.arange(3), rank=np.array([2, 0, 1]))
    assert dropped.tolist() == [0, 2] and kept_as.tolist() == [1, 1]


def test_cluster_keeper_is_the_smallest_rank():
    edges = np.array([[0, 1], [1, 2], [3, 4]])
    assert cluster_keepers(5, edges).tolist() == [0, 0, 0, 3, 3]
    assert cluster_keepers(5, edges, rank=np.array([4, 3, 0, 1, 2])).tolist() == [2, 2, 2, 3, 3]
