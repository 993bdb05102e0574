"""Key detector against identifiers of real code; cued national phone numbers in the phrasings prose uses."""

import sys
import time
from pathlib import Path

import phonenumbers
import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii, find_pii_batch
from corpus_dagster.scrub.api import scrub_text as _scrub_text
from corpus_dagster.scrub.evaluate import evaluate, load_labeled
from corpus_dagster.scrub.keys import code_name

DATA = Path(__file__).parents[1] / "data" / "pii"
sys.path.insert(0, str(DATA))
import code_identifiers  # noqa: E402


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def scrub_text(text: str, cfg: PiiSettings) -> str:
    return _scrub_text(text, cfg)[0]


def with_regions(*regions: str) -> PiiSettings:
    return pii_settings({"phones": {"regions": list(regions)}})


@pytest.mark.parametrize(
    "text",
    [
        "authinfo = urllib.request.HTTPBasicAuthHandler()",
        "password_mgr = HTTPPasswordMgrWithDefaultRealm()",
        "password_mgr = urllib.request.HTTPPasswordMgrWithDefaultRealm()",
        "token = JSONPathType",
        "SECRET_KEY = FunctionExecutionContext",
        "passphrase = shutil.which",
        "password: Comparison_composite_stmtContext",
        "api_key = _convertCFFToCFF2",
        "token=int32max",
        "passphrase = _strict_check",
        "password = _strncpy(buf)",
        "password = __cls_kwargs__",
    ],
)
def test_code_identifiers_after_cues_stay(text: str, cfg: PiiSettings) -> None:
    assert scrub_text(text, cfg) == text


def test_ten_thousand_real_identifiers_rarely_give_a_key(cfg: PiiSettings) -> None:
    """The frozen sample of 10,000 identifiers after cue words: at most 0.1% become `<KEY>` (0.05% over the
    whole 652,641-name pool it was drawn from; `python tests/data/pii/code_identifiers.py --rate`)."""
    t0 = time.perf_counter()
    lines = code_identifiers.code_lines(10000)
    assert len(lines) == 10000 and len(set(lines)) > 9900
    assert any("." in line.split(" ")[-1] for line in lines)  # dotted module paths are in the set
    hits = [(line, spans) for line, spans in zip(lines, find_pii_batch(lines, cfg), strict=True)
            if any(kind == "keys" for kind, _, _ in spans)]
    assert len(hits) <= 10, hits
    assert time.perf_counter() - t0 < 10


R_KEYS = [
    ("token = {}", "AKIAIOSFODNN7ABCDEFG"),
    ("token = {}", "ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4b"),
    ("api_key: {}", "4f9a8c1d2e3b4a5f6c7d8e9f0a1b2c3d"),
    ("secret={}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz2kLmN8qRs"),
    ("password = {}", "Xk9mQ2vL"),
    ("pwd={}", "Tr0ub4dor"),
    ("auth_token = {}", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"),
]


@pytest.mark.parametrize(("template", "secret"), R_KEYS)
def test_real_keys_after_cues_stay_found(template: str, secret: str, cfg: PiiSettings) -> None:
    text = template.format(secret)
    found = [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "keys"]
    assert found == [secret]


def test_code_name_rules() -> None:
    assert code_name("urllib.request.HTTPBasicAuthHandler")
    assert code_name("HTTPPasswordMgrWithDefaultRealm", "(")
    assert code_name("Xk9mQ2vLp8RtZ4wN", "(")  # called: code whatever its letters
    assert code_name("REPO_TYPES_MAPPING") and code_name("b64encode") and code_name("_Int32Codes")
    for key in ("Xk9mQ2vLp8RtZ4wN", "s0Bziu", "zyiBfdTXOwvPeGID", "G8oszvSsAHXWoy", "SFWIIv9", "wJalr/K7MD"):
        assert not code_name(key), key


def test_labeled_keys_keep_their_recall(cfg: PiiSettings) -> None:
    docs = [d for d in load_labeled(DATA / "labeled.jsonl") if d.family.startswith("key.")]
    score = evaluate(docs, cfg)["keys"]
    assert (score.recall, score.precision) == (1.0, 1.0), score.errors[:5]


@pytest.mark.parametrize(
    ("text", "region", "number"),
    [
        ("call 010-2030-8547 for support", "KR", "010-2030-8547"),
        ("our office number is (02) 1252 5307", "AU", "(02) 1252 5307"),
        ("Customer service line: 0412 345 678", "AU", "0412 345 678"),
        ("Direct line 020 7946 0958", "GB", "020 7946 0958"),
    ],
)
def test_cued_national_numbers_become_phones(text: str, region: str, number: str, cfg: PiiSettings) -> None:
    assert phonenumbers.is_valid_number_for_region(phonenumbers.parse(number, region), region)
    assert scrub_text(text, with_regions(region)) == text.replace(number, "<PHONE>")


@pytest.mark.parametrize(
    ("text", "region"),
    [
        ("see 010-2030-8547 for support", "KR"),
        ("the value (02) 1252 5307 was noted", "AU"),
        ("order number 0412 345 678", "AU"),
        ("direct line of sight 1200 - 1500 m", "GB"),
        ("the number of units 0412 345 678", "AU"),
        ("office no. 4711-2024-03", "DE"),
    ],
)
def test_national_numbers_without_a_cue_stay(text: str, region: str, cfg: PiiSettings) -> None:
    assert scrub_text(text, with_regions(region)) == text


def test_labeled_cue_phrasings_recall(cfg: PiiSettings) -> None:
    docs = load_labeled(DATA / "labeled.jsonl")
    phrases = evaluate([d for d in docs if d.family == "phone.national_cue_phrases"], cfg)["phones"]
    negatives = evaluate([d for d in docs if d.family.startswith("neg.")], cfg)["phones"]
    assert phrases.recall >= 0.9, phrases.errors[:5]
    assert negatives.fp == 0, negatives.errors[:5]
