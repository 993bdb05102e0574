"""SOURCE_DATE_EPOCH fixes the fetch time, so a build on a fresh artifacts root repeats its bytes."""

import datetime as dt
import json

import pytest

from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import ConfigError
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import Source
from corpus_dagster.ingest.clock import fetch_time
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.ingest.outputs import raw_parts


def test_the_clock_without_the_variable(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    before = dt.datetime.now(dt.UTC)
    assert before <= fetch_time() <= dt.datetime.now(dt.UTC)


def test_the_variable_names_the_time(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1765065600")
    assert fetch_time() == dt.datetime(2025, 12, 7, tzinfo=dt.UTC)


@pytest.mark.parametrize("value", ["-5", "1.5", "tomorrow"])
def test_a_value_that_is_not_whole_seconds_is_refused(monkeypatch, value):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    with pytest.raises(ConfigError, match="whole seconds"):
        fetch_time()


def test_two_fresh_roots_give_the_same_raw_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1765065600")
    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(5)))
    source = Source("alpha", (f"file://{data}",), "jsonl", "MIT")
    parts = []
    for root in ("one", "two"):
        settings = load_settings(None, {"paths": {"artifacts": str(tmp_path / root)}})
        layout = Layout.from_config(settings.resolved)
        result = fetch_source(source, layout, settings.ingest)
        assert result.date == "20251207"
        paths, _, _ = raw_parts(layout, "alpha")
        parts.append([p.read_bytes() for p in paths])
    assert parts[0] == parts[1] and parts[0]
