"""minhash.outputs.signature_file: the current signature file of a source, and with settings a missing or
stale one computed first (what the dedup plan relies on)."""

from __future__ import annotations

import datetime as dt

import pytest
from corpus_factory import write_setup

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.core.errors import UpstreamMissing
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.minhash import driver
from corpus_dagster.minhash.outputs import signature_file, signature_settings, signatures_current

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def test_signature_file_with_settings_computes_a_missing_then_a_stale_file(tmp_path, make_settings):
    config = write_setup(tmp_path)
    settings = make_settings(path=config)
    layout = Layout.from_config(settings.resolved)
    source = load_ledger(layout.ledger)[0]
    fetch_source(source, layout, settings.ingest, now=NOW)
    sid = source.source_id
    run_clean_source(layout, settings, sid)
    with pytest.raises(UpstreamMissing):
        signature_file(layout, sid)  # without settings, a reader never computes
    path = signature_file(layout, sid, settings)
    assert signatures_current(layout, sid, settings)
    assert signature_settings(path)["num_perm"] == settings.near_dup.num_perm
    assert driver.run_signatures(layout, settings, sid)["cached"]  # the file the reader computed is the stage's

    other = make_settings({"near_dup": {"num_perm": settings.near_dup.num_perm * 2}}, path=config)
    assert not signatures_current(layout, sid, other)
    stale = signature_file(layout, sid, other)
    assert signatures_current(layout, sid, other) and signature_settings(stale)["num_perm"] == other.near_dup.num_perm
