"""`python -m corpus_dagster.run`: exit codes, one-line errors, the progress display, the log file, parallel sources.

The command runs as a person runs it (a subprocess from another working folder, its own DAGSTER_HOME), on the
small generated corpora of corpus_factory.
"""

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources

SOURCE_STEPS = ["raw_documents", "clean_documents", "minhash_signatures"]
STEP_LINE = re.compile(r"^run: (\S+)\s+(.+?)\s+(\d+\.\d) s  (.*)$")


def run_cli(root: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    elsewhere = root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster_home")}
    return subprocess.run([sys.executable, "-m", "corpus_dagster.run", *args], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=timeout)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("run: error:")]


def artifacts_of(config: Path) -> Path:
    return Path(yaml.safe_load(config.read_text())["paths"]["artifacts"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One successful run with sources in parallel (workers 2) and an explicit log file."""
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("cli")
    config = write_setup(root, workers=2)
    log = root / "my.log"
    proc = run_cli(root, str(config), "--log-file", str(log))
    return root, config, log, proc


def test_success_exit_0_and_one_line_per_step(built):
    root, config, log, proc = built
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert error_lines(proc) == []
    lines = [STEP_LINE.match(line) for line in proc.stdout.splitlines()]
    steps = [(m.group(1), m.group(2)) for m in lines if m]
    for sid in ("alpha", "beta", "gamma"):
        assert [s for who, s in steps if who == sid] == SOURCE_STEPS  # in graph order, once each
    corpus_steps = [s for who, s in steps if who == "corpus"]
    for step in ("dedup", "scrubbed", "shards_and_manifest", "token_streams"):
        assert corpus_steps.count(step) == 1
    checks = [s for s in corpus_steps if s.startswith("check ")]
    assert "check shards/ids_sorted" in checks and "check manifest/manifest_consistent" in checks
    assert all(m.group(4) == "passed" for m in lines if m and m.group(2).startswith("check "))
    assert len(checks) == len(set(checks))
    raw = next(m for m in lines if m and m.group(1) == "alpha" and m.group(2) == "raw_documents")
    assert raw.group(4).startswith("40 documents")
    for clean in (m for m in lines if m and m.group(2) == "clean_documents"):  # a reject count names its reasons
        rejected = int(re.search(r"([\d,]+) rejected", clean.group(4)).group(1).replace(",", ""))
        assert (": " in clean.group(4)) == (rejected > 0), clean.group(4)
    analysis = next(m for m in lines if m and m.group(2) == "corpus_analysis")
    assert "clean documents measured (before dedup)" in analysis.group(4)
    assert f"{len(checks)}/{len(checks)} checks passed" in proc.stdout


def test_console_has_no_dagster_event_stream(built):
    _, _, _, proc = built
    out = proc.stdout + proc.stderr
    for noise in ("DEBUG", "STEP_START", "ENGINE_EVENT", "RESOURCE_INIT", "Executing steps", "Warning"):
        assert noise not in out, noise


def test_log_file_printed_and_holds_the_event_stream(built):
    _, _, log, proc = built
    assert f"run: log {log}" in proc.stdout.splitlines()[0]
    text = log.read_text()
    assert "build_source[alpha] raw_documents STEP_START" in text
    assert "build_corpus dedup.dedup_finish STEP_SUCCESS" in text and "build_corpus dedup.dedup_lsh_0 STEP_SUCCESS" in text
    assert "DEBUG" in text and "PIPELINE_SUCCESS" in text


def test_runs_are_named_jobs_and_sources_ran_in_parallel(built, monkeypatch):
    root, _, log, _ = built
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    with dg.DagsterInstance.get() as instance:
        records = instance.get_run_records()
    assert sorted(r.dagster_run.job_name for r in records) == ["build_corpus"] + ["build_source"] * 3
    by_source = {r.dagster_run.tags.get("dagster/partition"): r for r in records}
    assert set(by_source) == {None, "alpha", "beta", "gamma"}
    # workers: 2 -> two sources ran at the same time (each started before the other ended)
    runs = [by_source[s] for s in ("alpha", "beta", "gamma")]
    assert any(a.start_time < b.end_time and b.start_time < a.end_time for a, b in itertools.combinations(runs, 2))
    # the two source runs going at once share the config's workers: one process each, not two; the corpus run
    # (alone) takes all of them
    workers = {s: r.dagster_run.run_config["resources"]["corpus"]["config"]["workers"] for s, r in by_source.items()}
    assert workers == {"alpha": 1, "beta": 1, "gamma": 1, None: None}
    # each source run's steps ran in its own (run-pool) process: no process per step
    text = log.read_text()
    assert "multiprocess executor" not in text
    for sid in ("alpha", "beta", "gamma"):
        assert re.search(rf"build_source\[{sid}\] - ENGINE_EVENT: Executing steps in process", text)


def test_parallel_sources_byte_identical_to_serial(built, tmp_path):
    _, config, _, proc = built
    assert proc.returncode == 0
    published = artifacts_of(config) / "corpus" / "testset" / "v1"
    art = tmp_path / "serial"
    (art / "corpus").mkdir(parents=True)
    shutil.copy(artifacts_of(config) / "corpus" / "LEDGER.jsonl", art / "corpus" / "LEDGER.jsonl")
    corpus = CorpusConfig(config_path=str(config), artifacts=str(art), workers=1)
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    materialize_global(corpus, instance)
    serial = art / "corpus" / "testset" / "v1"
    names = sorted(p.name for p in published.iterdir())
    assert names == sorted(p.name for p in serial.iterdir()) and any(n.startswith("shard-") for n in names)
    for name in names:
        assert (published / name).read_bytes() == (serial / name).read_bytes(), name


def test_failing_check_exit_4(built):
    """Runs last on the module's corpus: a manifest edited in place together with the sha256 its publish
    record holds (so the publish stage trusts it; an edit alone is rebuilt) is caught by the manifest check."""
    root, config, _, _ = built
    manifest = artifacts_of(config) / "corpus" / "testset" / "v1" / "_MANIFEST.json"
    st = manifest.stat()
    text = manifest.read_text()
    n_docs = json.loads(text)["n_docs"]
    edited = text.replace(f'"n_docs": {n_docs}', f'"n_docs": {n_docs + 1}', 1)
    assert len(edited) == len(text) and edited != text
    manifest.write_text(edited)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    record_path = artifacts_of(config) / "stages" / "publish" / "_RECORD.json"
    record = json.loads(record_path.read_text())
    record["outputs"]["_MANIFEST.json"]["sha256"] = hashlib.sha256(edited.encode()).hexdigest()
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    proc = run_cli(root, str(config))
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = error_lines(proc)
    assert any("check manifest/manifest_consistent failed" in e and f"n_docs {n_docs + 1}" in e for e in errors), errors
    assert "Traceback" not in proc.stdout + proc.stderr


def test_bad_config_exit_2(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path, extra={"workers": "many"})
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 2
    assert error_lines(proc) == [line for line in proc.stderr.splitlines() if line.strip()]
    (line,) = error_lines(proc)
    assert str(config) in line and "$.workers" in line and "Traceback" not in proc.stderr


def test_bad_ledger_line_exit_2(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path)
    ledger = artifacts_of(config) / "corpus" / "LEDGER.jsonl"
    with ledger.open("a") as f:
        f.write(json.dumps({"source_id": "delta", "urls": ["file:///x"], "format": "csv", "license_spdx": "MIT"}) + "\n")
    proc = run_cli(tmp_path, str(config), "--log-file", str(tmp_path / "l.log"))
    assert proc.returncode == 2, proc.stderr
    (line,) = error_lines(proc)
    assert str(ledger) in line and "line 4" in line and "$.format" in line
    assert "Traceback" not in proc.stderr and "LedgerError" in (tmp_path / "l.log").read_text()


@pytest.mark.parametrize(("extra", "ledger_edit", "expect"), [
    ({"tokenize": {"eod_token": "</s>"}}, None, r"\$\.tokenize: tokenize\.eod_token '</s>' is not a single token"),
    ({"tokenize": {"kind": "huggingface", "path": "/no/such/tokenizer.json"}}, None, r"\$\.tokenize: .*tokenizer\.json"),
    ({"release": {"min_tokens": 512, "max_tokens": 256}}, None, r"\$\.release\.max_tokens: 256 must be above min_tokens 512"),
    ({}, {"keep_fields": ["source_id"]}, r"line 1: \$\.keep_fields: \['source_id'\] are names the pipeline gives"),
    ({}, {"keep_fields": [], "id_field": "link"}, r"line 1: \$\.id_field: 'link' must also be listed in keep_fields"),
])
def test_config_and_ledger_mistakes_exit_2_on_one_line_before_any_run(tmp_path, extra, ledger_edit, expect):
    from corpus_factory import write_setup

    config = write_setup(tmp_path, extra=extra)
    if ledger_edit is not None:
        ledger = artifacts_of(config) / "corpus" / "LEDGER.jsonl"
        rows = [json.loads(line) for line in ledger.read_text().splitlines()]
        rows[0].update(ledger_edit)
        ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc)
    assert re.search(expect, line), line
    assert "source(s)" not in proc.stdout and not (tmp_path / "dagster_home").exists()  # no run was started


def test_an_id_column_can_be_kept_and_named_as_id_field(tmp_path):
    """A Hub dump's `id` is both the ledger's id_field and a kept field: the ledger loads, the fetch keeps it."""
    from corpus_dagster.core.ledger import parse_ledger_lines

    row = {"source_id": "dump", "urls": ["/d/*.parquet"], "format": "parquet", "license_spdx": "MIT",
           "url_field": "url", "keep_fields": ["id", "url", "token_count"], "id_field": "id"}
    (src,) = parse_ledger_lines([json.dumps(row)], "LEDGER.jsonl")
    assert src.keep_fields == ("id", "url", "token_count") and src.id_field == "id"


def test_usage_error_exit_2_and_help_lists_exit_codes(tmp_path):
    assert run_cli(tmp_path).returncode == 2
    assert run_cli(tmp_path, "a.yaml", "--no-such-flag").returncode == 2
    helped = run_cli(tmp_path, "--help")
    assert helped.returncode == 0
    for code in ("0 ", "2 ", "3 ", "4 "):
        assert f"\n  {code}" in helped.stdout


def test_missing_source_file_stops_at_first_failure(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path, workers=1)
    (tmp_path / "sources" / "alpha.jsonl").unlink()
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = error_lines(proc)
    assert "alpha" in line and str(tmp_path / "sources" / "alpha.jsonl") in line
    assert "not run after the first failure (use --keep-going to try them): beta, gamma" in proc.stdout
    # the failing step and its reason come first; the steps left out follow as one count, not a line each
    assert "Dependencies for step" not in proc.stdout and "skipped (an upstream" not in proc.stdout
    lines = proc.stdout.splitlines()
    failed = next(i for i, x in enumerate(lines) if "raw_documents" in x and "FAILED:" in x)
    (count,) = [i for i, x in enumerate(lines) if re.search(r"alpha +2 steps not run \(an upstream step failed", x)]
    assert failed < count
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (artifacts_of(config) / "corpus" / "testset").exists()
    log = Path(re.search(r"^run: log (\S+)$", proc.stdout, re.M).group(1))
    assert log.parent == artifacts_of(config) / "logs" and log.name.startswith("run-")
    text = log.read_text()
    assert "STEP_FAILURE" in text and "Stack Trace" in text and "corpus_failure" in text


def test_missing_source_file_keep_going_publishes_the_others(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path, workers=2)
    (tmp_path / "sources" / "alpha.jsonl").unlink()
    proc = run_cli(tmp_path, str(config), "--keep-going")
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = error_lines(proc)
    assert "alpha" in line and "alpha.jsonl" in line
    assert "building the corpus over the 2 source(s) that succeeded" in proc.stdout
    manifest = json.loads((artifacts_of(config) / "corpus" / "testset" / "v1" / "_MANIFEST.json").read_text())
    assert manifest["n_docs"] == 52  # beta 40 + gamma 12


@pytest.mark.parametrize(("workers", "runs", "each"), [(2, 2, 1), (8, 3, 2), (8, 1, 8), (1, 1, 1), (3, 2, 1), (4, 0, 4)])
def test_source_runs_share_the_workers(workers, runs, each):
    from corpus_dagster.defs.runner import source_run_workers

    assert source_run_workers(workers, runs) == each
