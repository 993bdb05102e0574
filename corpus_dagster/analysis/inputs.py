"""Which files an analysis of a folder reads, and the list of them it leaves in its out dir.

One selection rule for the analysis command line and the `verify/` scripts (they import
`select_corpus_files`), so a check pointed at the folder the analysis read sees the same documents. The
list the analysis writes (`_INPUTS.json`) lets a check find the exact files of any analysis, also one
the graph ran over per-source file lists, without being told where they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.records import RECORD, read_record

INPUTS_FILE = "_INPUTS.json"
DOCS_KIND = "docs"  # the record's list of document files (clean, scrub); rejects sit beside them


def _hidden(rel: Path) -> bool:
    return any(part.startswith((".", "_")) for part in rel.parts)


def _record_docs(record: Path) -> set[Path] | None:
    """Resolved paths of a stage record's `docs` files; None when it lists none (or is unreadable)."""
    rec = read_record(record.parent)
    names = rec.files.get(DOCS_KIND) if rec is not None else None
    if not isinstance(names, list):
        return None
    base = rec.base(record.parent)
    return {(base / name).resolve() for name in names}


def select_corpus_files(corpus_dir: str | Path, exclude: str | Path | None = None) -> list[Path]:
    """The Parquet files an analysis of `corpus_dir` reads, sorted by path.

    Every `*.parquet` under the folder (recursively; names starting with `.` or `_` and the `exclude`
    folder skipped), except under a folder holding a stage record (`_RECORD.json`, in the folder, below
    it or above it) that lists `docs` files: there only those are read. A clean stage folder writes
    `rejects-*.parquet` beside its `docs-*.parquet`, and the dropped documents are not the corpus.
    A listed document file that is missing is an error (the folder is damaged).
    """
    root = Path(corpus_dir)
    if not root.is_dir():
        raise AnalysisError(f"--corpus-dir {root}: not a folder")
    top = root.resolve()
    ex = Path(exclude).resolve() if exclude is not None else None

    def skipped(p: Path) -> bool:
        return _hidden(p.relative_to(root)) or (ex is not None and (ex == p.resolve() or ex in p.resolve().parents))

    # (region, listed docs): a record governs the files under its own folder, or the whole corpus dir
    # when it sits above it (a user pointed at one key folder of a clean source).
    regions: list[tuple[Path, set[Path]]] = []
    records = [r for r in sorted(root.rglob(RECORD)) if not skipped(r.parent / "x")]
    above = [p / RECORD for p in top.parents if (p / RECORD).is_file()]
    for record in records + above:
        docs = _record_docs(record)
        if docs is not None:
            folder = record.parent.resolve()
            regions.append((folder if folder == top or top in folder.parents else top, docs))
    out = []
    for p in sorted(root.rglob("*.parquet")):
        if skipped(p):
            continue
        rp = p.resolve()
        governing = [r for r in regions if r[0] in rp.parents]
        if not governing:
            out.append(p)
            continue
        _, docs = max(governing, key=lambda r: len(r[0].parts))  # the innermost record decides
        if rp in docs:
            out.append(p)
    for region, docs in regions:
        missing = sorted(d for d in docs if (region in d.parents) and not d.is_file())
        if missing:
            raise AnalysisError(f"{missing[0]}: listed as a document file in the stage record of {region} "
                                f"but missing; rerun that stage")
    return out


def read_inputs(out_dir: str | Path) -> dict[str, Any] | None:
    """The out dir's `_INPUTS.json` (None when the analysis there predates it)."""
    path = Path(out_dir) / INPUTS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
