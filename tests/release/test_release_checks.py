"""Each release check fails on the fault it guards against; the sampled rebuild check draws per seed."""

import dataclasses
import hashlib
import json
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_factory import build_kwargs, make_docs

from corpus_dagster.core.checks import sample_units
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.sections import FrozenMapping
from corpus_dagster.core.settings import ReleaseSettings, Settings
from corpus_dagster.release import checks as release_checks
from corpus_dagster.release import driver
from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.build import build_release
from corpus_dagster.release.checks import (
    RELEASE_CHECKS,
    check_bucket_bounds,
    check_identical,
    check_release,
    check_source_caps,
    check_unique_ids,
)
from corpus_dagster.release.rebuild import check_rebuild_sample
from corpus_dagster.release.units import unit_line

BUCKETS = Buckets(min_tokens=64, max_tokens=512, width=64)


def test_bucket_bounds_flags_a_row_outside_its_bucket():
    rows = pl.DataFrame({"file": ["a", "b"], "bucket": [0, 1], "n_tokens": [100, 100]})
    r = check_bucket_bounds(rows, BUCKETS)
    assert not r.passed and r.problems == ["b: a row of 100 tokens is outside its bucket 128-191"]
    r = check_bucket_bounds(rows.head(1), BUCKETS, foreign=["data/b99/part-00000.parquet"])
    assert r.n_problems == 1 and r.problems[0].startswith("data/b99/part-00000.parquet: folder is not a bucket")


def test_source_caps_flags_a_source_over_its_cap():
    rows = pl.DataFrame({"bucket": [0, 0, 0, 1], "source_id": ["a", "a", "b", "a"]})
    assert check_source_caps(rows, ReleaseSettings(per_bucket_cap=2)).passed
    r = check_source_caps(rows, ReleaseSettings.from_dict({"per_bucket_cap": 2, "per_source_cap": {"a": 1}}))
    assert not r.passed and r.problems == ["bucket 0: source 'a' has 2 documents, over its cap 1"]


def test_unique_ids_and_identical_builds():
    r = check_unique_ids(["x", "y", "x"])
    assert not r.passed and r.problems == ["x: duplicate id"]
    assert check_identical({"a": "1"}, {"a": "1"}).passed
    r = check_identical({"a": "1", "b": "2"}, {"a": "9", "c": "3"})
    assert r.problems == ["a: bytes differ", "b: missing in rebuild", "c: missing in release"]


def test_card_check_fails_when_a_number_or_a_file_changes(tmp_path):
    kwargs = build_kwargs(tmp_path, make_docs(seed=1, per_source={"alpha": 30, "beta": 20, "gamma": 10}))
    build_release(**kwargs)
    out = kwargs["out_dir"]
    assert check_release(out, kwargs["settings"])["card_matches_data"].passed
    card = (out / "README.md").read_text()
    docs_line = next(line for line in card.splitlines() if line.startswith("| documents |"))
    (out / "README.md").write_text(card.replace(docs_line, "| documents | 1 |"))
    assert not check_release(out, kwargs["settings"])["card_matches_data"].passed
    (out / "README.md").write_text(card)
    victim = sorted(out.glob("data/*/*.parquet"))[0]
    shutil.move(victim, tmp_path / "gone.parquet")
    r = check_release(out, kwargs["settings"])["card_matches_data"]
    assert not r.passed and "statistic docs: recorded value differs from the files" in r.problems


# --- each asset check computes its own check, once ----------------------------------------------------------


@pytest.fixture(scope="module")
def built_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("entries")
    kwargs = build_kwargs(root, make_docs(seed=3, per_source={"alpha": 30, "beta": 20, "gamma": 10}))
    build_release(**kwargs)
    return root, kwargs["settings"]


@pytest.fixture
def release_layout(built_release, tmp_path):
    """A copy of the built release as a stage would find it: (layout, settings, release folder)."""
    root, release = built_release
    shutil.copytree(root / "release", tmp_path / "release")
    layout = Layout(root=tmp_path, dataset="demo", version="v1")
    settings = Settings(dataset="demo", release=release)
    return layout, settings, layout.release(driver.release_name(settings))


@pytest.fixture
def check_calls(monkeypatch):
    """Names of the release checks computed and how often the release was read, while a test runs."""
    calls = {"checks": [], "reads": 0}
    for name, check in list(RELEASE_CHECKS.items()):
        monkeypatch.setitem(RELEASE_CHECKS, name,
                            lambda contents, name=name, check=check: calls["checks"].append(name) or check(contents))
    read = release_checks.read_release

    def counted_read(*args, **kwargs):
        calls["reads"] += 1
        return read(*args, **kwargs)

    monkeypatch.setattr(release_checks, "read_release", counted_read)
    return calls


