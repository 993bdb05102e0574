"""Stage cache keys come from content and output-deciding settings: a changed setting recomputes its stage and
only what is downstream of it; touching or refetching unchanged bytes recomputes nothing."""

import os
from pathlib import Path

import pytest
import yaml
from stage_runs import STAGES, run_all

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.clean import outputs as clean_outputs
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.records import RECORD
from corpus_dagster.dedup import driver as dedup_driver


def edit_config(path: Path, section: str, key: str, value) -> None:
    cfg = yaml.safe_load(path.read_text())
    cfg.setdefault(section, {})[key] = value
    path.write_text(yaml.safe_dump(cfg))


@pytest.fixture
def built(setup_dir: Path) -> Path:
    assert all(run_all(setup_dir).values())  # first build: everything runs
    assert not any(run_all(setup_dir).values())  # an unchanged rerun runs nothing
    return setup_dir


# (section, key, new value, the first stage it changes): that stage and everything after it recompute.
SETTING_CHANGES = [
    ("ingest", "part_max_docs", 7, "ingest"),
    ("clean", "lang", {"enabled": False}, "clean"),
    ("near_dup", "scheme", "affine64", "minhash"),
    ("near_dup", "num_perm", 64, "minhash"),
    ("near_dup", "threshold", 0.6, "dedup"),
    ("dedup", "jaccard_threshold", 0.5, "dedup"),
    ("pii", "emails", {"enabled": False}, "scrub"),
    ("publish", "zstd_level", 9, "publish"),
    ("tokenize", "max_file_bytes", 1 << 20, "tokens"),
]


@pytest.mark.parametrize(("section", "key", "value", "first"), SETTING_CHANGES, ids=[f"{s}.{k}" for s, k, _, _ in SETTING_CHANGES])
def test_a_setting_recomputes_its_stage_and_only_downstream(built: Path, section, key, value, first) -> None:
    cfg = yaml.safe_load(built.read_text())
    if isinstance(value, dict):
        value = {**cfg.get(section, {}).get(key, {}), **value}
    edit_config(built, section, key, value)
    ran = run_all(built)
    at = STAGES.index(first)
    upstream = {s: ran[s] for s in STAGES[:at]}
    assert not any(upstream.values()), f"changing {section}.{key} recomputed upstream stages: {upstream}"
    assert ran[first], f"changing {section}.{key} did not recompute {first}"
    assert ran["tokens"], "the token streams are downstream of every setting here (the manifest hashes the config)"


def test_changing_the_signature_scheme_recomputes_signatures_and_dedup_succeeds(built: Path) -> None:
    edit_config(built, "near_dup", "scheme", "affine64")
    settings = load_settings(built)
    layout = Layout.from_config(settings.resolved)
    assert run_all(built)["minhash"]
    stats = dedup_driver.run_global_dedup(layout, settings, ["alpha", "beta", "gamma"])
    assert stats.cached is True  # run_all already ran it with the new signatures


def test_touching_every_raw_file_or_refetching_unchanged_bytes_recomputes_nothing(built: Path) -> None:
    root = built.parent / "sources"
    records = sorted(built.parent.glob(f"artifacts/**/{RECORD}"))
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in records}
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(path.stat().st_atime_ns + 10**9, path.stat().st_mtime_ns + 10**9))
    assert not any(run_all(built).values())
    # rewrite one file with the same bytes (a refetch of unchanged content: new inode, new mtime)
    alpha = root / "alpha.jsonl"
    data = alpha.read_bytes()
    alpha.unlink()
    alpha.write_bytes(data)
    assert not any(run_all(built).values())
    after = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in records}
    assert after == before, "a stage record was rewritten although no input byte changed"


def test_changed_input_bytes_recompute_that_source_only(built: Path) -> None:
    gamma = sorted((built.parent / "sources" / "gamma").glob("*.txt"))[0]
    gamma.write_text(gamma.read_text() + " One more sentence about a silver harbor.")
    settings = load_settings(built)
    layout = Layout.from_config(settings.resolved)
    keys = {sid: clean_outputs.clean_record(layout, sid).key for sid in ("alpha", "beta", "gamma")}
    ran = run_all(built)
    assert ran["ingest"] and ran["clean"] and ran["publish"]
    after = {sid: clean_outputs.clean_record(layout, sid).key for sid in ("alpha", "beta", "gamma")}
    assert after["alpha"] == keys["alpha"] and after["beta"] == keys["beta"] and after["gamma"] != keys["gamma"]


def test_a_damaged_stage_output_is_recomputed_not_trusted(built: Path) -> None:
    settings = load_settings(built)
    layout = Layout.from_config(settings.resolved)
    docs = clean_outputs.clean_doc_files(layout, "beta")[0]
    docs.write_bytes(docs.read_bytes()[:100])  # truncated by a crash or a full disk
    assert not clean_driver.run_clean_source(layout, settings, "beta")["cached"]
    assert clean_driver.run_clean_source(layout, settings, "beta")["cached"]


def test_temp_leftovers_of_a_killed_run_are_cleared_when_the_stage_starts(built: Path) -> None:
    settings = load_settings(built)
    layout = Layout.from_config(settings.resolved)
    folder = layout.stage("clean", "alpha")
    leftover = folder / ".docs-00000.tmp-deadbeef.parquet"
    leftover.write_bytes(b"half")
    edit_config(built, "clean", "repetition", {"enabled": False})
    clean_driver.run_clean_source(layout, load_settings(built), "alpha")
    assert not leftover.exists()
