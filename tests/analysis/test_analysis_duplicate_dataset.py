"""near_dup/: the analysis's duplicate tables as a dataset folder with its own card, loadable offline
with `datasets`, beside the tables at their old paths; and the per-step dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from corpus_dagster.analysis.cli import main as cli_main
from corpus_dagster.analysis.inputs import corpus_from_dir
from corpus_dagster.analysis.planted import planted_corpus
from corpus_dagster.analysis.runner import run_analysis
from corpus_dagster.core.config import load_settings


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("near_dup")
    table = planted_corpus(400, seed=3, near_share=0.2).table
    corpus = root / "in"
    corpus.mkdir()
    for k in range(2):
        pq.write_table(table.slice(k * 200, 200), corpus / f"shard_{k:05d}.parquet", row_group_size=100)
    out = root / "out"
    run_analysis(corpus_from_dir(corpus), out, load_settings(None).analysis)
    return corpus, out


def test_the_folder_holds_every_duplicate_table_under_its_own_name(analysed):
    _, out = analysed
    nd = out / "near_dup"
    for name in ["duplicate_groups.jsonl"] + [f"near_dup_clusters_t{t}.jsonl" for t in (70, 80, 90)]:
        assert (nd / name).read_bytes() == (out / name).read_bytes()
    parts = sorted(p.name for p in (out / "doc_duplicates_t70").glob("*.parquet"))
    assert parts and sorted(p.name for p in (nd / "doc_duplicates_t70").glob("*.parquet")) == parts


def test_the_card_names_one_config_per_table(analysed):
    _, out = analysed
    text = (out / "near_dup" / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    configs = {c["config_name"]: c["data_files"][0]["path"] for c in front["configs"]}
    assert configs == {
        "doc_duplicates_t70": "doc_duplicates_t70/*.parquet",
        "near_dup_clusters_t70": "near_dup_clusters_t70.jsonl",
        "near_dup_clusters_t80": "near_dup_clusters_t80.jsonl",
        "near_dup_clusters_t90": "near_dup_clusters_t90.jsonl",
        "duplicate_groups": "duplicate_groups.jsonl",
    }
    for path in configs.values():
        assert list((out / "near_dup").glob(path))


def _load(args: str, cache: Path) -> list[dict]:
    """datasets.load_dataset offline in a child process (its cache and imports stay out of this one)."""
    code = ("import datasets, json, sys\n"
            f"ds = datasets.load_dataset({args}, split='train', cache_dir={str(cache)!r})\n"
            "sys.stdout.write(json.dumps(ds.to_list()))\n")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(cache / "home")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def test_datasets_loads_the_duplicate_table_offline_row_for_row(analysed, tmp_path):
    _, out = analysed
    path = out / "near_dup"
    rows = _load(f"'parquet', data_files={str(path / 'doc_duplicates_t70/*.parquet')!r}", tmp_path)
    table = pq.read_table(out / "doc_duplicates_t70").to_pylist()
    assert len(rows) == len(table) > 0
    assert rows == json.loads(json.dumps(table))


def test_datasets_loads_a_cluster_file(analysed, tmp_path):
    _, out = analysed
    rows = _load(f"'json', data_files={str(out / 'near_dup' / 'near_dup_clusters_t70.jsonl')!r}", tmp_path)
    lines = [json.loads(x) for x in (out / "near_dup_clusters_t70.jsonl").read_text().splitlines() if x]
    assert rows == lines and rows


def test_dry_run_of_one_step_prints_only_that_step(analysed, capsys):
    corpus, _ = analysed
    assert cli_main(["--corpus-dir", str(corpus), "--out-dir", str(corpus.parent / "dry"), "--dry-run",
                     "--step", "jaccard"]) == 0
    printed = capsys.readouterr().out.splitlines()
    steps = [line.split()[0] for line in printed[2:]]
    assert steps == ["jaccard", "total"]
    assert printed[2].split()[1:] == printed[3].split()[1:]  # the total is that step's own estimate


def test_the_stage_record_lists_the_folder(analysed):
    """The graph records every file of the out dir outside _state/_work: near_dup/ is among them."""
    from corpus_dagster.analysis.runner import INTERNAL
    from corpus_dagster.analysis.steps.registry import step_outputs

    _, out = analysed
    assert "near_dup" in step_outputs("report", load_settings(None).analysis)
    names = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.relative_to(out).parts[0] not in INTERNAL]
    assert "near_dup/README.md" in names and any(n.startswith("near_dup/doc_duplicates_t70/") for n in names)


def test_an_out_dir_without_the_folder_reruns_the_report(analysed, tmp_path):
    import shutil

    corpus, out = analysed
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "near_dup")
    res = run_analysis(corpus_from_dir(corpus), copy, load_settings(None).analysis)
    assert res["ran"] == ["report"] and (copy / "near_dup" / "README.md").is_file()
