"""The package installs as a wheel (not editable) and runs from any working folder: schemas and the demo
config ship inside it, and the files people read in the checkout equal the ones it ships."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from corpus_dagster.cli.docs_gen import PACKAGE_DATA

PROJECT = Path(__file__).resolve().parents[2]


def test_checkout_schemas_and_demo_config_equal_the_packaged_copies() -> None:
    assert len(PACKAGE_DATA) >= 5
    for source, copy in PACKAGE_DATA:
        assert copy.read_bytes() == source.read_bytes(), f"{copy} differs from {source}: run python -m corpus_dagster.cli.docs_gen"


@pytest.mark.slow
def test_wheel_installs_and_runs_the_cli_from_another_folder(tmp_path: Path) -> None:
    from corpus_factory import write_setup

    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(PROJECT)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("corpus_dagster-*.whl")
    # A fresh virtualenv whose only extra path is this environment's site-packages (the dependencies): the
    # package itself comes from the wheel alone, never from the checkout or its editable install.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    config = write_setup(tmp_path / "corpus")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path / "dh")}
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import corpus_dagster; print(corpus_dagster.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    run = subprocess.run([str(venv / "bin" / "python"), "-m", "corpus_dagster.run", str(config)],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    manifest = json.loads((tmp_path / "corpus" / "artifacts" / "corpus" / "testset" / "v1" / "_MANIFEST.json").read_text())
    assert manifest["n_docs"] > 0
    packaged = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "from corpus_dagster.core.config import load_config; print(load_config(None)['dataset'])"],
                              cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert packaged.returncode == 0 and packaged.stdout.strip(), packaged.stderr[-2000:]
