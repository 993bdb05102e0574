"""`ingest.allowed_prefixes`: ledger URLs are compared with the prefixes as normalized locations, so no spelling
(`..`, `file://`, percent-encoding, a symlinked folder, a host in the userinfo) names a place outside them."""

import json

import pytest

from corpus_dagster.core.allowed_locations import check_allowed_locations, location, outside_problem
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.errors import LedgerError
from corpus_dagster.core.ledger import Source


@pytest.fixture
def prefixes(tmp_path):
    (tmp_path / "allowed" / "sub").mkdir(parents=True)
    return tmp_path, [location(p) for p in
                      [f"{tmp_path}/allowed/", "https://Data.Example.org/pub", "s3://bucket/sources"]]


@pytest.mark.parametrize("url", [
    "{tmp}/allowed/a.jsonl", "{tmp}/allowed", "{tmp}/allowed/./sub/a.jsonl", "{tmp}/allowed/sub/../a.jsonl",
    "file://{tmp}/allowed/sub/*.txt", "local://{tmp}/allowed/a", "https://data.example.org/pub/a.jsonl",
    "HTTPS://DATA.example.org/pub/a", "s3://bucket/sources/x.jsonl", "s3://bucket/sources//x.jsonl",
])
def test_urls_inside_a_prefix_are_allowed(prefixes, url):
    tmp, allowed = prefixes
    assert outside_problem(url.format(tmp=tmp), allowed) is None


@pytest.mark.parametrize(("url", "says"), [
    ("{tmp}/allowed/../secret.txt", "it names {tmp}/secret.txt"),
    ("file://{tmp}/allowed/../secret.txt", "it names {tmp}/secret.txt"),
    ("{tmp}/allowed/*/../../secret.txt", "it names {tmp}/secret.txt"),
    ("file://{tmp}/allowed/*/../../secret.txt", "`..` after a glob character"),
    ("{tmp}/allowedx/a.jsonl", "outside ingest.allowed_prefixes"),
    ("/etc/passwd", "it names /etc/passwd"),
    ("file://evil{tmp}/allowed/a", "outside ingest.allowed_prefixes"),  # fsspec reads that relative to the cwd
    ("https://data.example.org/pubx/a", "outside"),
    ("https://data.example.org/pub/%2e%2e/secret", "it names https://data.example.org/secret"),
    ("https://data.example.org/pub/%252e%252e/secret", "it names https://data.example.org/secret"),
    ("https://data.example.org@evil.example/pub/a", "it names https://evil.example/pub/a"),
    ("https://data.example.org:8443/pub/a", "outside"),
    ("http://data.example.org/pub/a", "outside"),
    ("s3://bucket/other/x", "outside"),
    ("s3://other-bucket/sources/x", "outside"),
    ("zip://a.jsonl::file://{tmp}/allowed/z.zip", "a chained fsspec URL"),
    ("https://data.example.org:bad/pub/a", "an invalid port"),
])
def test_urls_outside_every_prefix_are_refused(prefixes, url, says):
    tmp, allowed = prefixes
    problem = outside_problem(url.format(tmp=tmp), allowed)
    assert problem is not None and says.format(tmp=tmp) in problem


def test_a_symlinked_folder_is_compared_where_it_leads(tmp_path):
    (tmp_path / "allowed").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "allowed" / "link").symlink_to(tmp_path / "outside")
    allowed = [location(str(tmp_path / "allowed"))]
    assert "it names" in outside_problem(f"file://{tmp_path}/allowed/link/x.jsonl", allowed)
    via_link = [location(str(tmp_path / "allowed" / "link"))]  # a prefix through a link names its target too
    assert outside_problem(f"{tmp_path}/outside/x.jsonl", via_link) is None


def source(sid: str, *urls: str) -> Source:
    return Source(source_id=sid, urls=urls, format="jsonl", license_spdx="MIT")


def test_the_check_names_the_ledger_line_and_url_index(tmp_path):
    ledger = tmp_path / "LEDGER.jsonl"
    sources = [source("a", f"{tmp_path}/data/a.jsonl"), source("b", f"{tmp_path}/data/b.jsonl", "/etc/passwd")]
    ledger.write_text("".join(json.dumps(s.to_json()) + "\n" for s in sources))
    with pytest.raises(LedgerError) as err:
        check_allowed_locations([f"{tmp_path}/data"], sources, ledger)
    assert err.value.violations == ["line 2: $.urls[1]: /etc/passwd is outside ingest.allowed_prefixes "
                                    "(it names /etc/passwd)"]
    check_allowed_locations([], sources, ledger)  # empty: any location


def test_the_fetch_refuses_a_url_outside_before_listing_it(tmp_path):
    from corpus_dagster.core.layout import Layout
    from corpus_dagster.ingest.driver import fetch_source

    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"text": "not for the corpus"}) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"dataset": "d", "version": "v1", "paths": {"artifacts": str(tmp_path / "art")},
                                  "ingest": {"allowed_prefixes": [str(tmp_path / "sources")]}}))
    settings = load_settings(config)
    layout = Layout.from_config(settings.resolved)
    with pytest.raises(LedgerError, match=r"\$\.urls\[0\]: .*secret.jsonl is outside ingest.allowed_prefixes"):
        fetch_source(source("s", str(secret)), layout, settings.ingest)
    assert not (tmp_path / "art" / "corpus" / "raw").exists()


def test_allowed_prefixes_is_an_execution_setting(tmp_path):
    from corpus_dagster.core.config import EXECUTION_KEYS, config_sha256, load_config

    assert "ingest.allowed_prefixes" in EXECUTION_KEYS
    base = {"dataset": "d", "version": "v1", "paths": {"artifacts": str(tmp_path / "art")}}
    plain, limited = tmp_path / "a.yaml", tmp_path / "b.yaml"
    plain.write_text(json.dumps(base))
    limited.write_text(json.dumps({**base, "ingest": {"allowed_prefixes": ["s3://b/x"]}}))
    assert config_sha256(load_config(plain)) == config_sha256(load_config(limited))
