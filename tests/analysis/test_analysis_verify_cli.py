"""The verify/ scripts, run by their command line with the folders a user gives the analysis, agree with
the report of a pipeline build: `--corpus-dir artifacts/stages/clean --out-dir artifacts/analysis/<ds>/<v>`.

The clean stage writes rejects-*.parquet beside docs-*.parquet; the build here has identical rejected
documents, so a check that read every Parquet file of the folder would count exact groups the analysis
(over the docs files only) never saw."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from corpus_dagster.analysis.inputs import INPUTS_FILE, select_corpus_files
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = ("exact_groups", "cluster_jaccard", "rescore_sample")
SHORT = "Too short to keep."  # fails the clean word-count filter: a rejected document


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    """A small pipeline build whose alpha source holds copies of a kept and of a rejected document."""
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("verify_cli")
    config = write_setup(root)
    alpha = root / "sources" / "alpha.jsonl"
    rows = [json.loads(line) for line in alpha.read_text(encoding="utf-8").splitlines()]
    rows += [{"text": rows[0]["text"], "link": "https://a.example/copy"}]
    rows += [{"text": SHORT, "link": f"https://a.example/short{i}"} for i in range(3)]
    alpha.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    corpus = CorpusConfig(config_path=str(config))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    materialize_global(corpus, instance)
    return root / "artifacts"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def _dirs(artifacts: Path) -> list[str]:
    return ["--corpus-dir", str(artifacts / "stages" / "clean"), "--out-dir", str(artifacts / "analysis" / "testset" / "v1")]


def test_the_build_has_rejected_copies_beside_the_docs(build):
    rejects = [p for p in (build / "stages" / "clean").rglob("rejects-*.parquet")]
    texts = [t for p in rejects for t in pq.read_table(p).column("text").to_pylist()]
    assert texts.count(SHORT) == 3
    groups = (build / "analysis" / "testset" / "v1" / "duplicate_groups.jsonl").read_text().splitlines()
    assert len(groups) == 1  # the kept copy; the rejected ones are not the analysed corpus


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_passes_on_the_folders_the_pipeline_writes(build, script):
    res = _run([f"verify/{script}.py", *_dirs(build)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("PASS")


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_runs_as_a_module_of_the_installed_package(build, script):
    res = _run(["-m", f"corpus_dagster.verify.{script}", *_dirs(build)])
    assert res.returncode == 0, res.stdout + res.stderr


def test_exact_groups_agrees_with_the_report(build):
    res = _run(["verify/exact_groups.py", *_dirs(build)])
    assert "1 exact groups found, 1 reported" in res.stdout


def test_corpus_dir_alone_reads_what_the_analysis_read(build):
    """Without the out dir's list, the analysis's own selection rule: only the records' docs files."""
    groups = build / "analysis" / "testset" / "v1" / "duplicate_groups.jsonl"
    res = _run(["verify/exact_groups.py", "--corpus-dir", str(build / "stages" / "clean"), "--groups", str(groups)])
    assert res.returncode == 0, res.stdout + res.stderr
    files = select_corpus_files(build / "stages" / "clean")
    assert files and all(p.name.startswith("docs-") for p in files)
    listed = json.loads((build / "analysis" / "testset" / "v1" / INPUTS_FILE).read_text())["documents"]
    assert listed["corpus_dir"] == "../../../stages/clean"
    assert [e["name"] for e in listed["files"]] == [p.name for p in files]
    assert [e["sha256"] for e in listed["files"]] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]


def test_the_out_dir_alone_finds_its_corpus(build):
    res = _run(["verify/exact_groups.py", "--out-dir", str(build / "analysis" / "testset" / "v1")])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 exact groups found, 1 reported" in res.stdout

def test_every_parquet_file_of_the_folder_is_not_the_analysed_corpus(build):
    """What a check reading every *.parquet file (the rejects too) finds: groups the report never had."""
    sys.path.insert(0, str(REPO))
    from verify._reference import corpus_files
    from verify.exact_groups import check_exact_groups

    groups = build / "analysis" / "testset" / "v1" / "duplicate_groups.jsonl"
    res = check_exact_groups(corpus_files(build / "stages" / "clean"), groups)
    assert not res["passed"] and res["groups"] == 2


def test_a_changed_input_file_fails_the_check(build, tmp_path):
    import shutil

    copy = tmp_path / "artifacts"
    shutil.copytree(build, copy, symlinks=True)
    doc = sorted((copy / "stages" / "clean" / "beta").rglob("docs-*.parquet"))[0]
    table = pq.read_table(doc)
    pq.write_table(table.slice(1), doc)
    res = _run(["verify/exact_groups.py", "--out-dir", str(copy / "analysis" / "testset" / "v1")])
    assert res.returncode == 1
    assert "not read by the analysis" in res.stdout and "changed or gone" in res.stdout


def test_a_folder_with_other_files_than_the_analysis_read_fails(build, tmp_path):
    import shutil

    copy = tmp_path / "artifacts"
    shutil.copytree(build, copy, symlinks=True)
    extra = copy / "stages" / "clean" / "extra.parquet"
    shutil.copy(sorted((copy / "stages" / "clean" / "beta").rglob("docs-*.parquet"))[0], extra)
    res = _run(["verify/exact_groups.py", *_dirs(copy)])
    assert res.returncode == 1
    assert "not read by the analysis" in res.stdout


def test_a_key_folder_of_one_source_reads_its_docs_only(build):
    """A stage record above the folder still decides: pointed at one clean key folder, its docs files."""
    key_dir = next(p.parent for p in (build / "stages" / "clean" / "alpha").rglob("docs-*.parquet"))
    assert [p.name for p in select_corpus_files(key_dir)] == sorted(p.name for p in key_dir.glob("docs-*.parquet"))


def test_the_analysis_cli_on_the_clean_folder_matches_the_pipeline_and_its_checks(build, tmp_path):
    """A user's own analysis of stages/clean reads what the graph's read: the same exact groups, and the
    scripts pass on it with the same two arguments."""
    out = tmp_path / "mine"
    clean = build / "stages" / "clean"
    res = _run(["-m", "corpus_dagster.analysis", "--corpus-dir", str(clean), "--out-dir", str(out), "--step", "exact"])
    assert res.returncode == 0, res.stdout + res.stderr
    pipeline = build / "analysis" / "testset" / "v1" / "duplicate_groups.jsonl"
    assert (out / "duplicate_groups.jsonl").read_bytes() == pipeline.read_bytes()
    res = _run(["verify/exact_groups.py", "--corpus-dir", str(clean), "--out-dir", str(out)])
    assert res.returncode == 0, res.stdout + res.stderr
