"""E-mail detector: accepted shapes, obfuscations, and the hard negatives that must stay."""


import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii, scrub_text


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def emails(text: str, cfg: PiiSettings) -> list[str]:
    return [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "emails"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mail john.doe@acme.io now", ["john.doe@acme.io"]),
        ("tag: jane.doe+news@mail.eng.globex.co.uk.", ["jane.doe+news@mail.eng.globex.co.uk"]),
        ("Reported-by: Kate <k_brown-9@initech.de>", ["k_brown-9@initech.de"]),
        ('<a href="mailto:olga@icloud.com">', ["olga@icloud.com"]),
        ("unicode jürgen.müller@beispiel.de ok", ["jürgen.müller@beispiel.de"]),
        ("Reply to John.Doe@ACME.COM today", ["John.Doe@ACME.COM"]),
        ("qq 12345678@qq.com", ["12345678@qq.com"]),
        ("email=ana@hooli.com&x=1", ["ana@hooli.com"]),
        ("'priya@cs.stanford.edu'", ["priya@cs.stanford.edu"]),
        ("two: a.b@acme.io, c.d@globex.org", ["a.b@acme.io", "c.d@globex.org"]),
    ],
)
def test_plain_addresses(text: str, expected: list[str], cfg: PiiSettings) -> None:
    assert emails(text, cfg) == expected


@pytest.mark.parametrize(
    "form",
    [
        "john [at] acme [dot] io",
        "john(at)acme.io",
        "john (at) acme (dot) io",
        "jane.doe AT acme DOT org",
        "jane{at}acme{dot}io",
        "jane at acme [dot] io",
    ],
)
def test_bracketed_obfuscations(form: str, cfg: PiiSettings) -> None:
    assert emails(f"Write to {form} please", cfg) == [form]


def test_plain_obfuscation_needs_a_cue_or_a_non_word_local_part(cfg: PiiSettings) -> None:
    assert emails("email: jane at acme dot io", cfg) == ["jane at acme dot io"]
    assert emails("ping j.doe at acme dot io", cfg) == ["j.doe at acme dot io"]
    assert emails("Copyright: Thomas <thomas at apestaart dot org>", cfg) == ["thomas at apestaart dot org"]
    assert emails("She worked at Pets dot com in 1999", cfg) == []


def test_obfuscations_can_be_turned_off(cfg: PiiSettings) -> None:
    off = pii_settings({"emails": {"obfuscated": False}})
    assert emails("john [at] acme [dot] io", off) == []
    assert emails("john@acme.io", off) == ["john@acme.io"]


@pytest.mark.parametrize(
    "text",
    [
        "user@example.com",
        "write to postmaster@example.org",
        "bob@mail.example.net",
        "admin@localhost",
        "user@host.test",
        "you@domain.invalid",
        "dev@server.local",
    ],
)
def test_documentation_and_reserved_domains_stay(text: str, cfg: PiiSettings) -> None:
    assert emails(text, cfg) == []


def test_documentation_domains_are_redacted_when_configured(cfg: PiiSettings) -> None:
    off = pii_settings({"emails": {"keep_documentation_domains": False}})
    assert emails("user@example.com", off) == ["user@example.com"]
    custom = pii_settings({"emails": {"documentation_domains": ["acme.io"]}})
    assert emails("a@acme.io b@example.com", custom) == ["b@example.com"]


@pytest.mark.parametrize(
    "text",
    [
        "@property\ndef name(self):",
        "npm install react@18.2.0",
        "logo@2x.png and icon@3x.jpg",
        "@types/node@20.1.0",
        "foo@bar",
        "matrix A@B in numpy",
        "look at google.com for details",
        "the dot com bubble",
        "stared at the dot com crash",
        "a..b@acme.io",
        "path/to/user@acme.io",
    ],
)
def test_code_and_prose_that_look_like_addresses_stay(text: str, cfg: PiiSettings) -> None:
    assert emails(text, cfg) == []


def test_disabled_detector_finds_nothing(cfg: PiiSettings) -> None:
    off = pii_settings({"emails": {"enabled": False}})
    assert emails("john@acme.io", off) == []


def test_scrub_inserts_the_email_placeholder(cfg: PiiSettings) -> None:
    text, counts = scrub_text("Mail john@acme.io or jane [at] acme [dot] io.", cfg)
    assert text == "Mail <EMAIL> or <EMAIL>."
    assert counts["emails"] == 2
