"""A ledger writer names sources and row predicates, nothing more: through the CLI, a `where` outside the
row-predicate grammar is refused before any run (exit 2, one line naming the ledger line and the construct),
and what a refused table function would have read appears nowhere."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SECRET = "secret-first-line-7f3a"


def run_cli(root: Path, config: Path) -> subprocess.CompletedProcess:
    elsewhere = root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster_home")}
    return subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config), "--log-file", str(root / "run.log")],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("run: error:")]


def setup_with_row(root: Path, **row) -> tuple[Path, Path]:
    """The factory's three-source setup with `row` merged into the ledger's second line (beta)."""
    from corpus_factory import write_setup

    config = write_setup(root)
    ledger = Path(yaml.safe_load(config.read_text())["paths"]["artifacts"]) / "corpus" / "LEDGER.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[1].update(row)
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return config, ledger


@pytest.fixture
def secret_csv(tmp_path):
    path = tmp_path / "private.csv"
    path.write_text(f"{SECRET}\nsecond-line\n")
    return path


@pytest.mark.parametrize(
    ("where", "construct"),
    [
        ("content IN (SELECT a FROM read_csv('{csv}'))", "a subquery (SELECT ...)"),
        ("read_csv('{csv}') IS NOT NULL", "function read_csv()"),
        ("SELECT * FROM read_csv('{csv}')", "SELECT"),
        ("sneaky_fn(content) = 1", "function sneaky_fn()"),
    ],
    ids=["subquery", "table-function", "select", "unknown-function"],
)
def test_a_where_outside_the_grammar_exits_2_naming_line_and_construct(tmp_path, secret_csv, where, construct):
    config, ledger = setup_with_row(tmp_path, where=where.format(csv=secret_csv))
    proc = run_cli(tmp_path, config)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc)
    assert str(ledger) in line and "line 2: $.where:" in line and f"{construct} is not allowed" in line, line
    assert "Traceback" not in proc.stderr
    everything = proc.stdout + proc.stderr + (tmp_path / "run.log").read_text()
    assert SECRET not in everything
    assert not (tmp_path / "dagster_home").exists() or not list((tmp_path / "dagster_home").rglob("*.db"))


def limit_to_sources(config: Path) -> Path:
    """The config with ingest.allowed_prefixes set to the factory's sources folder (trailing slash and all)."""
    cfg = yaml.safe_load(config.read_text())
    sources = config.parent / "sources"
    cfg["ingest"] = {"allowed_prefixes": [f"{sources}/"]}
    config.write_text(yaml.safe_dump(cfg))
    return sources


@pytest.mark.parametrize(
    "url",
    ["{root}/private.csv", "{sources}/../private.csv", "file://{sources}/../private.csv", "{sources}x/beta.jsonl.zst"],
    ids=["outside", "dotdot", "file-url-dotdot", "prefix-of-a-name"],
)
def test_a_ledger_url_outside_allowed_prefixes_exits_2_naming_the_line(tmp_path, secret_csv, url):
    config, ledger = setup_with_row(tmp_path)
    sources = limit_to_sources(config)
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[1]["urls"] = [url.format(root=tmp_path, sources=sources)]
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli(tmp_path, config)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc)  # lines 1 and 3 (file:// and a bare path inside the prefix) are accepted
    assert str(ledger) in line and "1 ledger violation(s): line 2: $.urls[0]:" in line, line
    assert "is outside ingest.allowed_prefixes" in line and "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr + (tmp_path / "run.log").read_text()
