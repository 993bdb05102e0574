"""The corpus files a check reads: the ones the analysis read, never a guess of its own.

The files of a folder are picked by the analysis's own selection rule (`select_corpus_files` in
`corpus_dagster/analysis/inputs.py`: under a stage record listing `docs`, only those, so a clean stage
folder's rejects files are not read). Given the analysis out dir, its `_INPUTS.json` names the folder
(when --corpus-dir is not given) and the sha256 and size of every file the analysis read: the folder
must hold exactly those. This file list is the only thing
taken from `corpus_dagster`: normalization, shingles, hashing and Jaccard stay in `_reference`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INPUTS_FILE = "_INPUTS.json"


@dataclass
class Inputs:
    """The files to check, the analysis settings the out dir records, and reasons the list is not trusted."""

    files: list[Path]
    settings: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _usage_error(message: str) -> SystemExit:
    """Exit 2 (not 1, which means the outputs failed a check)."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def _select(corpus_dir: str | Path, exclude: str | Path | None) -> list[Path]:
    try:
        from corpus_dagster.analysis.inputs import select_corpus_files
        from corpus_dagster.core.errors import CorpusError
    except ImportError as exc:  # the analysis package is what defines which files a folder holds
        raise _usage_error(f"--corpus-dir needs the corpus_dagster package for its file selection ({exc}); "
                           f"give --out-dir of an analysis instead") from exc
    try:
        return select_corpus_files(corpus_dir, exclude)
    except CorpusError as exc:
        raise _usage_error(str(exc)) from exc


def resolve_inputs(corpus_dir: str | Path | None, out_dir: str | Path | None,
                   exclude: str | Path | None = None) -> Inputs:
    """The files of `corpus_dir` (default: the folder the out dir's `_INPUTS.json` names) by the
    analysis's selection rule. With an `_INPUTS.json`, they must be, by sha256 and size, the files it
    lists: a file changed, gone or added since the analysis is a failure (its report does not
    describe that folder)."""
    listed = None
    if out_dir is not None and (Path(out_dir) / INPUTS_FILE).is_file():
        listed = json.loads((Path(out_dir) / INPUTS_FILE).read_text(encoding="utf-8"))
    if listed is None and corpus_dir is None:
        raise _usage_error(f"{Path(out_dir or '.') / INPUTS_FILE} not found; give --corpus-dir too")
    if corpus_dir is None:
        corpus_dir = Path(os.path.normpath(Path(out_dir) / listed["documents"]["corpus_dir"]))
    files = _select(corpus_dir, exclude if exclude is not None else out_dir)
    if listed is None:
        return Inputs(files)
    wanted: dict[tuple[str, int], list[str]] = {}
    for entry in listed["documents"]["files"]:
        wanted.setdefault((entry["sha256"], entry["bytes"]), []).append(entry["name"])
    failures = []
    for path in files:
        names = wanted.get((_sha256(path), path.stat().st_size))
        if names:
            names.pop()
        else:
            failures.append(f"{path}: in {corpus_dir} but not read by the analysis in {out_dir} (added or changed since)")
    for (digest, _), names in sorted(wanted.items()):
        failures += [f"{name} (sha256 {digest[:12]}...): read by the analysis but not in {corpus_dir} (changed or gone)"
                     for name in names]
    return Inputs(files, listed.get("settings", {}), failures)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--corpus-dir / --out-dir / --exclude, as the analysis command line takes them."""
    p.add_argument("--corpus-dir", help="the folder the analysis read (its --corpus-dir), e.g. artifacts/stages/clean")
    p.add_argument("--out-dir", help="the analysis out dir (its --out-dir), e.g. artifacts/analysis/<dataset>/<version>: "
                   "its _INPUTS.json names the files read and its tables are the defaults")
    p.add_argument("--exclude", help="folder under the corpus dir to skip (default: the out dir)")


def require(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """At least one of --corpus-dir / --out-dir."""
    if args.corpus_dir is None and args.out_dir is None:
        p.error("give --corpus-dir, --out-dir or both")
