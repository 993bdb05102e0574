"""Secret detector: provider tokens, key blocks, JWTs, keyword assignments, and what must stay."""

import base64
import json
import random
import string
from dataclasses import replace

import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii, scrub_text
from corpus_dagster.scrub.keys import secret_value_ok, shannon_entropy

R = random.Random(7)
ALNUM = string.ascii_letters + string.digits
B32 = string.ascii_uppercase + "234567"


def rand(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


JWT = f"{b64url({'alg': 'HS256', 'typ': 'JWT'})}.{b64url({'sub': '1234567890', 'iat': 1516239022})}.{rand(ALNUM, 43)}"
PEM_BODY = "\n".join(rand(ALNUM + "+/", 64) for _ in range(4))


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def keys(text: str, cfg: PiiSettings) -> list[str]:
    return [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "keys"]


TOKENS = [
    "AKIA" + rand(B32, 16),
    "ASIA" + rand(B32, 16),
    "ghp_" + rand(ALNUM, 36),
    "github_pat_" + rand(ALNUM + "_", 82),
    "glpat-" + rand(ALNUM + "-_", 20),
    f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}",
    "hooks.slack.com/services/T" + rand(B32, 8) + "/B" + rand(B32, 10) + "/" + rand(ALNUM, 24),
    "sk_live_" + rand(ALNUM, 24),
    "rk_test_" + rand(ALNUM, 24),
    "AIza" + rand(ALNUM + "-_", 35),
    "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20),
    "sk-proj-" + rand(ALNUM + "-_", 74) + "T3BlbkFJ" + rand(ALNUM + "-_", 74),
    JWT,
]


@pytest.mark.parametrize("token", TOKENS, ids=[t[:6] for t in TOKENS])
def test_provider_tokens_are_found(token: str, cfg: PiiSettings) -> None:
    assert keys(f"config: {token} # set", cfg) == [token]


@pytest.mark.parametrize("kind", ["RSA ", "OPENSSH ", "EC ", "", "ENCRYPTED ", "PGP "])
def test_private_key_blocks_are_found_whole(kind: str, cfg: PiiSettings) -> None:
    block_kind = "PRIVATE KEY BLOCK" if kind == "PGP " else "PRIVATE KEY"
    block = f"-----BEGIN {kind}{block_kind}-----\n{PEM_BODY}\n-----END {kind}{block_kind}-----"
    assert keys(f"key:\n{block}\nafter", cfg) == [block]


def test_key_block_without_end_line_ends_at_its_body(cfg: PiiSettings) -> None:
    text = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n\nThe end of this paste."
    assert keys(text, cfg) == [f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n"]


def test_escaped_key_block_in_json(cfg: PiiSettings) -> None:
    block = "-----BEGIN PRIVATE KEY-----\\n" + PEM_BODY.replace("\n", "\\n") + "\\n-----END PRIVATE KEY-----"
    assert keys(f'{{"private_key": "{block}\\n"}}', cfg) == [block]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("password=S3cr3tP@ss!", "S3cr3tP@ss!"),
        ('DB_PASSWORD="c8Fj2LmQ9xTz4WbV"', "c8Fj2LmQ9xTz4WbV"),
        ("  api_key: a8f5f167f44f4964e6c998dee827110c", "a8f5f167f44f4964e6c998dee827110c"),
        ('"client_secret": "Zq4-rT9_xW2pLk7vB3nM8sD1fG6hJ0aC",', "Zq4-rT9_xW2pLk7vB3nM8sD1fG6hJ0aC"),
        ("mysql -u root --password=RAFsfKlDuSQUmh mydb", "RAFsfKlDuSQUmh"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzKEYab", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzKEYab"),
        ("AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6;End", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6"),
        ("Authorization: Basic YWxpY2U6czNjcjN0LXBhc3M=", "YWxpY2U6czNjcjN0LXBhc3M="),
        ("apiKey: 'Xk9pQ2vL7zR4mN8w'", "Xk9pQ2vL7zR4mN8w"),
    ],
)
def test_assigned_secrets_are_found_value_only(text: str, secret: str, cfg: PiiSettings) -> None:
    assert keys(text, cfg) == [secret]


def test_bearer_jwt_is_one_key(cfg: PiiSettings) -> None:
    out, counts = scrub_text(f"Authorization: Bearer {JWT}", cfg)
    assert out == "Authorization: Bearer <KEY>" and counts["keys"] == 1


@pytest.mark.parametrize(
    "text",
    [
        "password: ********",
        "password = 'hunter2'",
        "api_key = os.environ['API_KEY']",
        "tokens = tokenizer.encode(text)",
        "API_KEY=your-api-key-here",
        "SECRET_KEY = '<your secret key>'",
        "password=${DB_PASSWORD}",
        "password: {{ vault_password }}",
        "auth_token = get_token()",
        "token: null",
        "max_tokens: 4096",
        "token_type: bearer",
        "password_reset_url: https://acme.io/reset/a1B2c3D4e5",
        "token_hash: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "--mysql-password=MYSQL_PASSWORD\\ --x",
        "--secret=projects/my-project/secrets/my-secret/versions/2",
        "--pvk-password=my-pvk-password",
        "--root-password=password123",
        "hostname:port:username:password:base_dn:flags",
        "Token=static:::1a:2b:3c:4d",
        "the author: Jonathan Swift",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9\n-----END PUBLIC KEY-----",
        "pk_live_51HqLyjWDarjtT1zdp7dc",
        "pip install scikit-learn sk-some-long-package-name-here-too",
        "eyJhbGciOi.not.a.jwt and eyJub3Rqc29u.eyJzdWIiOiAxfQ.c2lnbmF0dXJl",
    ],
)
def test_placeholders_names_hashes_and_public_material_stay(text: str, cfg: PiiSettings) -> None:
    assert keys(text, cfg) == []


