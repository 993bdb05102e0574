"""Independent checks of published shards and manifest: each returns a CheckReport (passed, problems, metadata),
from the problems it lists (at most MAX_PROBLEMS of them)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_dagster.core.checks import CheckReport, report_of, sample_order, sample_units
from corpus_dagster.core.documents import SHARD_SCHEMA, shard_name
from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.settings import PiiSettings, Settings
from corpus_dagster.publish.manifest import manifest_violations
from corpus_dagster.publish.shards import Annotations, SourceDocs, shard_jobs, split_column, write_shard

MAX_PROBLEMS = 20
READ_ERRORS = (OSError, pa.ArrowException, ValueError)  # what pyarrow raises on a damaged Parquet file


class UnreadableShard(CorpusError):
    """A published shard cannot be decoded: `<shard>: cannot be read: <error>` (a check reports it as a problem)."""


def unreadable(path: Path, exc: BaseException) -> UnreadableShard:
    """The one-line error of a shard that cannot be decoded, naming the file (never a bare OSError)."""
    return UnreadableShard(f"{path.name}: cannot be read: {type(exc).__name__}: {exc}")


def open_shard(path: Path) -> pq.ParquetFile:
    """A shard's Parquet reader; UnreadableShard naming the file when its footer cannot be read."""
    try:
        return pq.ParquetFile(path)
    except READ_ERRORS as exc:
        raise unreadable(path, exc) from exc


