"""Checks of built token streams: counts agree, a sample decodes to its text, rebuilds are identical.

Each check returns a CheckReport (passed, problems, metadata) so the Dagster layer only translates it.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.core.checks import CheckReport, sample_units
from corpus_dagster.core.errors import CorpusError, TokenStreamError
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.core.parquet import read_row_range, rows_by_group
from corpus_dagster.core.settings import TokenizeSettings
from corpus_dagster.lib.tokenizers import load_tokenizer
from corpus_dagster.tokenize.indexed import DTYPE_CODES, IndexData, read_index, read_sequence
from corpus_dagster.tokenize.manifest import COUNTS_NAME, MANIFEST_NAME, read_manifest
from corpus_dagster.tokenize.shards import (
    SPLITS,
    ShardTask,
    group_by_split,
    open_shard,
    read_shards_manifest,
    shard_tasks,
)
from corpus_dagster.tokenize.streams import build_token_streams


def _start(tokens_dir: Path) -> tuple[CheckReport, dict[str, Any] | None]:
    """A new report and the streams' manifest (None, with the problem reported, when it cannot be read)."""
    report = CheckReport()
    try:
        return report, read_manifest(tokens_dir)
    except TokenStreamError as exc:
        report.fail(str(exc))
        return report, None


def check_counts(tokens_dir: str | Path) -> CheckReport:
    """Manifest totals = per-document counts = `.idx` sizes; files match their recorded size and sha256."""
    tokens_dir = Path(tokens_dir)
    report, manifest = _start(tokens_dir)
    if manifest is None:
        return report
    itemsize = np.dtype(manifest["dtype"]).itemsize
    idx_lengths: dict[str, np.ndarray] = {}
    for split in SPLITS:
        entry = manifest["splits"][split]
        lengths = []
        for part in entry["files"]:
            for kind in ("bin", "idx"):
                f = part[kind]
                path = tokens_dir / f["name"]
                if not path.is_file():
                    report.fail(f"{f['name']}: missing")
                    continue
                if path.stat().st_size != f["bytes"]:
                    report.fail(f"{f['name']}: {path.stat().st_size} bytes, manifest says {f['bytes']}")
                elif sha256_file(path) != f["sha256"]:
                    report.fail(f"{f['name']}: sha256 differs from the manifest")
            try:
                index = read_index(tokens_dir / part["idx"]["name"])
            except (OSError, ValueError) as exc:
                report.fail(str(exc))
                continue
            _check_index(report, part, index, itemsize, manifest["dtype"])
            lengths.append(index.lengths)
        seq = np.concatenate(lengths).astype(np.int64) if lengths else np.zeros(0, np.int64)
        idx_lengths[split] = seq
        if int(seq.sum()) != entry["n_tokens"]:
            report.fail(
                f"split {split}: .idx sizes sum to {int(seq.sum())}, manifest says {entry['n_tokens']}"
            )
        if seq.size != entry["n_docs"]:
            report.fail(
                f"split {split}: .idx holds {seq.size} sequences, manifest says {entry['n_docs']} documents"
            )
    _check_counts_table(report, tokens_dir, manifest, idx_lengths)
    report.metadata.update(
        n_docs=manifest["n_docs"],
        n_tokens=manifest["n_tokens"],
        **stream_counts(manifest),
        counts_table=COUNTS_NAME,
    )
    return report


def stream_counts(manifest: dict) -> dict[str, int]:
    """How many .bin/.idx pairs a token manifest names, and their files: the token_streams asset and
    token_counts_consistent report the same figures."""
    pairs = sum(len(manifest["splits"][s]["files"]) for s in SPLITS)
    return {"streams": pairs, "files": 2 * pairs}


