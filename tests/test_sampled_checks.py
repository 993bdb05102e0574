"""The determinism checks rebuild a seeded sample (shards, token batches) and still catch a changed byte;
with a sample of 0 they rebuild everything. A scrub regex cannot backtrack exponentially on long words."""

from pathlib import Path

import pytest
import yaml

from corpus_dagster.core.config import load_config
from corpus_dagster.core.layout import Layout
from corpus_dagster.publish import driver as publish_driver
from corpus_dagster.tokenize import driver as tokens_driver


@pytest.fixture
def built(setup_dir: Path) -> Path:
    from test_stage_keys import run_all

    run_all(setup_dir)
    return setup_dir


def _resolved(config: Path, **publish) -> tuple[dict, Layout]:
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("publish", {}).update(publish)
    config.write_text(yaml.safe_dump(cfg))
    resolved = load_config(config)
    return resolved, Layout.from_config(resolved)


def test_sampled_shard_rebuild_passes_on_good_shards_and_catches_a_changed_byte(built: Path) -> None:
    resolved, layout = _resolved(built, rebuild_check_shards=50)  # more than the shards: every shard sampled
    report = publish_driver.check_rebuild(layout, resolved)
    assert report.passed, report.problems
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
    resolved = load_config(built)
    layout = Layout.from_config(resolved)
    assert tokens_driver.check_streams_rebuild(layout, resolved).passed
    stream = layout.tokens / "train.bin"
    data = bytearray(stream.read_bytes())
    data[8] ^= 0x01
    stream.write_bytes(bytes(data))
    assert not tokens_driver.check_streams_rebuild(layout, resolved).passed


@pytest.mark.timeout(30)
def test_key_detector_has_no_exponential_backtracking_on_long_words() -> None:
    from corpus_dagster.scrub import default_pii_config
    from corpus_dagster.scrub.keys import secret_value_ok

    # a run of lower-case letters ending in a capital: `(?:[A-Z]?[a-z]+)+` tried every split of the run
    secret_value_ok("a" * 40 + "A", default_pii_config()["keys"])
