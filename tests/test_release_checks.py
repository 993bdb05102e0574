"""Each release check fails on the fault it guards against."""

import shutil

import polars as pl
from release_factory import build_kwargs, make_docs

from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.checks import (
    check_bucket_bounds,
    check_identical,
    check_source_caps,
    check_unique_ids,
)
from corpus_dagster.release.driver import build_release, check_release

BUCKETS = Buckets(min_tokens=64, max_tokens=512, width=64)


def test_bucket_bounds_flags_a_row_outside_its_bucket():
    rows = pl.DataFrame({"file": ["a", "b"], "bucket": [0, 1], "n_tokens": [100, 100]})
    r = check_bucket_bounds(rows, BUCKETS)
    assert not r["passed"] and r["problems"] == [{"file": "b", "n_tokens": 100, "bucket": "128-191"}]


def test_source_caps_flags_a_source_over_its_cap():
    rows = pl.DataFrame({"bucket": [0, 0, 0, 1], "source_id": ["a", "a", "b", "a"]})
    assert check_source_caps(rows, {"per_bucket_cap": 2, "per_source_cap": {}})["passed"]
    r = check_source_caps(rows, {"per_bucket_cap": 2, "per_source_cap": {"a": 1}})
    assert not r["passed"] and r["problems"][0] == {"bucket": 0, "source_id": "a", "docs": 2, "cap": 1}


def test_unique_ids_and_identical_builds():
    assert not check_unique_ids(["x", "y", "x"])["passed"]
    assert check_identical({"a": "1"}, {"a": "1"})["passed"]
    r = check_identical({"a": "1", "b": "2"}, {"a": "9", "c": "3"})
    assert [p["problem"] for p in r["problems"]] == ["bytes differ", "missing in rebuild", "missing in release"]


def test_card_check_fails_when_a_number_or_a_file_changes(tmp_path):
    kwargs = build_kwargs(tmp_path, make_docs(seed=1, per_source={"alpha": 30, "beta": 20, "gamma": 10}))
    build_release(**kwargs)
    out = kwargs["out_dir"]
    assert check_release(out, kwargs["settings"])["card_matches_data"]["passed"]
    card = (out / "README.md").read_text()
    docs_line = next(line for line in card.splitlines() if line.startswith("| documents |"))
    (out / "README.md").write_text(card.replace(docs_line, "| documents | 1 |"))
    assert not check_release(out, kwargs["settings"])["card_matches_data"]["passed"]
    (out / "README.md").write_text(card)
    victim = sorted(out.glob("data/*/*.parquet"))[0]
    shutil.move(victim, tmp_path / "gone.parquet")
    r = check_release(out, kwargs["settings"])["card_matches_data"]
    assert not r["passed"] and any(p.get("statistic") == "docs" for p in r["problems"])