def _check_index(
    report: CheckReport, part: dict[str, Any], index: IndexData, itemsize: int, dtype: str
) -> None:
    name = part["idx"]["name"]
    if index.dtype.name != dtype:
        report.fail(
            f"{name}: dtype code {DTYPE_CODES[index.dtype.name]} ({index.dtype.name}), manifest dtype {dtype}"
        )
    n = index.lengths.size
    if n != part["n_docs"]:
        report.fail(f"{name}: {n} sequences, manifest says {part['n_docs']}")
    if int(index.lengths.astype(np.int64).sum()) != part["n_tokens"]:
        report.fail(f"{name}: sizes sum to {int(index.lengths.sum())}, manifest says {part['n_tokens']}")
    expected_ptr = (
        np.concatenate([[0], np.cumsum(index.lengths.astype(np.int64) * itemsize)[:-1]]) if n else []
    )
    if not np.array_equal(index.pointers, expected_ptr):
        report.fail(f"{name}: sequence pointers are not the running byte offsets of the sizes")
    if not np.array_equal(index.doc_indices, np.arange(n + 1)):
        report.fail(f"{name}: document index is not 0..{n} (one sequence per document)")
    if int(index.lengths.astype(np.int64).sum()) * itemsize != part["bin"]["bytes"]:
        report.fail(
            f"{part['bin']['name']}: {part['bin']['bytes']} bytes but the .idx sizes need "
            f"{int(index.lengths.sum()) * itemsize}"
        )


def _check_counts_table(
    report: CheckReport, tokens_dir: Path, manifest: dict[str, Any], idx_lengths: dict[str, np.ndarray]
) -> None:
    path = tokens_dir / COUNTS_NAME
    if not path.is_file():
        report.fail(f"{COUNTS_NAME}: missing")
        return
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        report.fail(f"{COUNTS_NAME}: cannot be read: {type(exc).__name__}: {exc}")
        return
    n_tokens = table.column("n_tokens").to_numpy().astype(np.int64)
    split = np.asarray(table.column("split").to_pylist(), dtype=object)
    if table.num_rows != manifest["n_docs"]:
        report.fail(f"{COUNTS_NAME}: {table.num_rows} rows, manifest says {manifest['n_docs']} documents")
    if int(n_tokens.sum()) != manifest["n_tokens"]:
        report.fail(
            f"{COUNTS_NAME}: n_tokens sums to {int(n_tokens.sum())}, manifest says {manifest['n_tokens']}"
        )
    names = set(table.column("tokenizer").unique().to_pylist())
    if names - {manifest["tokenizer"]["name"]}:
        report.fail(
            f"{COUNTS_NAME}: tokenizer column holds {sorted(names)}, manifest says "
            f"{manifest['tokenizer']['name']!r}"
        )
    ids = table.column("id").to_pylist()
    if any(a.encode() >= b.encode() for a, b in zip(ids, ids[1:], strict=False)):
        report.fail(f"{COUNTS_NAME}: ids are not strictly increasing")
    for s in SPLITS:
        mine = n_tokens[split == s]
        if not np.array_equal(mine, idx_lengths[s]):
            report.fail(
                f"split {s}: per-document counts in {COUNTS_NAME} differ from the .idx sizes in order"
            )


def sample_positions(n: int, k: int) -> list[int]:
    """Up to k document positions evenly spread over 0..n-1, first and last included."""
    if n <= 0:
        return []
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, num=min(k, n))})


def check_decode_sample(
    shards_dir: str | Path, tokens_dir: str | Path, tok_cfg: TokenizeSettings
) -> CheckReport:
    """Decode a sample of documents from the streams and compare with their shard text, exactly."""
    shards_dir, tokens_dir = Path(shards_dir), Path(tokens_dir)
    report = CheckReport()
    try:
        manifest = read_manifest(tokens_dir)
        shards, _ = read_shards_manifest(shards_dir)
    except TokenStreamError as exc:
        report.fail(str(exc))
        return report
    tok = load_tokenizer(tok_cfg, threads=1)
    if (
        tok.info.name != manifest["tokenizer"]["name"]
        or tok.info.vocab_size != manifest["tokenizer"]["vocab_size"]
    ):
        report.fail(
            f"configured tokenizer {tok.info.name!r} ({tok.info.vocab_size} ids) is not the one in "
            f"{MANIFEST_NAME} ({manifest['tokenizer']['name']!r}); rematerialize token_streams"
        )
        return report
    counts = pq.read_table(tokens_dir / COUNTS_NAME, columns=["id", "split"])
    ids = counts.column("id").to_pylist()
    splits = np.asarray(counts.column("split").to_pylist(), dtype=object)
    picks = sample_positions(len(ids), tok_cfg.check_sample_docs)
    # where each picked document sits: shard and row, split and position inside the split's parts
    shard_ends = np.cumsum([s["rows"] for s in shards["shards"]])
    by_shard: dict[int, list[int]] = {}
    for g in picks:
        by_shard.setdefault(int(np.searchsorted(shard_ends, g, side="right")), []).append(g)
    split_pos = {s: np.cumsum(splits == s) - 1 for s in SPLITS}
    indexes = {
        s: [(p, read_index(tokens_dir / p["idx"]["name"])) for p in manifest["splits"][s]["files"]]
        for s in SPLITS
    }
    checked = 0
    for shard_i, globals_ in by_shard.items():
        base = int(shard_ends[shard_i - 1]) if shard_i else 0
        pf = _open_shard(report, shards_dir, shards["shards"][shard_i])
        if pf is None:
            continue
        for g, doc_id, text in _rows_of(report, pf, shards["shards"][shard_i]["name"], globals_, base):
            if doc_id != ids[g]:
                report.fail(f"document {g}: shard row is {doc_id!r}, counts table says {ids[g]!r}")
                continue
            seq = _locate(tokens_dir, indexes[splits[g]], int(split_pos[splits[g]][g]))
            try:
                decoded = tok.decode_text(seq)
            except (ValueError, UnicodeDecodeError) as exc:
                report.fail(f"{doc_id}: cannot decode its sequence: {exc}")
                continue
            checked += 1
            if decoded != text:
                at = next(
                    (i for i, (a, b) in enumerate(zip(decoded, text, strict=False)) if a != b),
                    min(len(decoded), len(text)),
                )
                report.fail(
                    f"{doc_id}: decoded text differs from the shard text at character {at} "
                    f"(decoded {decoded[at : at + 20]!r}, shard {text[at : at + 20]!r})"
                )
    report.metadata.update(sampled=len(picks), decoded=checked)
    return report


