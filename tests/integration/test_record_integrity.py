"""A cached stage output is reused only while its bytes match the sha256 in its `_RECORD.json`.

Damage that keeps a file's size and mtime (bits flipped in place, the mtime set back) is caught by the
stage's own cache check, by `begin` and by every reader through `record_files`; one line names the stage,
the source and the file; the CLI rebuilds what was damaged and publishes the same bytes as before.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from corpus_dagster.core import records
from corpus_dagster.core.errors import StageOutputDamaged, StageOutputError
from corpus_dagster.core.records import StageRecord

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def flip_bit(path: Path, offset: int | None = None, bit: int = 4) -> None:
    """Flip one bit of a file in place (the middle byte by default), then set its atime and mtime back."""
    st = path.stat()
    offset = st.st_size // 2 if offset is None else offset
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ (1 << bit)]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def column_chunk(path: Path, column: str) -> tuple[int, int]:
    """(first byte, compressed size) of `column`'s pages in the first row group."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.row_group(0).column(i).path_in_schema for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(next(i for i, n in enumerate(names) if n == column or n.startswith(column + ".")))
    start = min(o for o in (chunk.dictionary_page_offset, chunk.data_page_offset) if o is not None and o > 0)
    return start, chunk.total_compressed_size


def data_page_offset(path: Path, column: str) -> int:
    """A byte in the middle of the first row group's (compressed) pages of `column`: inside the file body."""
    start, size = column_chunk(path, column)
    return start + size // 2


# --- core.records on a hand-made stage folder ---------------------------------------------------------------


@pytest.fixture
def stage(tmp_path: Path) -> tuple[Path, StageRecord]:
    """stages/clean/alpha/ with two outputs under key k1 and its record."""
    folder = tmp_path / "stages" / "clean" / "alpha"
    (folder / "k1").mkdir(parents=True)
    names = ["k1/docs-00000.parquet", "k1/docs-00001.parquet"]
    for i, name in enumerate(names):
        (folder / name).write_bytes(bytes(range(256)) * (8 + i))
    record = StageRecord(stage="clean", key="k1", code_version="1", inputs={}, settings={},
                         outputs=records.describe_outputs(folder, names), files={"docs": names})
    records.commit(folder, record)
    return folder, record


def test_cached_misses_a_bit_flip_that_keeps_size_and_mtime_and_names_the_file(stage, caplog):
    folder, _ = stage
    assert records.cached(folder, "k1") is not None
    flip_bit(folder / "k1" / "docs-00001.parquet")
    with caplog.at_level(logging.WARNING, logger="corpus_dagster.records"):
        assert records.cached(folder, "k1") is None
    assert [r.getMessage() for r in caplog.records] == [
        "stage 'clean' [alpha]: stages/clean/alpha/k1/docs-00001.parquet is damaged "
        "(sha256 differs from its _RECORD.json); rebuilding it"
    ]
    assert not records.outputs_intact(folder, records.read_record(folder))


def test_a_missing_output_reads_as_missing_not_as_nested_parentheses(stage, caplog):
    folder, _ = stage
    (folder / "k1" / "docs-00000.parquet").unlink()
    with caplog.at_level(logging.WARNING, logger="corpus_dagster.records"):
        assert records.cached(folder, "k1") is None
    assert [r.getMessage() for r in caplog.records] == [
        "stage 'clean' [alpha]: stages/clean/alpha/k1/docs-00000.parquet is missing (listed in its _RECORD.json); "
        "rebuilding it"
    ]


def test_a_damaged_output_removed_by_begin_is_reported_once_not_again_as_missing(stage, caplog):
    folder, _ = stage
    flip_bit(folder / "k1" / "docs-00001.parquet")
    with caplog.at_level(logging.WARNING, logger="corpus_dagster.records"):
        assert records.begin(folder) == 1  # what a fetch does before its cache check (raw parts)
        assert records.cached(folder, "k1") is None
    assert [r.getMessage() for r in caplog.records] == [
        "stage 'clean' [alpha]: stages/clean/alpha/k1/docs-00001.parquet is damaged "
        "(sha256 differs from its _RECORD.json); rebuilding it"
    ]


