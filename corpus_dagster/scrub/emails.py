"""E-mail detector: addresses anchored on `@` with a real TLD, plus bracketed and cued `at`/`dot` obfuscations.

Accepted shape (documented in docs/pii.md): a local part of letters, digits and `_ % + -` in dot-separated
atoms (Unicode letters allowed, at most 64 characters, no quoted local parts and no RFC 5322 oddities such
as `!#$&'*/=?^{|}~`, which in text are mostly code), `@`, then two or more host labels whose last label is
a TLD that exists (tlds.py). Addresses under documentation domains (example.com/.net/.org and their
subdomains) are kept when configured, because docs use them and they identify nobody.

Speed: candidates grow from each `@` found by the vectorized region pass (two short anchored matches),
never by sliding a regex over the whole text; obfuscations are searched only near an at/dot token.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from corpus_dagster.core.settings import PiiEmailsSettings
from corpus_dagster.scrub.prescreen import Anchored, windows
from corpus_dagster.scrub.spans import Bytes, Regions
from corpus_dagster.scrub.tlds import TLDS

# Local part read backwards from the `@` over a reversed window: atoms of word chars and `% + -`
# separated by single dots (reversal keeps that shape).
_LOCAL_REV = re.compile(r"[\w%+\-]+(?:\.[\w%+\-]+)*")
# Characters that, when they sit right before the local part, mean we cut a longer token (paths, `a..b`).
_LOCAL_GLUE = frozenset("./\\@")
# Host labels after the `@`: letters/digits with inner hyphens (underscores tolerated), dot separated.
_DOMAIN = re.compile(r"(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+[^\W_](?:[\w\-]{0,61}[^\W_])?")

# Obfuscations. `name [at] host [dot] tld`, `name(at)host.tld`, `name at host [dot] tld` (a bracketed `at`
# or `dot`, any bracket pair) are always accepted; the plain `name at host dot tld` form needs the word `dot` and either a cue before it (see _CUE)
# or a local part that is not a plain word, because prose says "worked at Pets dot com". `name at host.tld`
# with no bracket and no `dot` word is never taken: "look at google.com" is prose.
_OB_AT = r"(?P<at>\s*[\[\(\{][ \t]*(?:at|AT)[ \t]*[\]\)\}]\s*|\s+(?:at|AT)\s+)"
_OB_DOT = r"(?:\s*[\[\(\{][ \t]*(?:dot|DOT)[ \t]*[\]\)\}]\s*|\s+(?:dot|DOT)\s+)"
_OB_LABEL = r"[^\W_](?:[\w\-]{0,61}[^\W_])?"
_OBFUSCATED = re.compile(
    rf"(?<![\w.@+\-])(?P<local>[\w%+\-]+(?:\.[\w%+\-]+)*){_OB_AT}"
    rf"(?P<dom>{_OB_LABEL}(?:(?:{_OB_DOT}|\.){_OB_LABEL})+)(?![\w\-])"
)
_BRACKETED = re.compile(r"[\[\(\{][ \t]*(?:at|AT|dot|DOT)[ \t]*[\]\)\}]")
_OB_SPLIT = re.compile(rf"{_OB_DOT}|\.")
_DOT_WORD = re.compile(_OB_DOT)
_CUE = re.compile(r"(?i)(?:e-?mail|mail|contact|write|reach|address|send)\b[^\n]{0,24}$|[:<]\s*$")
_STOP_HOSTS = frozenset(
    "a an the this that these those my your our his her its their some any every all no one home work".split()
)

# Bracketed at/dot tokens as literals (`[at]`, `( dot )` ...): a literal set scans at GB/s where a class
# alternation crawls.
_OB_TOKENS = "|".join(
    re.escape(f"{o}{sp}{word}{sp}{c}") for o, c in ("[]", "()", "{}") for word in ("at", "AT", "dot", "DOT")
    for sp in ("", " ")
)
EMAIL_REGIONS = {
    "emails": "@",
    "emails_obf": _OB_TOKENS + r"|[ \t\n](?:dot|DOT)[ \t\n]",
}
"""Rust-regex regions (prescreen.py): every `@`, and every bracketed at/dot token or spaced `dot` word."""


def _byte_table(ascii_chars: str) -> np.ndarray:
    """Lookup by byte + 1 (so -1, outside the text, reads False): the given ASCII bytes and every non-ASCII
    byte (a character outside ASCII may be a Unicode letter; the detector decides)."""
    table = np.zeros(257, bool)
    table[[ord(c) + 1 for c in ascii_chars]] = True
    table[0x81:] = True
    return table


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_LOCAL_END = _byte_table(_ALNUM + "_%+-")  # what _LOCAL_REV needs right before the `@`
_HOST_START = _byte_table(_ALNUM)  # what _DOMAIN needs right after it


def _may_be_address(found: Bytes) -> np.ndarray:
    """The `@` regions find_emails reads past its first two tests: a local-part character right before
    (a word character or `%+-`) and a host character right after (a letter or digit), or a non-ASCII
    character there. `@@GLIBCXX` symbol versions, Texinfo `@command`s and `@ ` in code stop here, without
    a Python string."""
    return _LOCAL_END[found.at(-1) + 1] & _HOST_START[found.at(1) + 1]


EMAIL_REGION_FILTERS = {"emails": _may_be_address}
"""Byte tests of the regions find_emails looks at (api._Plan.filters)."""

EMAIL_ANCHORED = {"emails": Anchored("@", "@", (0, 1), lambda at: (np.ones(len(at), bool), 0, 1))}
"""Every `@` is a region: found from the byte positions of `@`, without a copy of the texts."""

EMAIL_SPARSE = frozenset({"emails_obf"})
"""Bracketed `at`/`dot` tokens and spaced `dot` words are rare in text (prescreen.locate's sparse)."""

_OB_MARGIN = 320  # an obfuscated address reaches at most this far from one of its at/dot tokens


@lru_cache(maxsize=16)
def _documentation(domains: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The documentation domains as a set, and as the suffixes their subdomains end with."""
    return frozenset(domains), tuple("." + d for d in domains)


def _domain_ok(domain: str, cfg: PiiEmailsSettings) -> bool:
    """Last label is a real TLD and, if configured, the host is not a documentation domain."""
    low = domain.lower()
    _, dot, tld = low.rpartition(".")
    if not dot or tld not in TLDS:
        return False
    if cfg.keep_documentation_domains:
        exact, suffixes = _documentation(tuple(cfg.documentation_domains))
        if low in exact or low.endswith(suffixes):
            return False
    return True


def find_emails(text: str, cfg: PiiEmailsSettings, regions: dict[str, Regions]) -> list[tuple[int, int]]:
    """Spans of e-mail addresses (plain and obfuscated) that the scrub replaces with `<EMAIL>`."""
    spans: list[tuple[int, int]] = []
    size = len(text)
    local_rev, domain_at = _LOCAL_REV.match, _DOMAIN.match
    for at, _ in regions["emails"]:
        window = text[at - 1 : at - 66 : -1] if at > 65 else text[at - 1 :: -1] if at else ""
        m = local_rev(window)
        if not m or m.end() > 64:
            continue
        start = at - m.end()
        if start > 0 and (text[start - 1] in _LOCAL_GLUE or text[start - 1].isalnum()):
            continue
        if text[start] == "." or text[at - 1] == ".":
            continue
        d = domain_at(text, at + 1)
        if not d:
            continue
        end = d.end()
        if end < size and (text[end] == "@" or text[end].isalnum()):
            continue
        if not _domain_ok(d.group(), cfg):
            continue
        spans.append((start, end))
    if cfg.obfuscated and regions["emails_obf"]:
        for lo, hi in windows(regions["emails_obf"], _OB_MARGIN, _OB_MARGIN, len(text)):
            spans.extend(_find_obfuscated(text, cfg, lo, hi))
        spans.sort()
    return spans


def _find_obfuscated(text: str, cfg: PiiEmailsSettings, lo: int, hi: int) -> list[tuple[int, int]]:
    """Spans in text[lo:hi] of bracketed `at`/`dot` forms and of cued plain `name at host dot tld` forms."""
    out: list[tuple[int, int]] = []
    pos = lo
    while (m := _OBFUSCATED.search(text, pos, hi)) is not None:
        pos = m.start() + 1  # a rejected match may hide one that starts inside it ("me at jane.doe AT ...")
        labels = [part for part in _OB_SPLIT.split(m.group("dom")) if part]
        if not _domain_ok(".".join(labels), cfg):
            continue
        if not _BRACKETED.search(m.group("at") + m.group("dom")):
            if not _DOT_WORD.search(m.group("dom")) or labels[0].lower() in _STOP_HOSTS:
                continue
            plain_word = m.group("local").isalpha()
            if plain_word and not _CUE.search(text, max(0, m.start() - 40), m.start()):
                continue
        out.append((m.start(), m.end()))
        pos = m.end()
    return out