def _open_shard(report: CheckReport, shards_dir: Path, entry: dict[str, Any]) -> pq.ParquetFile | None:
    """One published shard, its bytes checked against its sha256 in the shards manifest and read from those
    same bytes; None (with a problem naming the shard) when it differs or cannot be opened."""
    path = shards_dir / entry["name"]
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            report.fail(f"{entry['name']}: sha256 differs from _MANIFEST.json; rematerialize shards")
            return None
        return pq.ParquetFile(pa.BufferReader(data))
    except (OSError, pa.ArrowException, ValueError) as exc:
        report.fail(f"{entry['name']}: cannot be read: {type(exc).__name__}: {exc}")
        return None


def _rows_of(report: CheckReport, pf: pq.ParquetFile, name: str, globals_: list[int], base: int
             ) -> Iterator[tuple[int, str, str]]:
    """(global position, id, text) of the shard rows `g - base` for g in `globals_`, a row group at a time:
    a shard is bounded in rows, not bytes, and only its row groups are (`publish.row_group_max_bytes`)."""
    try:
        for positions, local, table in rows_by_group(pf, [g - base for g in globals_], ["id", "text"]):
            ids, texts = table.column("id").take(pa.array(local)), table.column("text").take(pa.array(local))
            for k, p in enumerate(positions.tolist()):
                yield globals_[p], ids[k].as_py(), texts[k].as_py()
    except (OSError, pa.ArrowException, ValueError) as exc:
        report.fail(f"{name}: cannot be read: {type(exc).__name__}: {exc}")


def _locate(tokens_dir: Path, parts: list[tuple[dict[str, Any], IndexData]], pos: int) -> np.ndarray:
    """The sequence at position `pos` of a split spread over several parts."""
    for part, index in parts:
        if pos < index.lengths.size:
            return read_sequence(tokens_dir / part["bin"]["name"], index, pos)
        pos -= index.lengths.size
    raise IndexError("document position beyond the split's sequences")


def other_worker_count(workers: int) -> int:
    """A different worker count to rebuild with: 2 when the build used 1, else 1."""
    return 2 if workers <= 1 else 1