def test_record_files_refuses_a_damaged_file_naming_stage_file_and_what_reruns_it(stage):
    folder, record = stage
    damaged = folder / "k1" / "docs-00000.parquet"
    flip_bit(damaged)
    with pytest.raises(StageOutputDamaged) as err:
        records.record_files(folder, record, "docs")
    message = str(err.value)
    assert isinstance(err.value, StageOutputError) and "\n" not in message
    assert message.startswith(f"stage 'clean' [alpha]: {damaged} is damaged (sha256 differs from its _RECORD.json)")
    assert message.endswith("rerun that stage (materialize clean_documents[alpha]) to rebuild it")


def test_begin_removes_only_the_damaged_file(stage):
    folder, _ = stage
    flip_bit(folder / "k1" / "docs-00000.parquet")
    assert records.begin(folder) == 1
    assert not (folder / "k1" / "docs-00000.parquet").exists()
    assert (folder / "k1" / "docs-00001.parquet").exists()


def test_record_files_with_a_rebuild_heals_then_reads_again(stage, caplog):
    folder, record = stage
    path = folder / "k1" / "docs-00000.parquet"
    good = path.read_bytes()
    flip_bit(path)
    calls = []

    def rebuild() -> None:  # what a deterministic stage driver does under the same key
        calls.append(1)
        path.write_bytes(good)

    with caplog.at_level(logging.WARNING, logger="corpus_dagster.records"):
        paths = records.record_files(folder, record, "docs", rebuild)
    assert calls == [1] and paths[0] == path and path.read_bytes() == good
    assert any("stages/clean/alpha/k1/docs-00000.parquet is damaged" in r.getMessage() for r in caplog.records)


def test_a_rebuild_that_does_not_restore_the_file_is_refused(stage):
    folder, record = stage
    flip_bit(folder / "k1" / "docs-00000.parquet")
    with pytest.raises(StageOutputDamaged, match="docs-00000.parquet is damaged"):
        records.record_files(folder, record, "docs", lambda: None)


# --- Through the CLI: damage in each stage is named, rebuilt, and the published bytes do not change ---------


def published_bytes(artifacts: Path) -> dict[str, bytes]:
    """Every file of the shards folder (shards and _MANIFEST.json) and of the token streams folder."""
    out = {}
    for base in (artifacts / "corpus" / "testset" / "v1", artifacts / "tokens" / "testset" / "v1"):
        for p in sorted(base.rglob("*")):
            if p.is_file():
                out[str(p.relative_to(artifacts))] = p.read_bytes()
    return out


def run_cli(config: Path, log: Path) -> int:
    from corpus_dagster.cli.run import main

    return main([str(config), "--log-file", str(log)])


def add_duplicates(alpha: Path) -> None:
    """Exact and near copies of alpha's first documents, so the dedup tables have rows."""
    rows = [json.loads(line) for line in alpha.read_text(encoding="utf-8").splitlines()]
    extra = [{"text": r["text"], "link": f"https://a.example/copy-{i}"} for i, r in enumerate(rows[:3])]
    extra += [{"text": r["text"].rsplit(" ", 1)[0] + " lantern.", "link": f"https://a.example/near-{i}"}
              for i, r in enumerate(rows[3:6])]
    with open(alpha, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in extra))


@pytest.fixture(scope="module")
def first_build(tmp_path_factory):
    """One CLI build of the small three-source corpus (with duplicates); every case copies it."""
    from corpus_factory import write_setup

    root = tmp_path_factory.mktemp("integrity")
    config = write_setup(root)
    add_duplicates(root / "sources" / "alpha.jsonl")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        assert run_cli(config, root / "first.log") == 0
    artifacts = root / "artifacts"
    return root, published_bytes(artifacts)


def copy_build(first: Path, to: Path) -> Path:
    """The first build's artifacts and config under another folder (the records hold relative paths only)."""
    shutil.copytree(first / "artifacts", to / "artifacts", symlinks=True)
    cfg = yaml.safe_load((first / "corpus.yaml").read_text())
    cfg["paths"]["artifacts"] = str(to / "artifacts")
    config = to / "corpus.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return config


