"""Create (once) the separate virtualenv that holds datatrove for comparisons; never a runtime dependency.

Usage from a bench script:  python = ensure_datatrove_env(); subprocess.run([python, ...])
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

ENV_DIR = Path(__file__).resolve().parent / ".venv-datatrove"
# aiohttp: datatrove resolves its asset cache paths (the language filter's model) through fsspec's HTTP filesystem
# spacy: its English word tokenizer (spacy.blank, no model download) is what the Gopher and MinHash steps split words with
PACKAGES = ["datatrove[processing]>=0.4", "numpy", "pyarrow", "aiohttp", "spacy"]


def ensure_datatrove_env() -> Path:
    """Return the python of the datatrove virtualenv, creating it under bench/.venv-datatrove if missing."""
    python = ENV_DIR / "bin" / "python"
    ENV_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(ENV_DIR.parent / ".datatrove-env.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = ENV_DIR / ".ready"
        wanted = " ".join(PACKAGES) + "\n"
        if not marker.exists() or marker.read_text() != wanted:  # new, or a package was added since
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(ENV_DIR)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True)
            marker.write_text(wanted)
    return python


if __name__ == "__main__":
    print(ensure_datatrove_env())
