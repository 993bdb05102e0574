"""A full disk ends a CLI run with exit 3 and one line that names the step and the path, never a traceback:
for the CLI's own log file (/dev/full refuses every write) and for outputs on a small tmpfs (root only)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from corpus_dagster.cli.run_log import GuardedLog, disk_full_message


def run_cli(config: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config), *args], cwd=config.parent,
                          env=env, capture_output=True, text=True, timeout=900)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("run: error:")]


def test_guarded_log_remembers_the_first_refused_write():
    log = GuardedLog(Path("/dev/full"))
    log.step = "build_corpus run"
    log.write("x" * 100_000)  # more than the buffer: the write itself fails
    log.close()
    assert log.failure is not None
    assert log.message().startswith("build_corpus run: cannot write the log file /dev/full: No space left on device")


def test_sqlite_full_names_the_instance():
    message = disk_full_message(RuntimeError("(sqlite3.OperationalError) database or disk is full"), "/home/dh")
    assert message is not None and "/home/dh" in message
    assert disk_full_message(RuntimeError("something else"), "/home/dh") is None


def test_log_file_on_a_full_disk_exit_3_one_line(tmp_path):
    from corpus_factory import write_setup

    config = write_setup(tmp_path)
    proc = run_cli(config, tmp_path / "home", "--log-file", "/dev/full")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in error_lines(proc) if "/dev/full" in x]
    assert "cannot write the log file /dev/full: No space left on device" in line
    assert line.startswith("run: error: build_")  # the step whose events were being written


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("log_on_the_same_disk", [True, False])
def test_outputs_on_a_full_disk_exit_3_one_line_naming_step_and_path(tmp_path, log_on_the_same_disk):
    from corpus_factory import write_setup

    config = write_setup(tmp_path / "setup")
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "300k"):
        pytest.skip("needs root and tmpfs to make a small file system")
    try:
        cfg = yaml.safe_load(config.read_text())
        old_root = Path(cfg["paths"]["artifacts"])
        cfg["paths"]["artifacts"] = str(small / "artifacts")
        config.write_text(yaml.safe_dump(cfg))
        (small / "artifacts" / "corpus").mkdir(parents=True)
        shutil.copy(old_root / "corpus" / "LEDGER.jsonl", small / "artifacts" / "corpus" / "LEDGER.jsonl")
        args = () if log_on_the_same_disk else ("--log-file", str(tmp_path / "run.log"))
        proc = run_cli(config, tmp_path / "home", *args)
    finally:
        subprocess.run(["umount", str(small)], check=False)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = error_lines(proc)
    assert errors and all("\n" not in e for e in errors)
    step_error = errors[0]
    # ENOSPC from an open or write, or numpy's short write (no errno) when the disk fills inside np.save
    assert "No space left on device" in step_error or "the disk is probably full" in step_error, step_error
    assert f"cannot write {small}/artifacts/" in step_error, step_error
    assert step_error.split("run: error: ", 1)[1].split(":", 1)[0]  # names the step first
    if log_on_the_same_disk:
        assert any("cannot write the log file" in e for e in errors)
