"""Which files an analysis of a folder reads, and the list of them it leaves in its out dir.

One selection rule for the analysis command line and the `verify/` scripts (they import
`select_corpus_files`), so a check pointed at the folder the analysis read sees the same documents. The
list the analysis writes (`_INPUTS.json`) lets a check find the exact files of any analysis, also one
the graph ran over per-source file lists, without being told where they are.

Also the description of a corpus the analysis reads (`CorpusFiles`), the fingerprints its run key is made
of, and the Parquet metadata (row groups, sizes) the steps plan their reading from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus_dagster.analysis.outputs import GROUPS_FILE, cluster_file, duplicates_dir_name, tag, write_json
from corpus_dagster.core.errors import AnalysisError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.records import RECORD, read_record
from corpus_dagster.core.settings import AnalysisSettings

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


@dataclass
class CorpusFiles:
    """Parquet files of one corpus, each with a text column (`text_column`, `text` by default), read in list order.

    source_ids: per file, its source (None: the file's `source_id` column, else `default_source`).
    root: the folder the files were selected from (select_corpus_files), recorded in `_INPUTS.json`.
    """

    files: list[Path]
    source_ids: list[str | None]
    default_source: str = "corpus"
    root: Path | None = None
    text_column: str = "text"

    def __post_init__(self) -> None:
        self.files = [Path(f) for f in self.files]
        if len(self.source_ids) != len(self.files):
            raise AnalysisError("CorpusFiles: one source id (or None) per file is needed")


TEXT_COLUMNS = ("text", "content")  # tried in this order when no text column is named: shards, then a release


def corpus_from_dir(corpus_dir: str | Path, exclude: Path | None = None, text_column: str | None = None) -> CorpusFiles:
    """The `*.parquet` files under a folder that select_corpus_files picks (recursively, sorted by path;
    hidden names and `exclude` skipped; under a stage record listing `docs`, only those): the rule the
    verify/ scripts apply to the same folder. `text_column`: the column holding the texts; None takes the
    first of TEXT_COLUMNS the first file has (`text` for shards, `content` for a release folder)."""
    root = Path(corpus_dir)
    files = select_corpus_files(root, exclude)
    if not files:
        raise AnalysisError(f"--corpus-dir {root}: no *.parquet files found; point it at a folder of shards")
    if text_column is None:
        names = text_file(files[0], None).schema_arrow.names
        text_column = next((c for c in TEXT_COLUMNS if c in names), None)
        if text_column is None:
            raise AnalysisError(f"{files[0]}: none of the columns {list(TEXT_COLUMNS)} (columns: {names}); "
                                f"name the text column with --text-column")
    return CorpusFiles(files, [None] * len(files), root.resolve().name or "corpus", root, text_column)


def corpus_from_sources(sources: dict[str, Sequence[Path]], root: Path | None = None) -> CorpusFiles:
    """Files per source id (the graph's clean per-source documents), sources in name order; `root` is
    the folder select_corpus_files picks the same files from (the clean stage folder)."""
    files, ids = [], []
    for source_id in sorted(sources):
        for f in sources[source_id]:
            files.append(Path(f))
            ids.append(source_id)
    return CorpusFiles(files, ids, root=root)


def footer_sha(path: Path) -> str:
    """SHA-256 of a Parquet file's footer (row groups, offsets, statistics): a cheap content fingerprint."""
    with open(path, "rb") as fh:
        fh.seek(-8, os.SEEK_END)
        n = int.from_bytes(fh.read(4), "little")
        fh.seek(-(8 + n), os.SEEK_END)
        return hashlib.sha256(fh.read(n + 8)).hexdigest()


def fingerprint(files: Sequence[Path]) -> list[list[Any]]:
    """[name, bytes, footer sha256] per file: what the run key knows of the input files."""
    out = []
    for f in files:
        if not Path(f).is_file():
            raise AnalysisError(f"{f}: input file does not exist")
        out.append([Path(f).name, Path(f).stat().st_size, footer_sha(Path(f))])
    return out


def text_file(path: Path, column: str | None = "text") -> pq.ParquetFile:
    """An input Parquet file, refused with a clear error when unreadable or without its text `column`
    (None: not checked)."""
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise AnalysisError(f"{path}: not a readable Parquet file ({exc})") from exc
    if column is not None and column not in pf.schema_arrow.names:
        raise AnalysisError(f"{path}: no `{column}` column (columns: {pf.schema_arrow.names}); the analysis needs "
                            f"one (--text-column names another)")
    return pf


def corpus_size(corpus: CorpusFiles) -> tuple[int, int]:
    """(documents, uncompressed text bytes) from Parquet metadata only, without reading any text."""
    docs = text_bytes = 0
    for path in corpus.files:
        pf = text_file(path, corpus.text_column)
        md = pf.metadata
        col = pf.schema_arrow.names.index(corpus.text_column)
        docs += md.num_rows
        for rg in range(md.num_row_groups):
            text_bytes += md.row_group(rg).column(col).total_uncompressed_size
    return docs, text_bytes


def input_files(corpus: CorpusFiles) -> list[tuple[int, Path, pq.ParquetFile, dict[str, bool], int]]:
    """(file number, path, open file, which of id/source_id/split it has, rows) per input file."""
    out = []
    for i, path in enumerate(corpus.files):
        pf = text_file(path, corpus.text_column)
        names = set(pf.schema_arrow.names)
        has = {c: c in names for c in ("id", "source_id", "split", "sha256")}
        out.append((i, path, pf, has, pf.metadata.num_rows))
    return out


def _input_list(corpus: CorpusFiles, out: Path, old: dict[str, Any] | None) -> dict[str, Any]:
    """The folder (relative to the out dir, so the tree moves as one) and, in read order, the name,
    bytes and sha256 of each file: content only, so the same corpus gives the same list wherever its
    stage folders are keyed. A hash in `old` (same run key) for the same name and size is reused."""
    prior = (old or {}).get("files", [])
    entries = []
    for i, f in enumerate(corpus.files):
        size = Path(f).stat().st_size
        same = prior[i] if i < len(prior) and prior[i].get("name") == Path(f).name and prior[i].get("bytes") == size else None
        entries.append({"name": Path(f).name, "bytes": size, "sha256": same["sha256"] if same else sha256_file(Path(f))})
    root = corpus.root
    if root is None:  # files handed over without a folder: the deepest folder holding them all
        root = Path(os.path.commonpath([str(Path(f).resolve().parent) for f in corpus.files]))
    return {"corpus_dir": Path(os.path.relpath(Path(root).resolve(), out.resolve())).as_posix(), "files": entries}


def write_inputs(out: Path, key: str, documents: CorpusFiles, lengths: CorpusFiles, cfg: AnalysisSettings,
                 shingle_size: int) -> None:
    """`_INPUTS.json`: the files this analysis read and the thresholds its tables were cut at, so a check
    given only the out dir verifies against exactly them. Rehashed only when the run key changed."""
    old = read_inputs(out)
    same_key = old is not None and old.get("key") == key
    value = {
        "key": key,
        "documents": _input_list(documents, out, old.get("documents") if same_key else None),
        "lengths": _input_list(lengths, out, old.get("lengths") if same_key else None),
        "settings": {"pair_threshold": cfg.pair_threshold, "cluster_thresholds": list(cfg.cluster_thresholds),
                     "shingle_size": shingle_size,
                     "duplicates": duplicates_dir_name(cfg), "groups": GROUPS_FILE,
                     "clusters": {tag(t): cluster_file(t) for t in cfg.cluster_thresholds}},
    }
    if value != old:
        write_json(out / INPUTS_FILE, value)