def test_each_check_entry_computes_only_its_own_check(release_layout, check_calls):
    layout, settings, _ = release_layout
    for name in RELEASE_CHECKS:
        check_calls["checks"].clear()
        check_calls["reads"] = 0
        assert driver.release_check(layout, settings, name).passed
        assert check_calls["checks"] == [name] and check_calls["reads"] == 1


def test_each_asset_check_runs_only_its_own_check(release_layout, check_calls, monkeypatch):
    from corpus_dagster.defs import release as release_defs
    from corpus_dagster.defs.resources import CorpusConfig

    layout, built, _ = release_layout
    settings = dataclasses.replace(built, release=dataclasses.replace(built.release, enabled=True))
    monkeypatch.setattr(CorpusConfig, "load", lambda self: (settings, layout))
    corpus = CorpusConfig(config_path=str(layout.root))
    for name in RELEASE_CHECKS:
        check_calls["checks"].clear()
        result = getattr(release_defs, f"release_{name}")(corpus=corpus)
        assert result.passed and check_calls["checks"] == [name]


def _duplicate_an_id(out, settings):
    part = sorted(out.glob("data/*/*.parquet"))[0]
    table = pq.read_table(part)
    ids = table["id"].to_pylist()
    ids[1] = ids[0]
    pq.write_table(table.set_column(table.schema.get_field_index("id"), "id", pa.array(ids, pa.string())), part)
    return settings


def _edit_the_card(out, settings):
    card = (out / "README.md").read_text()
    line = next(line for line in card.splitlines() if line.startswith("| documents |"))
    (out / "README.md").write_text(card.replace(line, "| documents | 1 |"))
    return settings


def _lower_a_cap(out, settings):
    return dataclasses.replace(settings, per_source_cap=FrozenMapping({"alpha": 1}))


def _copy_a_part_outside_the_buckets(out, settings):
    (out / "data" / "not-a-bucket").mkdir()
    shutil.copy(sorted(out.glob("data/*/*.parquet"))[0], out / "data" / "not-a-bucket" / "part-00000.parquet")
    return settings


@pytest.mark.parametrize(("name", "fault"), [
    ("unique_ids", _duplicate_an_id),
    ("card_matches_data", _edit_the_card),
    ("source_caps", _lower_a_cap),
    ("bucket_bounds", _copy_a_part_outside_the_buckets),
])
def test_a_fault_fails_exactly_the_matching_check_entry(release_layout, name, fault):
    layout, settings, out = release_layout
    settings = dataclasses.replace(settings, release=fault(out, settings.release))
    passed = {n: driver.release_check(layout, settings, n).passed for n in RELEASE_CHECKS}
    assert passed == {n: n != name for n in RELEASE_CHECKS}


# --- the sampled rebuild check (release.rebuild_check_units) ---------------------------------------------


@pytest.fixture(scope="module")
def sampled_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampled")
    kwargs = build_kwargs(root, make_docs(seed=5, per_source={"alpha": 40, "beta": 30, "gamma": 20}))
    stats = build_release(**kwargs, units_file=root / "units.jsonl")
    return kwargs, root / "units.jsonl", stats["units"]["sha256"]


@pytest.fixture
def release_copy(sampled_build, tmp_path):
    """A copy of the sampled build's release folder and units file that a test may damage."""
    kwargs, units, sha = sampled_build
    out = tmp_path / "release"
    shutil.copytree(kwargs["out_dir"], out)
    shutil.copy(units, tmp_path / "units.jsonl")
    return kwargs | {"out_dir": out}, tmp_path / "units.jsonl", sha


def _outputs(out):
    """The sampled check's output files in its order: part files (bucket, part order), then the figures."""
    return sorted(str(p.relative_to(out)) for p in out.glob("data/*/*.parquet")) + [
        "assets/docs_per_bucket.png", "assets/tokens_by_source.png", "assets/source_mix.png"]


def _files(report):
    """The files a rebuild report names, in its order (each problem is `<file>: <what differs>`)."""
    return [p.split(": ", 1)[0] for p in report.problems]


def _sampled(kwargs, units, sha, sample, seed, workers=1):
    return check_rebuild_sample(kwargs["out_dir"], kwargs, workers, units, sha, sample, seed)


