"""Set up a built corpus and a fresh DAGSTER_HOME for the browser test, and start `dagster dev` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "tests"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REMOVED = "gamma"  # the last source of the ledger: built last, then removed, so it once headlined its assets


def cli(config: Path, home: Path, log: Path) -> None:
    """`python -m corpus_dagster.run CONFIG`, as a person types it, against the instance in `home`."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with log.open("a") as out:
        subprocess.run([sys.executable, "-m", "corpus_dagster.run", str(config)], cwd=PROJECT, env=env,
                       stdout=out, stderr=subprocess.STDOUT, check=True, timeout=900)


def build_corpus(root: Path) -> tuple[Path, Path]:
    """A generated corpus built through the CLI into a fresh DAGSTER_HOME, then rebuilt without its last
    source (REMOVED); (config, home).

    One document holds an e-mail address next to a URL (the scrub's examples show `<EMAIL>` beside a link),
    three are exact twins (the dedup chart has something to show). The instance's dagster.yaml is the one
    the project writes (onboarding dialogs off), not one written here.
    """
    from corpus_factory import write_setup

    config = write_setup(root)
    alpha = root / "sources" / "alpha.jsonl"
    rows = [json.loads(x) for x in alpha.read_text().splitlines()]
    rows[0]["text"] += (" Write to Jean-Sebastien Roy (www.impallari.com|jean.roy@fastmail.fr) or"
                        " https://example.org/contact about the river garden.")
    rows += [{"text": r["text"], "link": r["link"] + "/copy"} for r in rows[1:4]]  # exact twins for the dedup chart
    alpha.write_text("".join(json.dumps(r) + "\n" for r in rows))
    home = root / "dagster_home"
    log = root / "cli.log"
    cli(config, home, log)
    ledger = root / "artifacts" / "corpus" / "LEDGER.jsonl"
    kept = [x for x in ledger.read_text().splitlines() if json.loads(x)["source_id"] != REMOVED]
    ledger.write_text("".join(x + "\n" for x in kept))
    cli(config, home, log)
    return config, home


def start_dagster_dev(config: Path, home: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_CONFIG": str(config)}
    dagster = Path(sys.executable).parent / "dagster"
    proc = subprocess.Popen(
        [str(dagster), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", str(PROJECT / "workspace.yaml")],
        cwd=PROJECT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dagster dev exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                return proc
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"dagster dev did not answer on port {port} within 180 s; see {log}")


def stop(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":  # manual exploration: build, start, print the URL, wait
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="corpus-e2e-"))
    cfg, home = build_corpus(root)
    port = int(sys.argv[1]) if len(sys.argv) > 1 else free_port()
    p = start_dagster_dev(cfg, home, port, root / "dagster.log")
    print(f"http://127.0.0.1:{port} pid={p.pid} root={root}", flush=True)
    p.wait()
