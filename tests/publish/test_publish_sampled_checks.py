"""The determinism checks rebuild a seeded sample (shards, token batches) and still catch a changed byte;
with a sample of 0 they rebuild everything. A scrub regex cannot backtrack exponentially on long words."""

from pathlib import Path

import pytest
import yaml

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.settings import Settings
from corpus_dagster.publish import driver as publish_driver
from corpus_dagster.tokenize import driver as tokens_driver


@pytest.fixture
def built(setup_dir: Path) -> Path:
    from stage_runs import run_all

    run_all(setup_dir)
    return setup_dir


def _resolved(config: Path, **publish) -> tuple[Settings, Layout]:
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("publish", {}).update(publish)
    config.write_text(yaml.safe_dump(cfg))
    settings = load_settings(config)
    return settings, Layout.from_config(settings.resolved)


def test_sampled_shard_rebuild_passes_on_good_shards_and_catches_a_changed_byte(built: Path) -> None:
    resolved, layout = _resolved(built, rebuild_check_shards=50)  # more than the shards: every shard sampled
    report = publish_driver.check_rebuild(layout, resolved)
    assert report.passed, report.problems
    full, layout = _resolved(built, rebuild_check_shards=0)  # every shard and the manifest, byte for byte
    report = publish_driver.check_rebuild(layout, full)
    assert report.passed and report.metadata["manifest_rebuilt"], report.problems
    shard = sorted(layout.shards.glob("shard-*.parquet"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    assert not publish_driver.check_rebuild(layout, resolved).passed
    full, layout = _resolved(built, rebuild_check_shards=0)
    assert not publish_driver.check_rebuild(layout, full).passed


def test_sampled_token_rebuild_catches_a_changed_token(built: Path) -> None:
    cfg = yaml.safe_load(built.read_text())
    cfg.setdefault("tokenize", {})["rebuild_check_batches"] = 1000
    built.write_text(yaml.safe_dump(cfg))
    resolved = load_settings(built)
    layout = Layout.from_config(resolved.resolved)
    assert tokens_driver.check_streams_rebuild(layout, resolved).passed
    stream = layout.tokens / "train.bin"
    data = bytearray(stream.read_bytes())
    data[8] ^= 0x01
    stream.write_bytes(bytes(data))
    assert not tokens_driver.check_streams_rebuild(layout, resolved).passed


@pytest.mark.timeout(30)
def test_key_detector_has_no_exponential_backtracking_on_long_words() -> None:
    from corpus_dagster.core.settings import PiiKeysSettings
    from corpus_dagster.scrub.api import default_pii_config
    from corpus_dagster.scrub.keys import secret_value_ok

    # a run of lower-case letters ending in a capital: `(?:[A-Z]?[a-z]+)+` tried every split of the run;
    # the timeout catches the backtracking, the verdicts that the detector still decides both ways
    cfg = PiiKeysSettings.from_dict(default_pii_config()["keys"])
    assert secret_value_ok("a" * 40 + "A", cfg) is False  # one long word: no key
    assert secret_value_ok("aZ3kP9qLm2Xw7RtY5nB8vC1d", cfg) is True  # mixed classes, no words: a key


def _docs_file(path: Path, ids: list[str], texts: list[str]) -> Path:
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    shas = [hashlib.sha256(t.encode()).digest() for t in texts]
    pq.write_table(pa.table({"id": ids, "text": texts, "sha256": pa.array(shas, pa.binary(32))}), path)
    return path


def test_pii_scan_of_a_seeded_sample_finds_only_what_it_scans(tmp_path: Path) -> None:
    from corpus_dagster.core.checks import sample_units
    from corpus_dagster.core.settings import PiiSettings
    from corpus_dagster.publish.checks import check_no_pii
    from corpus_dagster.scrub.api import default_pii_config

    texts = [f"plain text number {i}" for i in range(40)]
    texts[29] = "write to jean.roy@fastmail.fr about the garden"
    paths = [_docs_file(tmp_path / "a.parquet", [f"s:{i}" for i in range(20)], texts[:20]),
             _docs_file(tmp_path / "b.parquet", [f"s:{i}" for i in range(20, 40)], texts[20:])]
    cfg = PiiSettings.from_dict(default_pii_config())
    assert any("s:29: emails" in p for p in check_no_pii(paths, cfg, 0, "k").problems)  # 0: every document
    hit = next(seed for seed in map(str, range(100)) if 29 in sample_units(40, 5, seed))
    miss = next(seed for seed in map(str, range(100)) if 29 not in sample_units(40, 5, seed))
    assert any("s:29: emails" in p for p in check_no_pii(paths, cfg, 5, hit).problems)
    assert check_no_pii(paths, cfg, 5, miss).passed


def test_published_text_must_be_the_scrubbed_text_of_its_id(tmp_path: Path) -> None:
    from corpus_dagster.publish.checks import check_published_text_scrubbed

    scrubbed = [_docs_file(tmp_path / "s.parquet", ["s:0", "s:1", "s:2"], ["a <EMAIL>", "b", "c"])]
    good = _docs_file(tmp_path / "p.parquet", ["s:0", "s:2"], ["a <EMAIL>", "c"])  # s:1 deduplicated away
    assert check_published_text_scrubbed([good], scrubbed).passed
    leaked = _docs_file(tmp_path / "q.parquet", ["s:0", "s:2"], ["a jean.roy@fastmail.fr", "c"])
    assert [p.split(":")[0] + ":" + p.split(":")[1] for p in check_published_text_scrubbed([leaked], scrubbed).problems] == ["s:0"]
    stranger = _docs_file(tmp_path / "r.parquet", ["t:9"], ["c"])  # same text, an id the scrub never wrote
    assert check_published_text_scrubbed([stranger], scrubbed).n_problems == 1


def test_no_pii_check_catches_unscrubbed_text_outside_its_sample(built: Path) -> None:
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    resolved, layout = _resolved(built, pii_check_docs=1)
    assert publish_driver.check_no_pii(layout, resolved).passed
    shard = sorted(layout.shards.glob("shard-*.parquet"))[-1]
    table = pq.read_table(shard)
    texts = table["text"].to_pylist()
    texts[-1] += " Mail jean.roy@fastmail.fr today."  # sha256 kept consistent, as a wrong input would be
    shas = [hashlib.sha256(t.encode()).digest() for t in texts]
    table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
    table = table.set_column(table.schema.get_field_index("sha256"), "sha256", pa.array(shas, pa.binary(32)))
    pq.write_table(table, shard)
    report = publish_driver.check_no_pii(layout, resolved)
    assert not report.passed
    assert any("not the scrubbed text" in p for p in report.problems)


def test_analysis_cluster_check_draws_by_the_build_key_within_its_text_budget(setup_dir: Path, monkeypatch) -> None:
    """The cluster check hashes about `analysis.verify_cluster_bytes` of text, on a sample seeded by
    `verify_seed` and the analysis key (each build draws anew); 0 recomputes every cluster."""
    import random

    from corpus_factory import document
    from stage_runs import run_all

    from corpus_dagster.analysis import driver as analysis_driver
    from corpus_dagster.core.ledger import load_ledger

    rng = random.Random(4)
    for group in range(4):  # near duplicates: the same text, then a different last sentence
        base = document(rng, sentences=20)
        for member in range(2 + group % 2):
            tail = document(rng, sentences=1)
            (setup_dir.parent / "sources" / "gamma" / f"near{group}_{member}.txt").write_text(f"{base} {tail}", encoding="utf-8")
    run_all(setup_dir)
    built = setup_dir

    def resolved_with(**analysis) -> tuple[Settings, Layout]:
        cfg = yaml.safe_load(built.read_text())
        cfg.setdefault("analysis", {}).update(analysis)
        built.write_text(yaml.safe_dump(cfg))
        resolved = load_settings(built)
        return resolved, Layout.from_config(resolved.resolved)

    resolved, layout = resolved_with(verify_cluster_bytes=1)
    analysis_driver.run_analysis_stage(layout, resolved, [s.source_id for s in load_ledger(layout.ledger)])
    key = analysis_driver.analysis_record(layout).key
    mod = analysis_driver._verify_module("cluster_jaccard")
    calls, real = [], mod.check_cluster_files
    monkeypatch.setattr(mod, "check_cluster_files", lambda *a, **kw: calls.append(kw) or real(*a, **kw))

    sampled = analysis_driver.verify_analysis(layout, resolved, "clusters")
    assert sampled.passed, sampled.problems
    assert calls[-1]["seed"] == f"0:{key}" and calls[-1]["max_bytes"] == 1
    clusters = sampled.metadata["t70_clusters"]
    assert clusters >= 2, "the test corpus needs near-duplicate clusters"
    assert sampled.metadata["t70_clusters_recomputed"] < clusters  # the budget held it to the first cluster drawn

    resolved, layout = resolved_with(verify_cluster_bytes=0)
    full = analysis_driver.verify_analysis(layout, resolved, "clusters")
    assert full.passed and full.metadata["t70_clusters_recomputed"] == clusters


def _check_units_oracle(rows: list[int], n_tokens: list[int], max_docs: int, max_tokens: int) -> list[tuple[int, int, int]]:
    """The greedy cut written plainly: extend a unit while both bounds hold; a unit has at least one row."""
    units, offset = [], 0
    for i, n in enumerate(rows):
        a = 0
        while a < n:
            b, tokens = a + 1, n_tokens[offset + a]
            while b < n and b - a < max_docs and tokens + n_tokens[offset + b] <= max_tokens:
                tokens += n_tokens[offset + b]
                b += 1
            units.append((i, a, b))
            a = b
        offset += n
    return units


@pytest.mark.parametrize("seed", range(6))
def test_token_check_units_are_bounded_by_documents_and_tokens(seed: int) -> None:
    import random

    import numpy as np

    from corpus_dagster.tokenize.checks import check_units

    rng = random.Random(seed)
    rows = [rng.randint(0, 40) for _ in range(rng.randint(1, 4))]
    n_tokens = [rng.choice([0, 1, 5, 30, 200, 5000]) for _ in range(sum(rows))]
    max_docs, max_tokens = rng.randint(1, 12), rng.randint(1, 400)
    units = check_units(rows, np.asarray(n_tokens, dtype=np.int32), max_docs, max_tokens)
    assert units == _check_units_oracle(rows, n_tokens, max_docs, max_tokens)
    covered = [(i, r) for i, a, b in units for r in range(a, b)]
    assert covered == [(i, r) for i, n in enumerate(rows) for r in range(n)]  # every row once, in order


def test_token_check_unit_of_one_long_document_stands_alone() -> None:
    import numpy as np

    from corpus_dagster.tokenize.checks import check_units

    assert check_units([5], np.array([10, 10, 900, 10, 10]), 1024, 100) == [(0, 0, 2), (0, 2, 3), (0, 3, 5)]


def test_sampled_token_rebuild_of_small_units_catches_a_changed_token(built: Path, monkeypatch) -> None:
    """In sample mode (many units, a few rebuilt) a changed token inside a rebuilt unit fails the check."""
    from corpus_dagster.tokenize import checks as token_checks

    cfg = yaml.safe_load(built.read_text())
    cfg.setdefault("tokenize", {})["rebuild_check_batches"] = 3
    built.write_text(yaml.safe_dump(cfg))
    resolved = load_settings(built)
    layout = Layout.from_config(resolved.resolved)
    monkeypatch.setattr(token_checks, "CHECK_UNIT_TOKENS", 16)  # many small units
    monkeypatch.setattr(token_checks, "sample_units", lambda n, k, seed: list(range(k)))  # the first units
    good = tokens_driver.check_streams_rebuild(layout, resolved)
    assert good.passed, good.problems
    assert good.metadata["mode"] == "sample" and good.metadata["batches"] > 3
    assert 0 < good.metadata["tokens_rebuilt"]
    stream = layout.tokens / "train.bin"
    data = bytearray(stream.read_bytes())
    data[0] ^= 0x01  # the first token of the first train document: in the first units
    stream.write_bytes(bytes(data))
    bad = tokens_driver.check_streams_rebuild(layout, resolved)
    assert not bad.passed and any("tokens differ" in p for p in bad.problems), bad.problems


def _chars_file(path: Path, lengths: list[int]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [f"s:{i}" for i in range(len(lengths))], "n_chars": pa.array(lengths, pa.int64())}), path)
    return path