def test_sampled_rebuild_passes_on_the_build_through_another_worker_count(release_copy):
    kwargs, units, sha = release_copy
    r = _sampled(kwargs, units, sha, 2, "k", workers=2)
    assert r.passed, r.problems
    m = r.metadata
    assert m["mode"] == "sample" and m["units_rebuilt"] == 2 and m["units"] > 2
    assert m["parts_rewritten"] + m["figures_redrawn"] == 2 and m["parts"] > 2


def test_a_part_built_differently_is_caught_when_drawn_and_by_the_full_rebuild(release_copy):
    """A build that wrote other bytes into one part (and recorded them): the sample finds it when it draws
    that part, a sample that does not draw it passes, and 0 (everything) always finds it."""
    kwargs, units, sha = release_copy
    out = kwargs["out_dir"]
    outputs = _outputs(out)
    victim = outputs[1]
    table = pq.read_table(out / victim)
    pq.write_table(table.slice(1), out / victim)  # one row fewer: other bytes
    record = json.loads((out / "_RELEASE.json").read_text())
    for f in record["files"]:
        if f["path"] == victim:
            f["sha256"] = hashlib.sha256((out / victim).read_bytes()).hexdigest()
    (out / "_RELEASE.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    hit = next(s for s in map(str, range(200)) if 1 in sample_units(len(outputs), 2, f"{s}:outputs"))
    miss = next(s for s in map(str, range(200)) if 1 not in sample_units(len(outputs), 2, f"{s}:outputs"))
    r = _sampled(kwargs, units, sha, 2, hit)
    assert _files(r) == [victim, "_RELEASE.json"]  # the rebuilt part's sha256 differs too
    assert "bytes differ from a rebuild with workers=1" in r.problems[0]
    assert _sampled(kwargs, units, sha, 2, miss).passed
    full = _sampled(kwargs, units, sha, 0, miss)
    assert full.metadata["mode"] == "full" and not full.passed


def test_a_part_changed_after_the_build_fails_every_sample(release_copy):
    """_RELEASE.json holds every part's sha256 and is always compared: a part edited afterwards is caught
    whichever parts the sample draws."""
    kwargs, units, sha = release_copy
    out = kwargs["out_dir"]
    outputs = _outputs(out)
    victim = outputs[0]
    pq.write_table(pq.read_table(out / victim).slice(1), out / victim)
    miss = next(s for s in map(str, range(200)) if 0 not in sample_units(len(outputs), 1, f"{s}:outputs"))
    r = _sampled(kwargs, units, sha, 1, miss)
    assert not r.passed and _files(r) == ["_RELEASE.json"]


def test_units_that_a_rebuild_does_not_reproduce_are_caught(release_copy):
    kwargs, units, sha = release_copy
    lines = [json.loads(line) for line in units.read_text().splitlines()]
    k = next(i for i, u in enumerate(lines) if u["segmented"]["rows"]["n_tokens"])
    lines[k]["segmented"]["rows"]["n_tokens"][0] += 1  # a segment whose count the build got otherwise
    body = b"".join(unit_line(u) for u in lines)
    units.write_bytes(body)
    r = _sampled(kwargs, units, sha, 1, "k")
    assert not r.passed and "sha256 differs" in r.problems[0]  # not the file the build wrote
    r = _sampled(kwargs, units, hashlib.sha256(body).hexdigest(), len(lines), "k")  # every unit drawn
    assert not r.passed and any("counts or segments differ" in p for p in r.problems)
    units.unlink()
    r = _sampled(kwargs, units, sha, 1, "k")
    assert not r.passed and "missing" in r.problems[0]


def test_sampled_rebuild_finds_extra_and_missing_files(release_copy):
    kwargs, units, sha = release_copy
    out = kwargs["out_dir"]
    (out / "data" / "stray.txt").write_text("x")
    gone = _outputs(out)[2]
    (out / gone).unlink()
    r = _sampled(kwargs, units, sha, 1, "k")
    assert "data/stray.txt: not in the rebuilt plan" in r.problems and f"{gone}: missing in release" in r.problems


def test_a_figure_drawn_differently_is_caught_when_drawn(release_copy):
    kwargs, units, sha = release_copy
    out = kwargs["out_dir"]
    outputs = _outputs(out)
    k = outputs.index("assets/source_mix.png")
    (out / outputs[k]).write_bytes((out / outputs[k]).read_bytes() + b"\0")
    hit = next(s for s in map(str, range(200)) if k in sample_units(len(outputs), 1, f"{s}:outputs"))
    r = _sampled(kwargs, units, sha, 1, hit)
    assert r.metadata["figures_redrawn"] == 1 and _files(r) == ["assets/source_mix.png"]
