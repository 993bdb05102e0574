"""Bucket edges, stable ids, exact-duplicate removal, per-source caps and the seeded plan."""

import uuid
from dataclasses import replace

import numpy as np
import polars as pl

from corpus_dagster.core.settings import ReleaseSettings
from corpus_dagster.release.buckets import ABOVE, BELOW, Buckets
from corpus_dagster.release.ids import RELEASE_NAMESPACE, release_id
from corpus_dagster.release.plan import plan_release, room_by_source


def test_default_buckets_match_the_reference_layout():
    b = Buckets(min_tokens=1024, max_tokens=32768, width=1024)
    assert b.count == 31
    assert b.folder(7) == "b07_8192-9215"
    assert b.folder(30) == "b30_31744-32768"  # the top bucket is closed at max_tokens
    assert b.index(np.array([1023, 1024, 2047, 2048, 32767, 32768, 32769])).tolist() == [BELOW, 0, 0, 1, 30, 30, ABOVE]


def test_release_ids_are_uuid5_in_the_project_namespace():
    assert RELEASE_NAMESPACE == uuid.uuid5(uuid.NAMESPACE_URL, "https://corpus-dagster.dev/release")
    assert release_id("web:3") == str(uuid.uuid5(RELEASE_NAMESPACE, "web:3"))
    assert release_id("web:3", (10, 90)) == str(uuid.uuid5(RELEASE_NAMESPACE, "web:3#10-90"))
    assert uuid.UUID(release_id("web:3")).version == 5


def candidates(n_per_source: dict[str, int], n_tokens: int = 100) -> pl.DataFrame:
    rows = [(f"{sid}:{k}", sid) for sid, n in n_per_source.items() for k in range(n)]
    return pl.DataFrame(
        {
            "doc_id": [r[0] for r in rows],
            "source_id": [r[1] for r in rows],
            "segment": [-1] * len(rows),
            "char_start": [0] * len(rows),
            "char_end": [10] * len(rows),
            "n_tokens": [n_tokens] * len(rows),
            "content_sha256": [r[0].encode() for r in rows],
        }
    )


SETTINGS = ReleaseSettings.from_dict({"seed": 7, "per_bucket_cap": 5, "per_source_cap": {"b": 2}, "part_tokens": 1000})
BUCKETS = Buckets(min_tokens=64, max_tokens=512, width=64)


def test_cap_per_source_per_bucket_with_override():
    plan, counts = plan_release(candidates({"a": 9, "b": 4, "c": 3}), BUCKETS, SETTINGS)
    per = dict(plan.group_by("source_id").len().iter_rows())
    assert per == {"a": 5, "b": 2, "c": 3}
    assert counts["over_cap"] == {"a": 4, "b": 2}


def test_capped_choice_depends_on_the_seed_only():
    c = candidates({"a": 30})
    first, _ = plan_release(c, BUCKETS, SETTINGS)
    again, _ = plan_release(c.reverse(), BUCKETS, SETTINGS)  # input order does not matter
    assert first["id"].to_list() == again["id"].to_list()
    other, _ = plan_release(c, BUCKETS, replace(SETTINGS, seed=8))
    assert set(other["id"].to_list()) != set(first["id"].to_list())


def test_exact_duplicates_removed_keeping_the_first_id():
    c = candidates({"a": 3}).with_columns(pl.lit(b"same").alias("content_sha256"))
    plan, counts = plan_release(c, BUCKETS, SETTINGS)
    assert plan["doc_id"].to_list() == ["a:0"] and counts["exact_duplicates"] == 2


def test_below_min_tokens_counted_and_parts_sized_by_tokens():
    c = pl.concat([candidates({"a": 4}, n_tokens=10), candidates({"z": 5}, n_tokens=200)])
    plan, counts = plan_release(c, BUCKETS, replace(SETTINGS, part_tokens=500))
    assert counts["below_min_tokens"] == {"a": 4}
    # bucket 2 (192-255): 500 // 255 = 1 row per part
    assert sorted(plan["part"].to_list()) == [0, 1, 2, 3, 4] and set(plan["row"].to_list()) == {0}


def test_room_marks_buckets_where_a_source_is_below_its_cap():
    docs = pl.DataFrame({"source_id": ["a"] * 5 + ["b"], "n_tokens": [100] * 5 + [100]})
    room = room_by_source(docs, BUCKETS, SETTINGS)
    assert room["a"][0] is False and room["a"][1] is True and room["b"][0] is True