@pytest.mark.parametrize("seed", ["a", "b", "c"])
def test_pii_sample_is_a_prefix_of_the_draw_within_its_character_budget(tmp_path: Path, seed: str) -> None:
    import random

    from corpus_dagster.core.checks import sample_order, sample_units
    from corpus_dagster.publish.checks import pii_sample

    rng = random.Random(seed)
    lengths = [rng.choice([10, 100, 1000, 100_000]) for _ in range(300)]
    paths = [_chars_file(tmp_path / "a.parquet", lengths[:120]), _chars_file(tmp_path / "b.parquet", lengths[120:])]
    assert list(pii_sample(paths, 50, seed)) == sample_units(300, 50, seed)  # no budget: the plain sample
    assert pii_sample(paths, 0, seed, 5000) is None and pii_sample(paths, 300, seed, 5000) is None  # all
    order = sample_order(300, 50, seed)
    budget = 20_000
    picked = list(pii_sample(paths, 50, seed, budget))
    k = len(picked)
    assert picked == sorted(order[:k])  # a prefix of the draw
    assert sum(lengths[i] for i in picked) <= budget or k == 1
    if k < 50:  # the next drawn document would not have fit
        assert sum(lengths[i] for i in order[:k + 1]) > budget


def test_pii_sample_keeps_the_first_drawn_document_over_budget(tmp_path: Path) -> None:
    from corpus_dagster.core.checks import sample_order
    from corpus_dagster.publish.checks import pii_sample

    paths = [_chars_file(tmp_path / "a.parquet", [10_000] * 20)]
    assert list(pii_sample(paths, 5, "k", 10)) == [sample_order(20, 5, "k")[0]]