def test_documented_examples_are_kept_unless_configured(cfg: PiiSettings) -> None:
    text = "AKIAIOSFODNN7EXAMPLE and aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert keys(text, cfg) == []
    strict = pii_settings({"keys": {"keep_documented_examples": False}})
    assert keys("AKIAIOSFODNN7EXAMPLE", strict) == ["AKIAIOSFODNN7EXAMPLE"]


def test_entropy_and_length_thresholds(cfg: PiiSettings) -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    k = cfg.keys
    assert secret_value_ok("S3cr3tP@ss!", k)
    assert not secret_value_ok("Aa1Aa1Aa1Aa1", k)  # low entropy
    assert not secret_value_ok("abcdefghijkl", k)  # one character class
    longer = replace(k, min_secret_length=16)
    assert not secret_value_ok("S3cr3tP@ss!", longer)
    short_key = pii_settings({"keys": {"private_key_min_body": 10**6}})
    assert keys(f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", short_key) == []


def test_disabled_detector_finds_nothing(cfg: PiiSettings) -> None:
    off = pii_settings({"keys": {"enabled": False}})
    assert keys(TOKENS[0], off) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('gpg --batch --passphrase "Xk9#mP2q" -d backup.gpg', "Xk9#mP2q"),
        ("The passphrase is 'correct horse battery staple' - keep it.", "correct horse battery staple"),
        ('mysql -u admin --password "Tr0ub4&" -h db01', "Tr0ub4&"),
        ('Set the Wi-Fi password "IwmVsm1" on the guest network.', "IwmVsm1"),
        ("the admin password is 'K5^JsC' until we rotate it", "K5^JsC"),
        ("secret key: 4f9a8c", "4f9a8c"),
        ('Secret key \u201cAb3dE9xQ\u201d was pasted in the ticket.', "Ab3dE9xQ"),
        ("password=Xk9#m2", "Xk9#m2"),  # short: no entropy floor after a strong cue
        ("pwd=aB3xY9", "aB3xY9"),
    ],
)
def test_cued_secrets_short_or_mixed(text: str, secret: str) -> None:
    cfg = pii_settings()
    found = [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "keys"]
    assert found == [secret]
    longer = pii_settings({"keys": {"cued_min_length": len(secret) + 1}})
    assert [k for k, _, _ in find_pii(text, longer) if k == "keys"] == []


@pytest.mark.parametrize(
    "text",
    [
        'Enter your password "twice" to confirm.',  # one class
        "password 'hunter2' is the classic joke",  # a word with digits
        'passphrase "your passphrase here"',  # placeholder
        "password=MyPassword",  # names the secret
        'password: "${DB_PASS}"',
        "secret key: SECRET_KEY",
        'Set password "" to disable authentication.',
        "password: 'xxxxxx'",
        "--pvk-password=my-pvk-password",
    ],
)
def test_cued_non_secrets_stay(text: str) -> None:
    assert [k for k, _, _ in find_pii(text, pii_settings()) if k == "keys"] == []


@pytest.mark.parametrize(
    "text",
    [
        "Author:     Marc-André Lureau <marcandre@example.org>",  # git log header: a person, not a key
        "Author: Tomáš Krenželok\nAuthorDate: Tue Oct 16 09:53:18 2018 -0700",
        "    Co-authored-by: José Müller-Ébert <jose@example.org>",
        "AUTHORS: Xk9#mP2q-Lw8Rt3Yv6 added",
        "PASS: gdb.base/align-c++.exp: get integer valueof \"a_char_x_char\"",  # DejaGnu test results
        "XPASS: gdb.base/align-c++.exp: print alignof(struct align_pair_char_x_char)",
        "FAIL: one.exp\n\tPASS: gdb.ada/assign_1.exp: changing the value\n",
    ],
)
def test_author_headers_and_test_results_are_not_key_cues(text: str, cfg: PiiSettings) -> None:
    assert keys(text, cfg) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("authorization_token=aK9x7Qm2Zp4Lw8Rt3Yv6", "aK9x7Qm2Zp4Lw8Rt3Yv6"),  # authoriz... is still a keyword
        ("authorize_key: aK9x7Qm2Zp4Lw8Rt3Yv6", "aK9x7Qm2Zp4Lw8Rt3Yv6"),
        ("authToken=aK9x7Qm2Zp4Lw8Rt3Yv6", "aK9x7Qm2Zp4Lw8Rt3Yv6"),
        ("login PASS: Xk9#mP2q", "Xk9#mP2q"),  # PASS inside a line is a cue
        ("PASS:Xk9#mP2q", "Xk9#mP2q"),  # no space after the colon: not a test result line
    ],
)
def test_keywords_next_to_those_still_cue(text: str, secret: str, cfg: PiiSettings) -> None:
    assert keys(text, cfg) == [secret]
