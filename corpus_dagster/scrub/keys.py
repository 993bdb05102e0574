"""Secret detector: private key blocks, provider tokens with fixed prefixes, JWTs, and keyword assignments.

Own regexes, learned from the gitleaks default rule set (prefixes, lengths, `EXAMPLE` allowlist, generic
keyword rule with an entropy floor and stopwords) and from detect-secrets (JWT header decoding, keyword
detector's placeholder filters). detect-secrets is not a dependency: it scans line by line through
dozens of plugins (slow for corpus text) and its high-entropy plugins fire on hex hashes and git SHAs,
which are hard negatives here (docs/pii.md has the measurement).

Rules (each span becomes `<KEY>`):
- private key blocks: `-----BEGIN ... PRIVATE KEY[ BLOCK]-----` through the matching END line (or, when
  the END line is missing, through the base64 body), when the body holds `private_key_min_body`+ chars;
- AWS access key ids (AKIA/ASIA/ABIA/ACCA/A3T?), GitHub (ghp_/gho_/ghu_/ghs_/ghr_/github_pat_), GitLab
  (glpat- and the other gl*- token kinds), Slack (xox?- tokens, xapp-, hooks.slack.com webhooks), Stripe
  secret/restricted keys (sk_/rk_ live/test/prod), Google API keys (AIza...), OpenAI-style keys
  (sk-..., sk-proj-..., sk-ant-...), JWTs whose header decodes to JSON with `alg` or `typ`;
- `password=`, `api_key:`, `secret`, `token`, `Bearer` ... assignments whose value is long enough, has at
  least two character classes and Shannon entropy >= `min_entropy`, and is not a placeholder, variable
  reference or dotted identifier. Only the value is replaced (`password=<KEY>`).
- after the strong cues `password` / `passwd` / `pwd` / `pass`, `passphrase` and `secret key`: assigned
  values (`password=Xk9#m2`, `secret key: 4f9a8c1d`) and quoted values (`password "Tr0ub4dor&3"`,
  `the passphrase is 'correct horse battery staple'`) of at least `cued_min_length` characters, with no
  entropy floor (the cue is the evidence; short secrets have little entropy): at least two character
  classes, not a placeholder, not made only of words (`hunter2`, `MYSQL_PASSWORD`); a passphrase may be
  words, with spaces inside the quotes.
- an unquoted value that is an identifier of code (code_name: a dotted name, a name called or indexed,
  a camelCase / snake_case name of pronounceable words) is never a key, after any cue:
  `authinfo = urllib.request.HTTPBasicAuthHandler()`, `password_mgr = HTTPPasswordMgrWithDefaultRealm()`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter

import numpy as np

from corpus_dagster.core.settings import PiiKeysSettings
from corpus_dagster.scrub.spans import Bytes, Regions

_PRIVATE_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,64}PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_END = re.compile(r"-----END[ A-Z0-9_-]{0,64}PRIVATE KEY(?: BLOCK)?-----")
# Body when the END line is missing: base64 lines, `Proc-Type:` style headers, and blank lines only where a
# long base64 line follows (the blank line after PEM headers); prose ends it.
_PRIVATE_BODY = re.compile(
    r"(?:[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*)[ \t]*\r?\n|[ \t]*\r?\n(?=[ \t]*[A-Za-z0-9+/=]{40}))*"
    r"[ \t]*[A-Za-z0-9+/=]*"
)
_B64_CHARS = re.compile(r"[A-Za-z0-9+/=]")
_MAX_BLOCK = 65536

_TOKEN_PREFIX = (
    r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|gh[pousr]_|github_pat_|gl(?:pat|dt|rt|ptt|ft|imt|soat|cbt|agent|oas|ffct)-"
    r"|xox[abposre]-|xapp-|hooks\.slack\.com/|[sr]k_(?:test|live|prod)_|AIza|sk-|eyJ"
)
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])"
    r"|gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])"
    r"|github_pat_[A-Za-z0-9_]{82}(?![A-Za-z0-9_])"
    r"|gl(?:pat|dt|rt|ptt|ft|imt|soat|cbt|agent|oas|ffct)-[A-Za-z0-9_\-]{20,300}(?:\.[0-9a-z]{9})?"
    r"(?![A-Za-z0-9_\-])"
    r"|xox[abposre]-[A-Za-z0-9\-]{10,250}(?![A-Za-z0-9\-])"
    r"|xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+(?![A-Za-z0-9])"
    r"|(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}(?![A-Za-z0-9])"
    r"|AIza[A-Za-z0-9_\-]{35}(?![A-Za-z0-9_\-])"
    r"|sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)[0-9]{2}-)?[A-Za-z0-9_\-]{32,250}(?![A-Za-z0-9_\-])"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?![A-Za-z0-9_\-])"
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,120}"
    r")"
)
# Keyword of an assignment; the Rust region pattern lists its common spellings (_KEYWORD_SPELLINGS) and
# _ASSIGN is tried exactly where such a region starts.
_KEYWORD = (
    r"(?:passw(?:or)?d|passwd|pwd|pass|secret|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|"
    r"account[_\-]?key|token|credentials?|auth)"
)
_ASSIGN = re.compile(
    rf"(?i)(?P<name>{_KEYWORD}(?:[ \t]key)?[A-Za-z0-9_\-]{{0,24}}?)"
    r"(?P<suffix>(?:[_\-](?:url|uri|endpoint|path|file|dir|type|len|length|size|count|name|field|header|"
    r"prefix|regex|pattern|policy|expiry|expires|expiration|ttl|timeout|format|id|limit|hash|algorithm))?)"
    r"[\"'\]]?[ \t]*(?:=|:|=>|:=)[ \t]*(?P<q>[\"'`]?)(?P<val>[^\s\"'`,;<>(){}\[\]]{1,256})"
)
_PASSPHRASE = re.compile(r"(?i)pass[ \t_\-]?phrase")
# A quoted value after a strong cue word: `password "x"`, `the passphrase is 'x y z'`, `secret key: "x"`.
_CUED_QUOTED = re.compile(
    r"(?i)(?P<name>pass[ \t_\-]?phrase|passw(?:or)?d|pwd|secret[ \t_\-]?key)s?"
    r"(?:[ \t]+(?:is|was|set[ \t]+to|to|of))?[ \t]*[:=]?[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<val>[^\"'`\n]{1,128})(?P=q)|\u201c(?P<cval>[^\u201d\n]{1,128})\u201d)"
)
_BEARER = re.compile(
    r"(?i)(?:(?<![A-Za-z0-9_])bearer|authorization:[ \t]*(?:bearer|basic|token))[ \t]+"
    r"(?P<val>[A-Za-z0-9\-._~+/]{16,512}=*)"
)
_PLACEHOLDER = re.compile(
    r"(?i)example|sample|dummy|placeholder|changeme|change_me|your|redacted|xxxx|\*\*\*|\.\.\.|"
    r"^\$|\$\{|\{\{|%\(|%s|^<|^\[|env|getenv|config|settings|secret_key_base|^(?:none|null|nil|true|false|"
    r"undefined|required|optional|string|str|int|bytes)$"
)
# A value made only of word-like pieces is a name, path or placeholder (`MYSQL_PASSWORD`, `my-pvk-password`,
# `projects/p/secrets/s/versions/2`, `base_dn:flags`, `settings.DB_PASSWORD`, `password123`), not a secret:
# pieces between separators are all lowercase, all UPPERCASE or camelCase words with optional trailing
# digits, plain numbers, or fragments of one or two characters. Random secrets mix case and digits inside
# one long piece.
_SEPARATORS = re.compile(r"[/:.=_\-\\]+")
# camelCase pieces as `[A-Z]?[a-z]+(?:[A-Z][a-z]+)*`, never `(?:[A-Z]?[a-z]+)+`: the nested quantifier backtracks
# exponentially on long runs of letters that end in a non-match (minutes on one 0.8 MB log). Same language.
_WORD_PIECE = re.compile(r"[a-z]+[0-9]*|[A-Z]+[0-9]*|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*[0-9]*|[0-9]+")
_CALL = re.compile(r"^[A-Za-z_][\w.]*\(")
# Code, not a key: a dotted name (`urllib.request.HTTPBasicAuthHandler`), a name called or indexed
# (`HTTPPasswordMgrWithDefaultRealm()`), or a name made of camelCase / snake_case words (`JSONPathType`,
# `REPO_TYPES_MAPPING`). Random secrets cut into many one- and two-letter fragments, several digit runs and
# unpronounceable letter runs; identifiers of real code do not (tests/data/pii/code_identifiers.py).
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CONSONANT_RUN = re.compile(r"[^aeiouy]{5,}")
_CODE_TAIL = ("(", "[")
# A short name with digits: `int32max`, `b64encode`, `_Int32Codes`, `sha256`, `HttpVersion2`.
_SHORT_DIGIT_NAME = re.compile(
    r"_*(?:[a-z]+[0-9]{1,4}[a-z]{2,}|(?:[A-Z][a-z]{2,}|[a-z]{3,})(?:[A-Z][a-z]{2,})*[0-9]{1,4}(?:[A-Z][a-z]{2,})*)_*"
)
_SPOKEN_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]{3,6}")



def _spellings(words: str) -> list[str]:
    """lower, UPPER and Capitalized spellings of each word; compounds `a_b` also as a_b, A_B, aB, AB, ab.

    The Rust region pattern lists them as literals: a set of a few dozen literals scans at ~1.7 GB/s, where
    `(?i)` or a hundred literals crawl at 0.4-0.8 GB/s. _ASSIGN itself is case-insensitive, so a spelling
    missing here only loses that region, never adds a false positive.
    """
    out: set[str] = set()
    for word in words.split():
        parts = word.split("_")
        out.update({word, word.upper(), word.capitalize()})
        if len(parts) > 1:
            out.update({"".join(parts), parts[0] + "".join(p.capitalize() for p in parts[1:]),
                        "".join(p.capitalize() for p in parts)})
    return sorted(out, key=lambda w: (-len(w), w))


_KEYWORD_SPELLINGS = sorted(
    set(_spellings("password passwd pwd pass secret token credential auth api_key access_key private_key account_key"))
    | {"APIKEY", "APIKey", "api-key"},
    key=lambda w: (-len(w), w),
)
_CUE_SPELLINGS = sorted(
    set(_spellings("passphrase password passwd pwd secret_key")) | {"pass phrase", "Pass phrase", "secret key",
                                                                    "Secret key", "Secret Key", "SECRET KEY"},
    key=lambda w: (-len(w), w),
)
KEY_REGIONS = {
    "keys_tok": r"-----BEGIN[ A-Z0-9_-]{0,64}PRIVATE KEY|" + _TOKEN_PREFIX,
    "keys_kw": r"(?:[Bb]earer|BEARER)[ \t]|(?:[Aa]uthorization|AUTHORIZATION):|(?:"
    + "|".join(_KEYWORD_SPELLINGS) + r")(?:[ \t][Kk][Ee][Yy])?[A-Za-z0-9_\-]{0,24}[\"'\]]?[ \t]*[=:]",
    "keys_cue": r"(?:" + "|".join(_CUE_SPELLINGS) + r")[sS]?(?:[ \t]+(?:is|was|set to|to|of))?[ \t]*[:=]?[ \t]*"
    r"[\"'`\u201c]",
}
"""Rust-regex regions: key block headers and provider prefixes; Bearer/Authorization headers and keywords
before `=` or `:`; strong cue words before a quote."""


def _in(values: np.ndarray, chars: str) -> np.ndarray:
    """Whether each byte value is one of the ASCII `chars`."""
    return np.isin(values, np.frombuffer(chars.encode("ascii"), np.uint8).astype(np.int16))


def _may_be_assignment(found: Bytes) -> np.ndarray:
    """The keyword regions find_keys reads past its first tests. Two kinds, a test log's and a changelog's
    commonest, are passed over without a Python string:

    - `PASS: ` at the start of a line (a DejaGnu / automake test result, _test_result);
    - a keyword `author` (any case) not followed by `is`/`iz` (`Author:`, `AuthorDate:`, `Co-authored-by:`):
      no token or Bearer rule matches there, _ASSIGN's name starts with it so _AUTHOR_NAME rejects it, and
      _CUED_QUOTED needs another word. Non-ASCII bytes after `author` are left to the regexes, whose
      case folding also matches `ı` and `ſ`.
    """
    before = found.at(-1)
    test_line = found.spell(b"PASS: ")
    test_line &= (before == -1) | (before == ord("\n"))
    sixth, seventh = found.at(6), found.at(7)
    ascii_after = (sixth < 0x80) & ((sixth == -1) | ~_in(sixth, "iI") | ((seventh < 0x80) & ~_in(seventh, "sSzZ")))
    author = found.spell(b"author", fold=True) & ascii_after
    return ~(test_line | author)


KEY_REGION_FILTERS = {"keys_kw": _may_be_assignment}
"""Byte tests of the regions find_keys looks at (api._Plan.filters)."""

KEY_SPARSE = frozenset({"keys_tok", "keys_cue"})
"""Key block headers, token prefixes and quoted cue words are rare in text (prescreen.locate's sparse)."""


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s own character distribution (0 for an empty string)."""
    n = len(value)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# An ASCII character's class as one letter: lowercase, uppercase, digit or other (not alphanumeric).
_ASCII_CLASS = str.maketrans({chr(c): "l" if chr(c).islower() else "u" if chr(c).isupper() else
                              "d" if chr(c).isdigit() else "o" for c in range(128)})


def _classes(value: str) -> int:
    """How many of lowercase, uppercase, digits and other characters occur in value."""
    if value.isascii():  # one C-level pass: each character to its class letter, then the distinct letters
        return len(set(value.translate(_ASCII_CLASS)))
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def secret_value_ok(value: str, cfg: PiiKeysSettings) -> bool:
    """Whether an assigned value looks like a real secret rather than a word, variable or placeholder."""
    value = value.rstrip("\\.:;,*")
    if len(value) < cfg.min_secret_length or _classes(value) < 2:
        return False
    if _CALL.match(value) or _PLACEHOLDER.search(value) or _names_only(value):
        return False
    return shannon_entropy(value) >= cfg.min_entropy


def code_name(value: str, after: str = "") -> bool:
    """Whether an unquoted value is an identifier of code (`after`: the text right after it), not a key.

    Dotted names and names followed by `(` or `[` are code. A plain name is code when its camelCase /
    snake_case words average 2.5+ letters, at most one is a single letter and two have one or two, a
    camelCase piece holds at most one distinct acronym (of at most six letters) and a word of three
    letters, each `_` piece holds at most one digit run (at most four digits, next to a word), a short
    name with digits is words around them, and its lowercase words are pronounceable (a vowel in a fifth
    of the letters, no run of five consonants). Random secrets fail these; docs/pii.md has the rates.
    """
    if not _DOTTED_NAME.fullmatch(value):
        return False
    if after.startswith(_CODE_TAIL) or "." in value:
        return True
    if len(value) < 12 and any(c.isdigit() for c in value) and not _SHORT_DIGIT_NAME.fullmatch(value):
        return False  # a short password mixes digits into letters (`s0Bziu`); a short name has words
    letters: list[str] = []
    for piece in value.split("_"):
        words = _CAMEL_WORD.findall(piece)
        digits = [i for i, w in enumerate(words) if w.isdigit()]
        if len(digits) > 1 or any(len(words[i]) > 4 for i in digits):
            return False
        if digits and not any(0 <= j < len(words) and _SPOKEN_WORD.fullmatch(words[j])
                              for j in (digits[0] - 1, digits[0] + 1)):
            return False  # `int32max`, `b64encode`, not `Tr0ub4dor`: a digit run next to a real word
        if len({w for w in words if w.isupper()}) > 1 and any(w.islower() or w.istitle() for w in words):
            return False  # camelCase holds at most one acronym (`HTTPBasicAuthHandler`)
        letters += [w for w in words if not w.isdigit()]
    if not letters or sum(len(w) <= 2 for w in letters) > 2 or sum(len(w) == 1 for w in letters) > 1:
        return False
    spoken = [w.lower() for w in letters if not w.isupper()]
    if spoken and (any(w.isupper() and len(w) > 6 for w in letters) or max(map(len, spoken)) < 3):
        return False  # camelCase has a real word, and its acronyms are short
    if sum(map(len, letters)) < 2.5 * len(letters):
        return False
    spoken = spoken or [w.lower() for w in letters]  # UPPER_SNAKE: every word is spoken
    vowels = sum(c in "aeiouy" for w in spoken for c in w)
    return not any(_CONSONANT_RUN.search(w) for w in spoken) and vowels >= 0.2 * sum(map(len, spoken))


def _names_only(value: str) -> bool:
    """True when every piece of value between separators is a word, a camelCase name or a number."""
    return all(len(piece) <= 2 or _WORD_PIECE.fullmatch(piece) for piece in _SEPARATORS.split(value))


def _jwt_ok(token: str) -> bool:
    """A JWT's first segment must be base64url JSON with `alg` or `typ` (as detect-secrets checks)."""
    head = token.split(".", 1)[0]
    try:
        data = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and ("alg" in data or "typ" in data)


def _token_ok(token: str, cfg: PiiKeysSettings) -> bool:
    """Per-family checks after the prefix regex: JWT header, documented examples, entropy of sk- keys."""
    if token.startswith("eyJ"):
        return _jwt_ok(token)
    if cfg.keep_documented_examples and "EXAMPLE" in token.upper():
        return False
    if token.startswith("sk-"):  # kebab-case names also start with sk-: need mixed case or digits
        body = token[3:]
        mixed = any(c.islower() for c in body) + any(c.isupper() for c in body) + any(c.isdigit() for c in body)
        return mixed >= 2 and shannon_entropy(token) >= cfg.min_entropy
    return True


def _private_block(text: str, start: int, cfg: PiiKeysSettings) -> tuple[int, int] | None:
    """Span of the private key block whose BEGIN line starts at `start`: through its END line, or through
    the body when END is missing; None when the body is too short to be a key (docs show `...`)."""
    m = _PRIVATE_BEGIN.match(text, start)
    if m is None:
        return None
    end_m = _PRIVATE_END.search(text, m.end(), m.end() + _MAX_BLOCK)
    end = end_m.end() if end_m else _PRIVATE_BODY.match(text, m.end()).end()
    body = text[m.end() : end_m.start() if end_m else end]
    if len(_B64_CHARS.findall(body)) < cfg.private_key_min_body:
        return None
    return start, end


_CUE_IN_VALUE = re.compile(r"(?i)pass(?:word|wd|phrase)|secret|passw")
# After a strong cue the cue is the evidence, so only plainly name-like values are left alone: one word with
# trailing digits (`hunter2`, `admin123`), UPPER_SNAKE names, lower kebab/snake/dotted names (`_strncpy`,
# `__cls_kwargs__`: leading and doubled underscores too), numbers.
_SIMPLE_NAME = re.compile(r"_*(?:[A-Za-z][a-z]*[0-9]*|[A-Z0-9_]+|[a-z0-9]+(?:[._:/\-]+[a-z0-9]+)+)_*|[0-9.\-]+")


def cued_value_ok(value: str, cfg: PiiKeysSettings, passphrase: bool) -> bool:
    """Whether a value right after a strong cue word is a secret: long enough, not a placeholder, and (unless
    it is a passphrase, which may be plain words) two character classes and not only words and numbers."""
    value = value.strip()
    if len(value) < cfg.cued_min_length or _PLACEHOLDER.search(value) or _CALL.match(value):
        return False
    if _CUE_IN_VALUE.search(value):
        return False  # `MyPassword`, `my secret key`: a name for the secret, not the secret
    if passphrase:
        return len(set(value)) > 2  # `xxxxxx`, `------` are masks
    return " " not in value and _classes(value) >= 2 and not _SIMPLE_NAME.fullmatch(value)


# Names that start with the keyword `auth` but name a person or a date: `Author:`, `AuthorDate:`,
# `Co-authored-by:`, `Authors:` (git logs, changelogs, man pages); `authorization` still is a keyword.
_AUTHOR_NAME = re.compile(r"(?i)author(?!i[sz])")


def _test_result(text: str, start: int) -> bool:
    """Whether `PASS` at `start` is a test result at the start of a line, indented or not (`PASS: test name`,
    `XPASS: ...`, as DejaGnu and automake print them): the value after it names a test, not a password."""
    if not text.startswith("PASS: ", start):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    return text[line_start:start].lstrip(" \t") in ("", "X")


def _assigned(text: str, start: int, cfg: PiiKeysSettings) -> tuple[int, int] | None:
    """Span of a secret value assigned to a keyword at `start` (`password=...`), if it looks like one."""
    m = _ASSIGN.match(text, start)
    if m is None or m.group("suffix") or _AUTHOR_NAME.match(m.group("name")):
        return None
    quote = m.group("q")
    if quote and not text.startswith(quote, m.end("val")):
        return _cued_quoted(text, start, cfg)  # an opening quote whose value runs into a space
    value = m.group("val")
    if not quote and code_name(value.rstrip("\\.:;,*"), text[m.end("val") : m.end("val") + 1]):
        return None  # `token = urllib.request.HTTPBasicAuthHandler()`: code, not a key
    if secret_value_ok(value, cfg):
        return m.span("val")
    name = m.group("name")
    value = value.rstrip("\\.:;,*")
    # A passphrase may be plain words only inside quotes (spaces); unquoted it is held to a password's rules.
    passphrase = bool(quote) and bool(_PASSPHRASE.fullmatch(name))
    if _STRONG_NAME.fullmatch(name) and cued_value_ok(value, cfg, passphrase):
        return m.start("val"), m.start("val") + len(value)
    return None


# Strong cue names: a value assigned to one of these needs no entropy floor.
_STRONG_NAME = re.compile(r"(?i)pass(?:word|wd|[ \t_\-]?phrase)?s?|pwd|secret[ \t_\-]?key")


def _cued_quoted(text: str, start: int, cfg: PiiKeysSettings) -> tuple[int, int] | None:
    """Span of a quoted value right after a strong cue word at `start`, if it looks like a secret."""
    m = _CUED_QUOTED.match(text, start)
    if m is None:
        return None
    group = "val" if m.group("val") is not None else "cval"
    value = m.group(group)
    if not cued_value_ok(value, cfg, bool(_PASSPHRASE.fullmatch(m.group("name")))):
        return None
    lead = len(value) - len(value.lstrip())
    return m.start(group) + lead, m.start(group) + len(value.rstrip())


def find_keys(text: str, cfg: PiiKeysSettings, regions: dict[str, Regions]) -> list[tuple[int, int]]:
    """Spans of secrets that the scrub replaces with `<KEY>`; each rule is tried where its region starts."""
    spans: list[tuple[int, int]] = []
    covered = 0
    for start, _ in sorted(regions["keys_tok"] + regions["keys_kw"] + regions["keys_cue"]):
        if start < covered:
            continue  # inside a key block already taken
        if text.startswith("-----BEGIN", start):
            block = _private_block(text, start, cfg)
            if block:
                spans.append(block)
                covered = block[1]
            continue
        m = _TOKEN.match(text, start)
        if m is not None:
            if _token_ok(m.group(), cfg):
                spans.append(m.span())
            continue
        m = _BEARER.match(text, start)
        if m is not None:
            if secret_value_ok(m.group("val"), cfg):
                spans.append(m.span("val"))
            continue
        if _test_result(text, start):
            continue
        span = _assigned(text, start, cfg) or _cued_quoted(text, start, cfg)
        if span and span[0] >= covered:
            spans.append(span)
            covered = span[1]
    spans.sort()
    return spans