def _record_file(artifacts: Path, folder: str, kind: str, name: str | None = None) -> Path:
    record = records.read_record(artifacts / folder)
    paths = [artifacts / folder / n for n in record.files[kind]]
    return next(p for p in paths if name is None or p.name == name)


TARGETS = {  # case -> (stage folder, output list, file name, column whose pages get the flipped bit)
    "clean_docs": ("stages/clean/alpha", "docs", None, "text"),
    "signatures": ("stages/minhash/beta", "signatures", None, "signature"),
    "scrub_docs": ("stages/scrub/gamma", "docs", None, "text"),
    "dedup_table": ("stages/dedup", "tables", "dropped.parquet", "id"),
}


# --- A published shard read by the checks ---------------------------------------------------------------------


def test_checks_name_a_damaged_shard_instead_of_raising(first_build, tmp_path):
    from corpus_dagster.core.config import load_settings
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.publish import driver as publish
    from corpus_dagster.publish.outputs import verified_shards

    config = copy_build(first_build[0], tmp_path)
    settings = load_settings(config)
    layout = Layout.from_config(settings.resolved)
    edited, undecodable = publish.published_shards(layout)[:2]
    flip_bit(edited, data_page_offset(edited, "text"))  # decodes, to another text
    start, size = column_chunk(undecodable, "text")
    frame = undecodable.read_bytes().find(ZSTD_MAGIC, start, start + size)
    assert frame > 0
    flip_bit(undecodable, frame)  # a zstd frame header: the page cannot be decompressed
    manifest = publish.publish_check(layout, settings, "manifest_consistent").problems
    for shard in (edited, undecodable):
        assert any(p.startswith(f"{shard.name}: sha256 differs from _MANIFEST.json") for p in manifest), manifest
    problems = publish.publish_check(layout, settings, "hashes_match_text").problems
    assert any(p.startswith(f"{edited.name}: ") and "sha256 does not match its text" in p for p in problems), problems
    assert f"{undecodable.name}: cannot be read: OSError: ZSTD decompression failed" in "\n".join(problems), problems
    for name in ("ids_sorted", "shard_schema", "no_pii_in_shards"):
        report = publish.publish_check(layout, settings, name)
        assert all(isinstance(p, str) for p in report.problems)  # a problem naming the shard, never an OSError
    with pytest.raises(StageOutputDamaged, match=f"stage 'publish': .*{edited.name} is damaged.*materialize shards"):
        verified_shards(layout)


@pytest.mark.parametrize("case", list(TARGETS))
def test_cli_rebuilds_a_damaged_stage_output_and_publishes_the_same_bytes(first_build, tmp_path, monkeypatch, capsys,
                                                                          case):
    first_root, first_bytes = first_build
    config = copy_build(first_root, tmp_path)
    artifacts = tmp_path / "artifacts"
    folder, kind, name, column = TARGETS[case]
    target = _record_file(artifacts, folder, kind, name)
    good = target.read_bytes()
    columns = pq.ParquetFile(target).schema_arrow.names
    flip_bit(target, data_page_offset(target, column if column in columns else columns[-1]))
    assert target.read_bytes() != good

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    log = tmp_path / "run.log"
    assert run_cli(config, log) == 0, capsys.readouterr().out[-3000:]
    shown = str(target.relative_to(artifacts))
    source = f" [{Path(folder).name}]" if folder.count("/") == 2 else ""
    stage_name = folder.split("/")[1]
    line = (f"stage '{stage_name}'{source}: {shown} is damaged (sha256 differs from its _RECORD.json); "
            f"rebuilding it")
    assert line in log.read_text(encoding="utf-8") + capsys.readouterr().out
    assert target.read_bytes() == good  # rebuilt, byte for byte
    assert published_bytes(artifacts) == first_bytes
    manifest = json.loads((artifacts / "corpus" / "testset" / "v1" / "_MANIFEST.json").read_text())
    assert manifest["n_docs"] > 0
