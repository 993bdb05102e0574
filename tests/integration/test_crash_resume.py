"""Crash and resume: SIGKILL a real materialization inside each stage, rerun, and prove that

- the published shards and token streams are byte-identical to an uninterrupted run,
- no temp file or folder of the killed process is left behind,
- nothing a killed run completed (a source's fetch, a cleaned part, a source's signatures...) is redone:
  every file that existed after the kill keeps its inode and mtime through the rerun.

The kill comes from a `sitecustomize` on the subprocess's PYTHONPATH (product code is not touched): it wraps
`os.replace` and sends SIGKILL to its own process just before the n-th rename onto a path containing a
chosen marker, i.e. with that stage's output fully written to its temp name but not yet in place. The runs
are chained: each rerun resumes the previous crash and is itself killed one stage later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from corpus_factory import write_setup


def is_temp_name(name: str) -> bool:
    """Any hidden name under the artifacts root is a leftover (temp files and folders, work folders), except
    the lock folder. Deliberately broader than the product's own rule, so this test checks that rule."""
    return name.startswith(".") and name != ".locks"

SITECUSTOMIZE = '''
import os

_spec = os.environ.get("CORPUS_CRASH_AT")  # "<path marker>@<n>"
if _spec:
    import signal

    _marker, _, _n = _spec.rpartition("@")
    _seen = [0]
    _real_replace = os.replace

    def _replace(src, dst, *args, **kwargs):
        if _marker in os.fspath(dst):
            _seen[0] += 1
            if _seen[0] == int(_n):
                os.kill(os.getpid(), signal.SIGKILL)
        return _real_replace(src, dst, *args, **kwargs)

    os.replace = _replace
'''

RUNNER = '''
import datetime as dt
import sys

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.dedup.driver import run_global_dedup
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.minhash.driver import run_signatures
from corpus_dagster.publish.driver import run_publish
from corpus_dagster.scrub.driver import run_scrub
from corpus_dagster.tokenize.driver import run_token_streams

settings = load_settings(sys.argv[1])
layout = Layout.from_config(settings.resolved)
sources = load_ledger(layout.ledger)
ids = [s.source_id for s in sources]
for s in sources:
    fetch_source(s, layout, settings.ingest, now=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
for sid in ids:
    run_clean_source(layout, settings, sid)
for sid in ids:
    run_signatures(layout, settings, sid)
run_global_dedup(layout, settings, ids)
run_scrub(layout, settings)
run_publish(layout, settings)
run_token_streams(layout, settings)
print("complete")
'''

# (stage, marker in the destination path of the rename to die before, which occurrence)
KILLS = [
    ("fetch", "/corpus/raw/beta/", 1),  # alpha fetched; beta's parts written, folder not yet renamed
    ("clean", "/stages/clean/alpha/", 4),  # part 0 of alpha cleaned (docs, rejects, stats); part 1 written
    ("signatures", "/stages/minhash/beta/", 1),  # alpha's signatures recorded
    ("dedup", "/stages/dedup/.work-", 12),  # the plan (7 files) and the first LSH units written, the rest not
    ("scrub", "/stages/scrub/beta/", 1),  # alpha scrubbed and recorded
    ("shards", "/units/shard-", 1),  # the plan in its work folder, the first shard written to its temp name
    ("tokens", "/tokens/testset/", 1),  # token streams complete in their temp folder
]


def run(tmp: Path, config: Path, crash_at: str | None) -> subprocess.CompletedProcess:
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp / "runner.py").write_text(textwrap.dedent(RUNNER))
    env = {k: v for k, v in os.environ.items() if k != "CORPUS_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parents[2])])
    if crash_at:
        env["CORPUS_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, str(tmp / "runner.py"), str(config)], env=env, capture_output=True, text=True, timeout=120
    )


def files_under(root: Path) -> dict[str, tuple[int, int]]:
    """Every output file (not temp, not a lock file: locks are rewritten by every holder) -> (inode, mtime_ns)."""
    out = {}
    for p in root.rglob("*"):
        parts = p.relative_to(root).parts
        if p.is_file() and parts[0] != ".locks" and not any(is_temp_name(part) for part in parts):
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_ino, st.st_mtime_ns)
    return out


def temps_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if is_temp_name(p.name))


def published(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for base in (root / "corpus" / "testset" / "v1", root / "tokens" / "testset" / "v1")
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def make_setup(root: Path, sources_from: Path | None = None) -> Path:
    config = write_setup(root, extra={"ingest": {"part_max_docs": 10}})
    if sources_from is not None:  # the same source files (their URLs are in the document ids' URLs)
        ledger = root / "artifacts" / "corpus" / "LEDGER.jsonl"
        ledger.write_text(ledger.read_text().replace(str(root / "sources"), str(sources_from / "sources")))
    return config


@pytest.mark.timeout(300)
def test_sigkill_in_every_stage_then_resume(tmp_path):
    base = make_setup(tmp_path / "base")
    ok = run(tmp_path, base, None)
    assert ok.returncode == 0 and "complete" in ok.stdout, ok.stderr[-3000:]
    expected = published(tmp_path / "base" / "artifacts")
    assert any(k.endswith(".parquet") for k in expected) and any(k.startswith("tokens/") for k in expected)

    config = make_setup(tmp_path / "crash", sources_from=tmp_path / "base")
    art = tmp_path / "crash" / "artifacts"
    before: dict[str, tuple[int, int]] | None = None
    for stage, marker, nth in KILLS:
        proc = run(tmp_path, config, f"{marker}@{nth}")
        assert proc.returncode == -signal.SIGKILL, f"{stage}: not killed (rc {proc.returncode}): {proc.stderr[-2000:]}"
        after = files_under(art)
        if before is not None:  # the run that resumed the previous crash redid nothing that crash had completed
            changed = sorted(k for k, v in before.items() if after.get(k) != v)
            assert not changed, f"resuming before the {stage} kill rewrote completed outputs: {changed}"
        assert temps_under(art), f"{stage}: the kill left no temp behind (is the marker right?)"
        before = after
    final = run(tmp_path, config, None)
    assert final.returncode == 0 and "complete" in final.stdout, final.stderr[-3000:]
    after = files_under(art)
    assert before is not None
    changed = sorted(k for k, v in before.items() if after.get(k) != v)
    assert not changed, f"resuming after the tokens kill rewrote completed outputs: {changed}"
    assert temps_under(art) == []
    assert published(art) == expected

    # An unchanged rerun is a no-op: every file keeps its inode and mtime.
    again = run(tmp_path, config, None)
    assert again.returncode == 0, again.stderr[-2000:]
    assert files_under(art) == after