def unreadable_is_a_problem(check: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """A check that meets a shard it cannot decode reports that shard as one more problem, not an error."""

    @functools.wraps(check)
    def wrapper(*args: Any, **kwargs: Any) -> list[str]:
        try:
            return check(*args, **kwargs)
        except UnreadableShard as exc:
            return [str(exc)]

    return wrapper


def shard_paths(folder: Path) -> list[Path]:
    """Shard files in a folder, in name order."""
    return sorted(folder.glob("shard-*-of-*.parquet"))


def iter_batches(paths: list[Path], columns: list[str], problems: list[str] | None = None
                 ) -> Iterator[tuple[Path, pa.RecordBatch]]:
    """Record batches of the given columns across shards, in order, none spanning two row groups: memory is
    bounded by a row group (`publish.row_group_max_bytes`). pyarrow's batches of 8,192 rows span row groups,
    and 8,192 long documents were 626 MB of text for a shard at 10x the bench corpus (3 GB with their Python
    strings).

    A shard that cannot be decoded raises UnreadableShard naming it; with `problems`, that line is appended
    there instead and the shard's remaining batches are skipped, so one check reports every damaged shard."""
    for path in paths:
        try:
            shard = open_shard(path)
            # use_threads=False: threaded batch reads cost ten times the CPU here (1.4 s against 0.13 s for 113 MB)
            batches = (batch for g in range(shard.num_row_groups)
                       for batch in shard.iter_batches(batch_size=8192, row_groups=[g], columns=columns,
                                                       use_threads=False))
            while True:
                try:
                    batch = next(batches)
                    batch.validate(full=True)  # e.g. text that is not UTF-8 any more
                except StopIteration:
                    break
                except READ_ERRORS as exc:
                    raise unreadable(path, exc) from exc
                yield path, batch
        except UnreadableShard as exc:
            if problems is None:
                raise
            problems.append(str(exc))


def check_schema(paths: list[Path]) -> CheckReport:
    """Column names, order and Arrow types of every shard equal the contract; row groups within 64 MiB."""
    problems = []
    for path in paths:
        try:
            pf = open_shard(path)
        except UnreadableShard as exc:
            problems.append(str(exc))
            continue
        schema = pf.schema_arrow
        if schema.names != SHARD_SCHEMA.names:
            problems.append(f"{path.name}: columns {schema.names} != {SHARD_SCHEMA.names}")
            continue
        for f_have, f_want in zip(schema, SHARD_SCHEMA, strict=True):
            if f_have.type != f_want.type:
                problems.append(f"{path.name}: column {f_want.name} is {f_have.type}, want {f_want.type}")
        for i in range(pf.num_row_groups):
            rg = pf.metadata.row_group(i)
            if rg.total_byte_size > 64 * 1024 * 1024 and rg.num_rows > 1:
                problems.append(f"{path.name}: row group {i} holds {rg.total_byte_size} bytes > 64 MiB")
        col = pf.metadata.row_group(0).column(1) if pf.num_row_groups else None
        if col is not None and col.compression.lower() != "zstd":
            problems.append(f"{path.name}: compression {col.compression}, want ZSTD")
    return report_of(problems[:MAX_PROBLEMS], shards=len(paths))


def check_manifest(folder: Path, manifest_path: Path) -> CheckReport:
    """Manifest valid against its schema and consistent with the files actually on disk."""
    return report_of(manifest_problems(folder, manifest_path)[:MAX_PROBLEMS])


def manifest_problems(folder: Path, manifest_path: Path) -> list[str]:
    """What `check_manifest` finds: schema violations first (and only them when there are any), then files."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return [f"{manifest_path}: unreadable: {exc}"]
    problems = manifest_violations(manifest)
    if problems:
        return problems
    paths = shard_paths(folder)
    listed = [s["name"] for s in manifest["shards"]]
    expected = [shard_name(i, manifest["n_shards"]) for i in range(manifest["n_shards"])]
    if listed != expected:
        problems.append(f"shard names {listed[:3]}... != expected {expected[:3]}...")
    if [p.name for p in paths] != listed:
        problems.append(f"files on disk {[p.name for p in paths][:5]} != manifest {listed[:5]}")
    if manifest["n_shards"] != len(manifest["shards"]):
        problems.append(f"n_shards {manifest['n_shards']} != {len(manifest['shards'])} listed")
    total_listed = sum(s["rows"] for s in manifest["shards"])
    if manifest["n_docs"] != total_listed:
        problems.append(f"n_docs {manifest['n_docs']} != sum of shard rows {total_listed}")
    rows_read = 0
    for entry in manifest["shards"]:
        path = folder / entry["name"]
        if not path.exists():
            problems.append(f"{entry['name']}: listed but missing")
            continue
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            problems.append(f"{entry['name']}: sha256 differs from _MANIFEST.json ({digest[:16]}..., manifest "
                            f"{entry['sha256'][:16]}...)")
        try:
            rows = open_shard(path).metadata.num_rows
        except UnreadableShard as exc:
            problems.append(str(exc))
            continue
        rows_read += rows
        if rows != entry["rows"]:
            problems.append(f"{entry['name']}: {rows} rows != manifest {entry['rows']}")
    if rows_read != manifest["n_docs"]:
        problems.append(f"rows actually read {rows_read} != n_docs {manifest['n_docs']}")
    return problems


def check_ids_sorted(paths: list[Path]) -> CheckReport:
    """Ids strictly increasing in byte order across all shards (so also unique)."""
    return report_of(_unsorted_ids(paths), shards=len(paths))


def _unsorted_ids(paths: list[Path]) -> list[str]:
    problems: list[str] = []
    prev: bytes | None = None
    for path, batch in iter_batches(paths, ["id"], problems):
        ids = [s.encode("utf-8") for s in batch.column(0).to_pylist()]
        for cur in ids:
            if prev is not None and not prev < cur:
                problems.append(f"{path.name}: id {cur!r} does not follow {prev!r}")
                if len(problems) >= MAX_PROBLEMS:
                    return problems
            prev = cur
    return problems


def check_split(paths: list[Path], val_permille: int) -> CheckReport:
    """split recomputed from sha256 equals the stored split."""
    problems: list[str] = []
    for path, batch in iter_batches(paths, ["id", "sha256", "split"], problems):
        want = split_column(batch.column(1), val_permille)
        bad = pc.invert(pc.equal(want, batch.column(2))).to_numpy(zero_copy_only=False)
        for i in np.nonzero(bad)[0][: MAX_PROBLEMS - len(problems)]:
            problems.append(f"{path.name}: {batch.column(0)[i]}: split {batch.column(2)[i]} != {want[i]}")
        if len(problems) >= MAX_PROBLEMS:
            break
    return report_of(problems)


def check_hashes(paths: list[Path]) -> CheckReport:
    """sha256 and n_chars recomputed from text equal the stored columns."""
    return report_of(_hash_mismatches(paths))


def _hash_mismatches(paths: list[Path]) -> list[str]:
    problems: list[str] = []
    for path, batch in iter_batches(paths, ["id", "text", "sha256", "n_chars"], problems):
        ids, texts, shas, nchars = (batch.column(i).to_pylist() for i in range(4))
        for doc_id, text, sha, n in zip(ids, texts, shas, nchars, strict=True):
            if hashlib.sha256(text.encode("utf-8")).digest() != sha:
                problems.append(f"{path.name}: {doc_id}: sha256 does not match its text")
            if len(text) != n:
                problems.append(f"{path.name}: {doc_id}: n_chars {n} != {len(text)}")
            if len(problems) >= MAX_PROBLEMS:
                return problems
    return problems


def pii_sample(paths: list[Path], sample_docs: int, seed: str, sample_chars: int = 0) -> np.ndarray | None:
    """Positions (in published order, sorted) of the documents the PII rescan covers; None means all.

    A seeded draw of `sample_docs` documents, cut to the prefix of the draw whose text fits `sample_chars`
    characters (0: no budget; the first drawn document is always kept). A prefix of a uniform draw is
    uniform, so the budget bounds the cost without favouring short documents: by count alone the rescan
    of 2,000 documents cost 0.4 to 3 s on the bench corpus, by which 2,000 it drew."""
    n_docs = sum(open_shard(p).metadata.num_rows for p in paths)
    if not 0 < sample_docs < n_docs:
        return None
    order = np.asarray(sample_order(n_docs, sample_docs, seed), np.int64)
    if sample_chars > 0:
        n_chars = np.concatenate([batch.column(0).to_numpy() for _, batch in iter_batches(paths, ["n_chars"])])
        order = order[:max(1, int((np.cumsum(n_chars[order]) <= sample_chars).sum()))]  # cumsum only grows
    return np.sort(order)


def check_no_pii(paths: list[Path], pii_cfg: PiiSettings, sample_docs: int = 0, seed: str = "",
                 sample_chars: int = 0) -> CheckReport:
    """No enabled PII detector finds anything in the published text (the scrub is idempotent).

    `sample_docs` > 0 scans a seeded sample of at most that many documents and `sample_chars` characters
    (see pii_sample); 0 scans every document. Pair it with `check_published_text_scrubbed`, which covers
    every document.
    """
    try:
        picked = pii_sample(paths, sample_docs, seed, sample_chars)
    except UnreadableShard as exc:
        return report_of([str(exc)], docs_scanned=0)
    return report_of(scan_for_pii(paths, pii_cfg, picked), docs_scanned="all" if picked is None else len(picked))


@unreadable_is_a_problem
def scan_for_pii(paths: list[Path], pii_cfg: PiiSettings, picks: np.ndarray | None) -> list[str]:
    """What the PII detectors find in the published documents at sorted positions `picks` (None: all)."""
    from corpus_dagster.scrub.outputs import find_pii_batch

    problems = []
    offset = 0
    for path, batch in iter_batches(paths, ["id", "text"]):
        first, offset = offset, offset + batch.num_rows
        if picks is not None:
            batch = batch.take(pa.array(picks[(picks >= first) & (picks < offset)] - first))
            if not batch.num_rows:
                continue
        ids, texts = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for doc_id, text, spans in zip(ids, texts, find_pii_batch(texts, pii_cfg), strict=True):
            for kind, start, end in spans[:3]:
                problems.append(f"{path.name}: {doc_id}: {kind} at {start}: {text[max(0, start - 20):end + 20]!r}")
            if len(problems) >= MAX_PROBLEMS:
                return problems[:MAX_PROBLEMS]
    return problems


def check_published_text_scrubbed(paths: list[Path], scrubbed: list[Path]) -> CheckReport:
    """Every published document's (id, sha256) is a row of the scrub stage's output: no text reached the
    shards except byte for byte as the scrub wrote it (`hashes_match_text` ties sha256 to the text).

    Memory ~ the ids and hashes of the corpus (a hash join), never its text."""
    return report_of(_unscrubbed_texts(paths, scrubbed))


def _unscrubbed_texts(paths: list[Path], scrubbed: list[Path]) -> list[str]:
    import polars as pl

    if not paths:
        return []
    published = pl.scan_parquet(paths).select("id", "sha256")
    written = pl.scan_parquet(scrubbed).select("id", "sha256") if scrubbed else published.head(0)
    try:
        missing = published.join(written, on=["id", "sha256"], how="anti").head(MAX_PROBLEMS).collect()
    except (pl.exceptions.PolarsError, OSError):
        for path in paths:  # polars does not say which file it could not decode: find the shard
            try:
                pq.read_table(path, columns=["id", "sha256"])
            except READ_ERRORS as exc:
                return [str(unreadable(path, exc))]
        raise
    return [f"{doc_id}: published text is not the scrubbed text of that id (sha256 {sha.hex()[:16]}...)"
            for doc_id, sha in missing.iter_rows()]


def compare_folders(a: Path, b: Path) -> list[str]:
    """Every file of two build folders byte-identical (same names, same bytes)."""
    names_a = sorted(p.name for p in a.iterdir() if p.is_file())
    names_b = sorted(p.name for p in b.iterdir() if p.is_file())
    if names_a != names_b:
        return [f"file lists differ: {names_a[:5]} vs {names_b[:5]}"]
    return [f"{n}: bytes differ" for n in names_a if (a / n).read_bytes() != (b / n).read_bytes()][:MAX_PROBLEMS]


def check_rebuild_sample(
    sources: list[SourceDocs], annotations: Annotations, published: Path, scratch: Path, settings: Settings,
    workers: int, sample_shards: int, seed: str,
) -> CheckReport:
    """Rebuild a seeded sample of shards into `scratch` with `workers` processes; each must equal its published bytes.

    The plan (every id sorted across sources, clusters, shard boundaries) is recomputed in full, so which
    documents a shard holds is checked for every shard; the rows of `sample_shards` shards are gathered and
    written again and compared byte for byte. With `manifest_consistent` proving every published shard has
    the sha256 the manifest lists, a run costs sample_shards / n_shards of a full rebuild; 0 (or >= the
    shard count) rebuilds every shard, as a scheduled full check should.
    """
    jobs = shard_jobs(sources, annotations, scratch, settings)
    on_disk = sorted(p.name for p in shard_paths(published))
    planned = [job[4].name for job in jobs]
    if on_disk != planned:
        return report_of([f"published shards {on_disk[:3]}... != planned {planned[:3]}... ({len(on_disk)} vs {len(planned)})"])
    picks = sample_units(len(jobs), sample_shards if sample_shards > 0 else len(jobs), seed)
    problems = []
    for i, entry in zip(picks, ordered_map(write_shard, [jobs[i] for i in picks], workers), strict=True):
        if sha256_file(published / entry["name"]) != entry["sha256"]:
            problems.append(f"{entry['name']} (shard {i}): bytes differ from a rebuild with workers={workers}")
    return report_of(problems[:MAX_PROBLEMS])
