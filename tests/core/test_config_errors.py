"""Bad config and ledger input: errors name the file, the line and the JSON path, and the CLI exits 2.

Covers the line locator of config violations (YAML and JSON), config `sources` lists checked against the
ledger, sha256 pins checked against the files a source expands to (pure rule, fetch step, pre-flight), and
how the CLI's watcher classifies a config or ledger error raised inside a step.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from corpus_dagster.core.config import load_config, load_settings, node_position
from corpus_dagster.core.errors import ChecksumMismatch, ConfigError, LedgerError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import (
    Source,
    check_config_against_ledger,
    ledger_line,
    load_ledger,
    source_lists,
)
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.ingest.pins import checked_pins, match_pins, pin_url, preflight

ZERO = "0" * 64


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path, overrides: dict | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides)
    return err.value


# -- config violations name the line --------------------------------------------------------------------------

def test_yaml_nested_bad_type_names_file_line_column_and_path(tmp_path):
    cfg = write(tmp_path / "c.yaml", "dataset: x\nclean:\n  gopher:\n    min_words: ten\n")
    err = config_error(cfg)
    text = str(err)
    assert text.startswith(f"{cfg}: 1 config violation(s):")
    assert err.violations == ["line 4, column 5: $.clean.gopher.min_words: 'ten' is not of type 'integer', 'null'"]


def test_json_nested_bad_type_names_line(tmp_path):
    body = json.dumps({"dataset": "x", "near_dup": {"num_perm": "many"}}, indent=2)
    cfg = write(tmp_path / "c.json", body)
    (violation,) = config_error(cfg).violations
    line = next(i for i, ln in enumerate(body.splitlines(), start=1) if "num_perm" in ln)
    assert violation.startswith(f"line {line}, column 5: $.near_dup.num_perm: 'many' is not of type")


def test_unexpected_key_points_at_the_key_not_its_parent(tmp_path):
    cfg = write(tmp_path / "c.yaml", "dataset: x\npaths:\n  artifacts: /a\n  artefacts: /b\nbogus: 1\n")
    assert sorted(config_error(cfg).violations) == [
        "line 4, column 3: $.paths: Additional properties are not allowed ('artefacts' was unexpected)",
        "line 5, column 1: $: Additional properties are not allowed ('bogus' was unexpected)",
    ]


def test_list_item_and_cross_key_rule_are_located(tmp_path):
    cfg = write(tmp_path / "c.yaml", "clean:\n  gopher:\n    sources:\n      - a\n      - ''\n")
    (violation,) = config_error(cfg).violations
    assert violation.startswith("line 5, column 9: $.clean.gopher.sources[1]:")
    bands = write(tmp_path / "d.yaml", "near_dup:\n  num_perm: 100\n  bands: 16\n  rows: 8\n")
    assert config_error(bands).violations == [
        "line 3, column 3: $.near_dup.bands: bands x rows (16 x 8) exceeds num_perm (100)"]
    half = write(tmp_path / "e.yaml", "near_dup:\n  rows: 8\n")
    assert config_error(half).violations == [
        "line 1, column 1: $.near_dup: set both bands and rows, or neither (null chooses both)"]


def test_yaml_syntax_error_names_line(tmp_path):
    cfg = write(tmp_path / "c.yaml", "dataset: x\nclean: {gopher: [1,\n")
    (violation,) = config_error(cfg).violations
    assert violation.startswith("line 3, column 1: $: not valid YAML/JSON:")


def test_override_value_gets_no_file_line(tmp_path):
    cfg = write(tmp_path / "c.yaml", "dataset: x\nworkers: 2\n")
    assert config_error(cfg, {"workers": 0}).violations == ["$.workers: 0 is less than the minimum of 1"]


def test_violations_without_a_file_keep_their_json_path():
    with pytest.raises(ConfigError) as err:
        load_config(None, {"shard_rows": 0})
    assert err.value.violations == ["$.shard_rows: 0 is less than the minimum of 1"]


def test_node_position_stops_at_the_deepest_ancestor_in_the_file():
    root = yaml.compose("a:\n  b: 1\n")
    assert node_position(root, ("a", "b")) == (2, 3)
    assert node_position(root, ("a", "c")) == (1, 1)  # `a` is in the file, `c` a filled-in default
    assert node_position(root, ("z",)) is None
    assert node_position(None, ("a",)) is None


# -- config `sources` lists against the ledger ------------------------------------------------------------------

SOURCES = [Source("alpha", ("/a",), "jsonl", "MIT"), Source("beta", ("/b",), "jsonl", "MIT")]


def test_unknown_rule_source_names_file_line_path_and_the_ledger_ids(tmp_path):
    cfg = write(tmp_path / "c.yaml", "dataset: x\nclean:\n  gopher:\n    sources: [alpah]\n  lang:\n    sources: [beta]\n")
    settings = load_settings(cfg)
    with pytest.raises(ConfigError) as err:
        check_config_against_ledger(settings, SOURCES, cfg)
    assert str(err.value).startswith(f"{cfg}: 1 config violation(s):")
    assert err.value.violations == [
        "line 4, column 15: $.clean.gopher.sources[0]: unknown source 'alpah' (the ledger has: alpha, beta)"
    ]
    check_config_against_ledger(settings, ["alpah", "beta"], cfg)  # ids work as well as rows
    check_config_against_ledger(load_settings(None), [], None)  # no sources lists: nothing to check


def test_every_sources_key_of_the_schema_is_checked(tmp_path):
    from corpus_dagster.core.config import load_schema

    rules = {name: sub for name, sub in load_schema("corpus-config.schema.json")["properties"]["clean"]["properties"].items()
             if "sources" in sub.get("properties", {})}
    lists = source_lists(load_settings(None, {"clean": {r: {"sources": ["x"]} for r in rules}}))
    assert sorted(p for p, _ in lists) == sorted(("clean", r, "sources") for r in rules)
    assert len(rules) == json.dumps(load_schema("corpus-config.schema.json")).count('"sources": {') >= 10
    with pytest.raises(ConfigError) as err:
        check_config_against_ledger(load_settings(None, {"clean": {"ppl": {"sources": ["alpha", "nope"]}}}), SOURCES, None)
    assert err.value.violations == ["$.clean.ppl.sources[1]: unknown source 'nope' (the ledger has: alpha, beta)"]


def test_many_ledger_ids_show_the_closest(tmp_path):
    many = [f"src-{i:03d}" for i in range(50)] + ["wikipedia"]
    with pytest.raises(ConfigError, match=r"unknown source 'wikipedai' \(the ledger has 51 sources; closest: wikipedia\)"):
        check_config_against_ledger(load_settings(None, {"clean": {"lang": {"sources": ["wikipedai"]}}}), many, None)


# -- sha256 pins against the expanded files ---------------------------------------------------------------------

def test_pin_keys_are_spelled_like_expanded_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert pin_url(str(tmp_path / "a.txt")) == f"file://{tmp_path}/a.txt"
    assert pin_url("rel/a.txt") == f"file://{tmp_path}/rel/a.txt"
    assert pin_url("~/a.txt") == f"file://{tmp_path}/home/a.txt"
    assert pin_url("https://x.example/a.txt") == "https://x.example/a.txt"


def test_match_pins_applies_bare_path_keys_and_names_stale_ones(tmp_path):
    files = [f"file://{tmp_path}/d/a.txt", f"file://{tmp_path}/d/b.txt"]
    src = Source("s", (f"{tmp_path}/d/*.txt",), "text", "MIT",
                 sha256={f"{tmp_path}/d/a.txt": "1" * 64, f"file://{tmp_path}/d/b.txt": "2" * 64})
    assert match_pins(src, files) == ({files[0]: "1" * 64, files[1]: "2" * 64}, [])
    stale = Source("s", src.urls, "text", "MIT", sha256={f"file://{tmp_path}/d/gone.txt": ZERO})
    pins, (problem,) = match_pins(stale, files)
    assert pins == {}
    assert problem.startswith(f'$.sha256["file://{tmp_path}/d/gone.txt"]: pins a file that is not among the files of '
                              f"source 's' (its urls expand to 2 file(s): {files[0]}, {files[1]})")
    twice = Source("s", src.urls, "text", "MIT", sha256={files[0]: "1" * 64, f"{tmp_path}/d/a.txt": "2" * 64})
    assert "again with another hash" in match_pins(twice, files)[1][0]


def test_checked_pins_names_ledger_file_and_line(tmp_path):
    ledger = write(tmp_path / "LEDGER.jsonl", '{"source_id": "a"}\n{"source_id": "s"}\n')
    assert ledger_line(ledger, "s") == 2 and ledger_line(ledger, "zzz") is None
    src = Source("s", ("/x/*.txt",), "text", "MIT", sha256={"/x/gone.txt": ZERO})
    with pytest.raises(LedgerError) as err:
        checked_pins(src, ["file:///x/a.txt"], ledger)
    (violation,) = err.value.violations
    assert str(err.value).startswith(f"{ledger}: 1 ledger violation(s):")
    assert violation.startswith('line 2: $.sha256["/x/gone.txt"]: pins a file (read as file:///x/gone.txt) that is not')
    assert "source 's'" in violation


@pytest.fixture
def fetch_env(tmp_path):
    settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / "art")}})
    folder = tmp_path / "d"
    for name in ("a.txt", "b.txt"):
        write(folder / name, f"text of {name}\n")
    return tmp_path, Layout.from_config(settings.resolved), settings.ingest


def test_fetch_applies_a_pin_keyed_by_a_bare_path(fetch_env):
    tmp_path, layout, ingest = fetch_env
    src = Source("s", (f"{tmp_path}/d/*.txt",), "text", "MIT", sha256={f"{tmp_path}/d/a.txt": ZERO})
    with pytest.raises(ChecksumMismatch, match=f"ledger pins sha256 {ZERO}"):
        fetch_source(src, layout, ingest)
    good = hashlib.sha256((tmp_path / "d" / "a.txt").read_bytes()).hexdigest()
    ok = Source("s", src.urls, "text", "MIT", sha256={f"{tmp_path}/d/a.txt": good})
    assert fetch_source(ok, layout, ingest).docs == 2


def test_fetch_fails_on_a_pin_of_a_removed_file_before_reading(fetch_env):
    tmp_path, layout, ingest = fetch_env
    write(layout.ledger, json.dumps({"source_id": "other"}) + "\n" + json.dumps({"source_id": "s"}) + "\n")
    src = Source("s", (f"file://{tmp_path}/d/*.txt",), "text", "MIT", sha256={f"file://{tmp_path}/d/gone.txt": ZERO})
    with pytest.raises(LedgerError) as err:
        fetch_source(src, layout, ingest)
    assert str(err.value).startswith(f"{layout.ledger}: 1 ledger violation(s):")
    assert err.value.violations[0].startswith(f'line 2: $.sha256["file://{tmp_path}/d/gone.txt"]: pins a file')
    assert not layout.raw_source("s").exists()


# -- pre-flight and the Dagster side ---------------------------------------------------------------------------

@pytest.fixture
def setup(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path)
    ledger = tmp_path / "artifacts" / "corpus" / "LEDGER.jsonl"
    return tmp_path, config, ledger


def set_row(ledger: Path, sid: str, **fields) -> None:
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    for row in rows:
        if row["source_id"] == sid:
            row.update(fields)
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))


def set_config(config: Path, **extra) -> None:
    cfg = yaml.safe_load(config.read_text())
    cfg.update(extra)
    config.write_text(yaml.safe_dump(cfg))


def test_preflight_unknown_rule_source(setup):
    _, config, ledger = setup
    set_config(config, clean={"gopher": {"sources": ["alpah"]}})
    settings = load_settings(config)
    with pytest.raises(ConfigError) as err:
        preflight(settings, load_ledger(ledger), config)
    (violation,) = err.value.violations
    assert err.value.where == str(config)
    assert "$.clean.gopher.sources[0]: unknown source 'alpah' (the ledger has: alpha, beta, gamma)" in violation
    assert violation.startswith("line ")


def test_preflight_stale_pin_and_bare_path_pin(setup):
    tmp_path, config, ledger = setup
    good = hashlib.sha256((tmp_path / "sources" / "beta.jsonl.zst").read_bytes()).hexdigest()
    set_row(ledger, "beta", sha256={str(tmp_path / "sources" / "beta.jsonl.zst"): good})  # the bare path, as in urls
    settings = load_settings(config)
    preflight(settings, load_ledger(ledger), config)
    gone = f"file://{tmp_path}/sources/gamma/doc99.txt"
    set_row(ledger, "gamma", sha256={gone: ZERO})
    with pytest.raises(LedgerError) as err:
        preflight(settings, load_ledger(ledger), config)
    assert err.value.where == str(ledger)
    (violation,) = err.value.violations
    assert violation.startswith(f'line 3: $.sha256["{gone}"]: pins a file that is not among the files of source \'gamma\'')


def test_preflight_leaves_an_unlistable_source_to_its_fetch(setup):
    tmp_path, config, ledger = setup
    set_row(ledger, "alpha", sha256={f"file://{tmp_path}/sources/alpha.jsonl": ZERO})
    (tmp_path / "sources" / "alpha.jsonl").unlink()
    preflight(load_settings(config), load_ledger(ledger), config)  # the fetch reports the missing file (exit 3)


def test_resource_load_checks_config_sources_against_ledger(setup):
    from corpus_dagster.defs.resources import CorpusConfig

    _, config, ledger = setup
    set_config(config, clean={"lang": {"sources": ["beta", "delta"]}})
    corpus = CorpusConfig(config_path=str(config))
    with pytest.raises(ConfigError, match=r"\$\.clean\.lang\.sources\[1\]: unknown source 'delta'"):
        corpus.load()
    assert corpus.layout().ledger == ledger  # paths only: the sensors keep working
    set_config(config, clean={"lang": {"sources": ["beta"]}})
    corpus.load()


def _session_failures(corpus, source_id: str):
    """Materialize raw_documents[source_id] in a tagged run and return what the CLI's watcher makes of it."""
    import dagster as dg

    from corpus_dagster.cli.progress_display import SESSION_TAG, RunWatcher
    from corpus_dagster.defs.ingest import raw_documents
    from corpus_dagster.defs.runner import add_partitions

    instance = dg.DagsterInstance.ephemeral()
    add_partitions(instance, [source_id])
    dg.materialize([raw_documents], partition_key=source_id, resources={"corpus": corpus}, instance=instance,
                   raise_on_error=False, tags={SESSION_TAG: "s1"})
    watcher = RunWatcher(instance, "s1", io.StringIO(), out=io.StringIO())
    watcher.poll()
    return watcher.failures