def check_rebuild(
    shards_dir: str | Path, tokens_dir: str | Path, tok_cfg: TokenizeSettings, workers: int
) -> CheckReport:
    """Rebuild the streams with another worker count into a scratch folder and compare every file's sha256."""
    tokens_dir = Path(tokens_dir)
    report, manifest = _start(tokens_dir)
    if manifest is None:
        return report
    scratch = tokens_dir.parent / f".{tokens_dir.name}.rebuild-{uuid.uuid4().hex[:12]}"
    other = other_worker_count(workers)
    try:
        rebuilt = build_token_streams(shards_dir, scratch, tok_cfg, workers=other)
        names = sorted(p.name for p in tokens_dir.iterdir() if not p.name.startswith("."))
        again = sorted(p.name for p in scratch.iterdir())
        if names != again:
            report.fail(f"file sets differ: {names} vs rebuilt {again}")
        for name in sorted(set(names) & set(again)):
            if sha256_file(tokens_dir / name) != sha256_file(scratch / name):
                report.fail(f"{name}: differs from a rebuild with workers={rebuilt.workers}")
        report.metadata.update(rebuild_workers=rebuilt.workers, files_compared=len(set(names) & set(again)))
    except CorpusError as exc:
        report.fail(f"rebuild failed: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.metadata.update(n_tokens=manifest["n_tokens"])
    return report


def _tokenize_rows_for_check(task: ShardTask, ranges: list[tuple[int, int]], tok_cfg: TokenizeSettings, dtype: str
                             ) -> list[tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Rows [a, b) of one shard (sha256 checked) tokenized from scratch in whichever process runs this:
    per range its ids and its tokens and lengths per split (a rebuild unit of the sampled check)."""
    pf = open_shard(task)
    tok = load_tokenizer(tok_cfg, threads=1)
    out = []
    for a, b in ranges:
        part = read_row_range(pf, a, b, ["id", "text", "split"])  # a shard's row groups are bounded in bytes
        tokens, lengths = tok.encode_documents(part.column("text").to_pylist(), np.dtype(dtype))
        split = np.asarray(part.column("split").to_pylist(), dtype=object)
        codes = np.full(len(split), 255, dtype=np.uint8)
        for k, name in enumerate(SPLITS):
            codes[split == name] = k
        by_split, len_split = group_by_split(tokens, lengths, codes)
        out.append((part.column("id").to_pylist(), by_split, len_split))
    return out


def _stream_range(tokens_dir: Path, parts: list[tuple[dict[str, Any], IndexData]], start: int, count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, lengths) of sequences start..start+count-1 of a split spread over several parts."""
    toks, lens = [], []
    for part, index in parts:
        n = index.lengths.size
        if count and start < n:
            stop = min(n, start + count)
            first = int(index.pointers[start])
            size = int(index.lengths[start:stop].astype(np.int64).sum()) * index.dtype.itemsize
            mm = np.memmap(tokens_dir / part["bin"]["name"], dtype=np.uint8, mode="r")
            toks.append(np.frombuffer(mm[first:first + size].tobytes(), dtype=index.dtype.newbyteorder("<")))
            lens.append(index.lengths[start:stop].astype(np.int64))
            count -= stop - start
            start = n
        start -= n
    if not toks:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(toks), np.concatenate(lens)


# The sampled rebuild's unit is bounded in tokens as well as in documents: ids sort by source, so a batch of
# batch_docs rows of one long-document source held 14x the text of another (41 MB against 3 MB on the bench
# corpus) and a sample of two batches cost anywhere from 5% to 70% of a full rebuild.
CHECK_UNIT_TOKENS = 1 << 20


def check_units(rows: list[int], n_tokens: np.ndarray, max_docs: int, max_tokens: int = CHECK_UNIT_TOKENS
                ) -> list[tuple[int, int, int]]:
    """(shard, first row, end row) units covering every row of every shard in order: consecutive rows, at
    most `max_docs` of them and at most `max_tokens` tokens (a document longer than that is a unit alone).

    `n_tokens` holds every document's count, shard after shard (the counts table's order)."""
    units: list[tuple[int, int, int]] = []
    offset = 0
    for i, n in enumerate(rows):
        cum = np.concatenate([[0], np.cumsum(n_tokens[offset:offset + n], dtype=np.int64)])
        a = 0
        while a < n:
            by_tokens = int(np.searchsorted(cum, cum[a] + max_tokens, side="right")) - 1
            b = min(n, a + max_docs, max(by_tokens, a + 1))
            units.append((i, a, b))
            a = b
        offset += n
    return units


def check_rebuild_sample(
    shards_dir: str | Path, tokens_dir: str | Path, tok_cfg: TokenizeSettings, workers: int, sample_batches: int,
    seed: str,
) -> CheckReport:
    """Retokenize a seeded sample of document units with another worker count; they must equal the streams.

    A unit is a run of consecutive rows of one shard, at most `tokenize.batch_docs` documents and
    CHECK_UNIT_TOKENS tokens (see check_units): its documents sit at known consecutive positions of each
    split's streams (from the counts table and the shard row counts), so a rebuilt unit is compared token
    for token and length for length with exactly the slice the full build wrote. `check_counts` proves
    every file matches the sha256 in `_TOKENS.json`; with it, a run keeps the full rebuild's guarantee for
    the sampled units at a fixed cost (at most sample_batches x CHECK_UNIT_TOKENS tokens, whatever the
    corpus size or its document lengths), and successive seeds cover other units. `sample_batches` 0 (or at
    least the number of units) runs the full rebuild (`check_rebuild`), as a scheduled run should now and then.
    """
    shards_dir, tokens_dir = Path(shards_dir), Path(tokens_dir)
    report = CheckReport()
    try:
        manifest = read_manifest(tokens_dir)
        shards, _ = read_shards_manifest(shards_dir)
        tasks = shard_tasks(shards_dir, shards)
    except TokenStreamError as exc:
        report.fail(str(exc))
        return report
    size = int(tok_cfg.batch_docs)
    try:
        counts = pq.read_table(tokens_dir / COUNTS_NAME, columns=["id", "split", "n_tokens"])
    except (OSError, pa.ArrowException) as exc:
        report.fail(f"{COUNTS_NAME}: {exc}")
        return report
    base = np.concatenate([[0], np.cumsum([t.rows for t in tasks])]).astype(np.int64)
    if int(base[-1]) != counts.num_rows:
        report.fail(f"{COUNTS_NAME} has {counts.num_rows} documents, the shards {int(base[-1])}")
        return report
    n_tokens = counts.column("n_tokens").to_numpy()
    units = check_units([t.rows for t in tasks], n_tokens, size, CHECK_UNIT_TOKENS)
    if sample_batches <= 0 or sample_batches >= len(units):
        full = check_rebuild(shards_dir, tokens_dir, tok_cfg, workers)
        full.metadata.update(mode="full", batches_rebuilt=len(units))
        return full
    picks = [units[u] for u in sample_units(len(units), sample_batches, seed)]
    splits = np.asarray(counts.column("split").to_pylist(), dtype=object)
    before = {s: np.concatenate([[0], np.cumsum(splits == s)]) for s in SPLITS}  # split docs before row g
    indexes = {s: [(p, read_index(tokens_dir / p["idx"]["name"])) for p in manifest["splits"][s]["files"]]
               for s in SPLITS}
    other = other_worker_count(workers)
    dtype = next((str(ix[0][1].dtype) for ix in indexes.values() if ix), "uint32")
    by_shard: dict[int, list[tuple[int, int]]] = {}
    for i, a, b in picks:
        by_shard.setdefault(i, []).append((a, b))
    jobs = [(tasks[i], ranges, tok_cfg, dtype) for i, ranges in sorted(by_shard.items())]
    try:
        rebuilt = list(ordered_map(_tokenize_rows_for_check, jobs, other))
    except CorpusError as exc:
        report.fail(f"rebuild failed: {exc}")
        return report
    for (i, ranges), results in zip(sorted(by_shard.items()), rebuilt, strict=True):
        for (a, b), (ids, toks_by_split, lens_by_split) in zip(ranges, results, strict=True):
            where = f"{tasks[i].path.name} rows {a}..{b - 1}"
            g0, g1 = int(base[i]) + a, int(base[i]) + b
            if ids != counts.column("id")[g0:g1].to_pylist():
                report.fail(f"{where}: document ids differ from {COUNTS_NAME}")
                continue
            for s in SPLITS:
                start, count = int(before[s][g0]), int(before[s][g1] - before[s][g0])
                toks, lens = _stream_range(tokens_dir, indexes[s], start, count)
                if not np.array_equal(lens, lens_by_split[s].astype(np.int64)):
                    report.fail(f"{where}: {s} document lengths differ from a rebuild with workers={other}")
                elif not np.array_equal(toks.astype(np.int64), toks_by_split[s].astype(np.int64)):
                    report.fail(f"{where}: {s} tokens differ from a rebuild with workers={other}")
    report.metadata.update(mode="sample", batches_rebuilt=len(picks), batches=len(units), batch_docs=size,
                           unit_tokens=CHECK_UNIT_TOKENS,
                           tokens_rebuilt=sum(int(n_tokens[base[i] + a:base[i] + b].sum()) for i, a, b in picks),
                           rebuild_workers=other, seed=seed,
                           sampled=[f"{tasks[i].path.name}:{a}" for i, a, _ in picks][:20])
    return report
