"""The dataset card tells the whole build (headline, Construction, Reproduce) from the real stages' records."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from release_factory import build_kwargs, make_docs

from corpus_dagster.core.config import config_sha256, load_settings
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources
from corpus_dagster.release.build import build_release
from corpus_dagster.release.checks import check_release
from corpus_dagster.release.driver import release_name

SMALL_RELEASE = {"bucket_width": 64, "min_tokens": 64, "max_tokens": 512, "max_segments": 3, "per_bucket_cap": 12}
STEPS = ["ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokens", "analysis", "release"]


def add_duplicates(source: Path) -> None:
    """Five exact copies and five one-word edits (Jaccard about 0.93) of alpha's first documents."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    extra = [dict(r, link=r["link"] + "-copy") for r in rows[:5]]
    for r in rows[5:10]:
        words = r["text"].split()
        words[len(words) // 2] = "zebra"
        extra.append({"text": " ".join(words), "link": r["link"] + "-near"})
    source.write_text("".join(json.dumps(r) + "\n" for r in rows + extra), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("card")
    cfg = write_setup(root, extra={"release": SMALL_RELEASE})
    add_duplicates(root / "sources" / "alpha.jsonl")
    corpus = CorpusConfig(config_path=str(cfg))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    result = materialize_global(corpus, instance)
    settings, layout = load_settings(cfg), corpus.layout()
    out = layout.release(release_name(settings))
    return {"root": root, "settings": settings, "layout": layout, "out": out, "result": result,
            "card": (out / "README.md").read_text(encoding="utf-8"),
            "manifest": json.loads(layout.manifest.read_text(encoding="utf-8"))}


def cell(card: str, label: str) -> str:
    return re.search(rf"^\| {re.escape(label)} \| ([^|]+) \|$", card, re.M).group(1).strip()


def section(card: str, title: str) -> str:
    return card.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def subsection(card: str, title: str) -> str:
    return re.split(r"\n##+ ", card.split(f"\n### {title}\n", 1)[1], maxsplit=1)[0]


def test_headline_counts_the_whole_build(built):
    card, dedup = built["card"], built["manifest"]["dedup"]
    assert dedup["exact_dropped"] > 0 and dedup["near_dropped"] > 0
    assert cell(card, "exact duplicates removed (corpus dedup)") == f"{dedup['exact_dropped']:,}"
    assert cell(card, "near duplicates removed (corpus dedup)") == f"{dedup['near_dropped']:,}"
    assert cell(card, "documents fetched (after the ledger's where)") == "102"  # 40 + 10 duplicates, 40, 12
    assert cell(card, "documents published") == f"{built['manifest']['n_docs']:,}"
    for name, n in built["manifest"]["filters"].items():  # a rule that dropped nothing (or is off) has no row
        if n:
            assert cell(card, f"dropped by filter {name}") == f"{n:,}"
        else:
            assert f"dropped by filter {name} |" not in card
    release, build = subsection(card, "The release"), subsection(card, "The corpus build it was cut from")
    row = re.compile(r"^\| documents \| [0-9,]+ \|$", re.M)
    assert row.search(release) and "documents published" not in release  # two tables, never mixed
    assert "documents published" in build and not row.search(build)


def test_construction_lists_every_stage_with_its_code_version(built):
    from corpus_dagster.core import records

    layout = built["layout"]
    rows = [line.split(" | ") for line in subsection(built["card"], "Data Collection and Processing").splitlines() if line.startswith("| ")]
    steps = [r[0].lstrip("| ") for r in rows[1:]]
    assert list(dict.fromkeys(steps)) == STEPS
    versions = {(r[0].lstrip("| "), r[1]): r[-1].rstrip(" |") for r in rows[1:]}
    for sid in ("alpha", "beta", "gamma"):
        assert versions[("ingest", sid)] == records.read_record(layout.raw_source(sid)).code_version
        for stage in ("clean", "minhash", "scrub"):
            assert versions[(stage, sid)] == records.read_record(layout.stage(stage, sid)).code_version
    for stage in ("dedup", "publish", "tokens", "analysis", "release"):
        assert versions[(stage, "all")] == records.read_record(layout.stage(stage)).code_version, stage
    # no stage key: after ingest they follow the fetch time, and a refetch of the same bytes keeps the card
    for stage in ("clean", "dedup", "publish"):
        folder = layout.stage(stage, "alpha") if stage == "clean" else layout.stage(stage)
        assert records.read_record(folder).key not in built["card"]
    dedup = next(r for r in rows if r[0] == "| dedup")
    assert "jaccard_threshold 0.8" in dedup[3] and "num_perm 128" in dedup[3]
    assert "bands 32" in dedup[3] and "rows 4" in dedup[3]  # the graph's banding, chosen for 0.7
    assert f"exact dropped {built['manifest']['dedup']['exact_dropped']}" in dedup[2]
    publish = next(r for r in rows if r[0] == "| publish")
    assert publish[3] == "shard_rows 25; val_permille 100"


def test_reproduce_has_the_real_hashes_and_versions(built):
    rep, layout = section(built["card"], "Reproduce"), built["layout"]
    ledger_sha = hashlib.sha256(layout.ledger.read_bytes()).hexdigest()
    assert cell(rep, "config sha256") == f"`{config_sha256(built['settings'].resolved)}`"
    assert cell(rep, "ledger sha256") == f"`{ledger_sha}`" and cell(rep, "ledger") == "`corpus/LEDGER.jsonl`"
    assert cell(rep, "package") == f"corpus_dagster {importlib.metadata.version('corpus_dagster')}"
    assert "python -m corpus_dagster.run my-build.yaml" in rep and "cp reproduce/config.yaml my-build.yaml" in rep
    from corpus_dagster.release.driver import CODE_VERSION

    versions = dict(v.split(" ") for v in cell(rep, "code versions").split(", "))
    assert list(versions) == STEPS and versions["release"] == CODE_VERSION


def test_card_names_paths_relative_to_the_root_only_and_its_check_passes(built):
    card, root = built["card"], built["root"]
    assert "`artifacts/release/testset/v1/`" in section(card, "Reproduce")
    assert str(root) not in card and str(Path(root).resolve()) not in card
    assert str(root) not in (built["out"] / "_RELEASE.json").read_text(encoding="utf-8")
    assert check_release(built["out"], built["settings"].release)["card_matches_data"].passed
    release_checks = {name: passed for asset, name, passed, _ in check_results(built["result"]) if asset == "release"}
    assert release_checks["release_card_matches_data"] and release_checks["release_reproducible"], release_checks


def test_cleaning_table_says_the_repair_counts_do_not_apply(built):
    notes = [line for line in section(built["card"], "Dataset Creation").splitlines()
             if "out_of_range_after_fix" in line or "moved to another bucket after repair" in line]
    assert len(notes) == 1 and "do not apply" in notes[0] and "before bucketing" in notes[0]


def test_without_stage_records_the_headline_has_the_manifests_dedup_counts(tmp_path):
    kwargs = build_kwargs(tmp_path, make_docs(seed=2, per_source={"alpha": 20, "beta": 10, "gamma": 10}))
    build_release(**kwargs)
    card = (kwargs["out_dir"] / "README.md").read_text(encoding="utf-8")
    assert cell(card, "exact duplicates removed (corpus dedup)") == "4"  # release_factory's manifest
    assert cell(card, "near duplicates removed (corpus dedup)") == "2"
    assert "### Data Collection and Processing" in card and "## Reproduce" in card and str(tmp_path) not in card
    assert check_release(kwargs["out_dir"], kwargs["settings"])["card_matches_data"].passed


def test_the_stage_reruns_only_when_its_units_are_gone(built):
    """A rerun under the same key is cached; without the build's units (which the rebuild check reads) the
    stage builds again under the same key, into the same bytes, and records the release folder it wrote."""
    from corpus_dagster.core import records
    from corpus_dagster.release import driver

    layout, settings, out = built["layout"], built["settings"], built["out"]
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"}
    first = driver.run_release_stage(layout, settings)
    assert first["cached"]
    units = driver.units_path(layout, first["key"])
    units.unlink()
    again = driver.run_release_stage(layout, settings)
    assert not again["cached"] and again["key"] == first["key"] and units.is_file()
    assert driver.run_release_stage(layout, settings)["cached"]
    record = records.read_record(layout.stage(driver.STAGE))
    assert (layout.stage(driver.STAGE) / record.output_dir).resolve() == out.resolve()
    assert record.files["release"] == sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert not records.verify_outputs(layout.stage(driver.STAGE), record)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"} == before


def _rows_without_machine_urls(release: Path) -> list[tuple]:
    """Every release row; metadata without url and source_file (a local file's are its path on the machine
    that read it), so two builds from copies of the same files compare equal."""
    import pyarrow.parquet as pq

    out = []
    for part in sorted(release.glob("data/*/*.parquet")):
        for row in pq.read_table(part).to_pylist():
            meta = {k: v for k, v in json.loads(row.pop("metadata")).items() if k not in ("url", "source_file")}
            out.append((str(part.relative_to(release)), tuple(sorted(row.items(), key=str)), json.dumps(meta, sort_keys=True)))
    return out


def test_reproduce_folder_holds_no_absolute_path_and_rebuilds_the_same_release(built, tmp_path, monkeypatch):
    import shutil

    import yaml

    out, root = built["out"], built["root"]
    shipped = {name: (out / "reproduce" / name).read_bytes() for name in ("config.yaml", "LEDGER.jsonl")}
    for name, body in shipped.items():
        text = body.decode()
        assert str(root) not in text and str(Path(root).resolve()) not in text and "file://" not in text, name
    config = yaml.safe_load(shipped["config.yaml"])
    assert "paths" not in config and "executor" not in config
    rows = [json.loads(line) for line in shipped["LEDGER.jsonl"].decode().splitlines()]
    assert [r["urls"] for r in rows] == [["sources/alpha/alpha.jsonl"], ["sources/beta/beta.jsonl.zst"],
                                         ["sources/gamma/*.txt"]]
    assert all(not u.startswith("/") for r in rows for u in [*r["urls"], *r["sha256"]])
    # the reader's copy: the same files under sources/<source_id>/, the card's Reproduce commands
    here = tmp_path / "reader"
    (here / "sources" / "alpha").mkdir(parents=True)
    (here / "sources" / "beta").mkdir()
    shutil.copy(root / "sources" / "alpha.jsonl", here / "sources" / "alpha" / "alpha.jsonl")
    shutil.copy(root / "sources" / "beta.jsonl.zst", here / "sources" / "beta" / "beta.jsonl.zst")
    shutil.copytree(root / "sources" / "gamma", here / "sources" / "gamma")
    shutil.copytree(out / "reproduce", here / "reproduce")
    (here / "my-build.yaml").write_text(shipped["config.yaml"].decode() +
                                        "paths:\n  artifacts: ./artifacts\n  ledger: reproduce/LEDGER.jsonl\n")
    kept = here / "artifacts" / "release" / "testset"
    kept.mkdir(parents=True)
    shutil.copy(out / "reproduce" / "_CREATED_AT.parquet", kept / "_CREATED_AT.parquet")
    monkeypatch.chdir(here)
    corpus = CorpusConfig(config_path=str(here / "my-build.yaml"))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    materialize_global(corpus, instance)
    again = here / "artifacts" / "release" / "testset" / "v1"
    assert _rows_without_machine_urls(again) == _rows_without_machine_urls(out)
    assert (again / "reproduce" / "_CREATED_AT.parquet").read_bytes() == (out / "reproduce" / "_CREATED_AT.parquet").read_bytes()