def test_stale_pin_in_the_fetch_step_is_bad_input_for_the_cli(setup):
    from corpus_dagster.defs.resources import CorpusConfig

    tmp_path, config, ledger = setup
    gone = f"file://{tmp_path}/sources/gamma/doc99.txt"
    set_row(ledger, "gamma", sha256={gone: ZERO})
    (failure,) = _session_failures(CorpusConfig(config_path=str(config)), "gamma")
    assert failure.error_class == "LedgerError" and failure.bad_input and failure.kind == "source"
    assert f"{ledger}: 1 ledger violation(s): line 3: $.sha256[\"{gone}\"]" in failure.message


def test_unknown_rule_source_in_a_step_is_bad_input_for_the_cli(setup):
    from corpus_dagster.defs.resources import CorpusConfig

    _, config, _ = setup
    set_config(config, clean={"gopher": {"sources": ["alpah"]}})
    (failure,) = _session_failures(CorpusConfig(config_path=str(config)), "alpha")
    assert failure.error_class == "ConfigError" and failure.bad_input
    assert "unknown source 'alpah'" in failure.message and str(config) in failure.message


def test_source_failure_is_not_bad_input(setup):
    from corpus_dagster.defs.resources import CorpusConfig

    tmp_path, config, _ = setup
    (tmp_path / "sources" / "alpha.jsonl").unlink()
    (failure,) = _session_failures(CorpusConfig(config_path=str(config)), "alpha")
    assert failure.error_class == "SourceError" and not failure.bad_input


