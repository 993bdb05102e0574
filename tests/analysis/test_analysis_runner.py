"""The analysis runner: its settings split (execution-only against output-deciding) and its per-step records."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus_dagster.analysis import runner
from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.planted import planted_corpus
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.core.config import load_config, load_schema, load_settings, output_settings


def test_execution_only_settings_are_those_the_core_config_marks_for_the_section():
    resolved = load_config(None)
    section = resolved["analysis"]
    assert runner.EXECUTION_KEYS  # the core config marks some: batch sizes and verification budgets
    schema = load_schema("corpus-config.schema.json")["properties"]["analysis"]["properties"]
    assert set(runner.EXECUTION_KEYS) <= set(schema) and set(schema) <= set(section)
    for name in section:
        changed = copy.deepcopy(resolved)
        changed["analysis"][name] = "another value"
        output_deciding = output_settings(changed, "analysis") != output_settings(resolved, "analysis")
        assert output_deciding == (name not in runner.EXECUTION_KEYS), name


def test_the_run_key_hashes_every_setting_but_the_execution_only_ones():
    settings = load_settings(None)
    cfg = settings.analysis
    spec = runner.analysis_spec(cfg, settings.near_dup)
    inputs = {"documents": [[["a.parquet", 10, "f" * 64]], [None], "corpus"]}
    base = runner.run_key(inputs, cfg, spec)
    for f in dataclasses.fields(cfg):
        name = f.name
        moved = runner.run_key(inputs, dataclasses.replace(cfg, **{name: "another value"}), spec) != base
        assert moved == (name not in runner.EXECUTION_KEYS), name
    for f in dataclasses.fields(spec):  # the graph's shape decides the pairs
        assert runner.run_key(inputs, cfg, dataclasses.replace(spec, **{f.name: 3})) != base, f.name


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    pq.write_table(planted_corpus(240, seed=3, near_share=0.2).table, folder / "part.parquet", row_group_size=100)
    out = tmp_path_factory.mktemp("out")
    run_analysis(corpus_from_dir(folder), out, load_settings(None).analysis)
    return folder, out


def _rerun(corpus: Path, out: Path) -> dict:
    return run_analysis(corpus_from_dir(corpus), out, load_settings(None).analysis)


def test_every_step_has_a_core_stage_record_listing_its_files(finished):
    _, out = finished
    from corpus_dagster.core.records import read_record

    for step in runner.STEPS:
        record = read_record(out / "_state" / step)
        assert record is not None and record.stage == f"analysis.{step}" and record.outputs, step
    assert "near_dup/README.md" in read_record(out / "_state" / "report").outputs


def test_an_edited_output_reruns_its_step_and_the_steps_after_it(finished):
    corpus, out = finished
    views = out / "duplication_views.json"
    good = views.read_bytes()
    views.write_bytes(good.replace(b"affected", b"affectee", 1))  # same size, other bytes
    res = _rerun(corpus, out)
    assert res["skipped"] == ["scan", "exact", "candidates", "jaccard", "duplicates"]
    assert res["ran"] == ["clusters", "lengths", "figures", "report"]
    assert views.read_bytes() == good


def test_a_damaged_intermediate_reruns_from_the_step_that_wrote_it(finished):
    corpus, out = finished
    (out / "_work" / "candidates.npy").write_bytes(b"truncated")
    res = _rerun(corpus, out)
    assert res["skipped"] == ["scan", "exact"] and res["ran"][0] == "candidates"
    assert _rerun(corpus, out)["ran"] == []