# -- the CLI -----------------------------------------------------------------------------------------------------

def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    elsewhere = root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster_home")}
    return subprocess.run([sys.executable, "-m", "corpus_dagster.run", *args], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=600)


def error_line(proc: subprocess.CompletedProcess) -> str:
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("run: error:")]
    return line


def test_cli_nested_bad_type_exit_2_names_line(setup):
    tmp_path, config, _ = setup
    set_config(config, clean={"gopher": {"min_words": "ten"}})
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    assert str(config) in line and "$.clean.gopher.min_words" in line
    yaml_line = next(i for i, ln in enumerate(config.read_text().splitlines(), start=1) if "min_words" in ln)
    assert f"line {yaml_line}, column" in line


def test_cli_bad_input_exit_2_before_any_run(setup):
    """A config `sources` entry the ledger lacks, then a pin of a removed file: each exits 2 with one line and
    starts no run (needs corpus_dagster.cli.run to call pins.preflight)."""
    import dagster as dg

    tmp_path, config, ledger = setup
    set_config(config, clean={"gopher": {"sources": ["alpah"]}})
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = error_line(proc)
    assert str(config) in line and "$.clean.gopher.sources[0]: unknown source 'alpah'" in line and "line " in line

    set_config(config, clean={})
    gone = f"file://{tmp_path}/sources/gamma/doc99.txt"
    set_row(ledger, "gamma", sha256={gone: ZERO})
    proc = run_cli(tmp_path, str(config))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = error_line(proc)
    assert str(ledger) in line and f'line 3: $.sha256["{gone}"]' in line and "source 'gamma'" in line
    assert "Traceback" not in proc.stderr
    if (tmp_path / "dagster_home").is_dir():
        with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
            assert instance.get_run_records() == []
