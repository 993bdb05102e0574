"""Payment-card detector: 13-19 digits, optional uniform spaces or dashes, Luhn-valid, known issuer prefix.

Checks, in order of cost: digit count, one separator kind in card-like groups (4-4-4-4[-3], Amex 4-6-5,
Diners 4-6-4), a known issuer prefix with a length that issuer uses, the Luhn checksum, and for unseparated
runs an id cue before it (context.py; a payment cue such as `CC#` or `refund the amount to` overrides it).
A random 16-digit id passes Luhn one time in ten; the issuer table and the id cues keep ids, ISBNs,
timestamps and IMEIs out. The test numbers that card networks and payment processors publish for
developers (`4111 1111 1111 1111`, `4242 4242 4242 4242` ...) identify nobody and are kept when
`keep_test_numbers` is on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from corpus_dagster.core.settings import PiiCardsSettings
from corpus_dagster.scrub.context import id_context
from corpus_dagster.scrub.prescreen import Regions, windows

_CANDIDATE = re.compile(r"(?<![\w.,+\-/])[0-9](?:[ \-]?[0-9]){12,18}(?![\w]|[.,\-/][0-9])")
_GROUPINGS = {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1), (4, 4, 4, 2), (4, 4, 4, 3),
              (4, 4, 4, 4, 1), (4, 4, 4, 4, 2), (4, 4, 5), (4, 4, 4, 7), (6, 13), (4, 4, 4, 4, 4)}

# (prefix range low, high, allowed lengths), after the public IIN tables of the card networks.
_ISSUERS: tuple[tuple[int, int, frozenset[int]], ...] = (
    (4, 4, frozenset({13, 16, 19})),  # Visa
    (51, 55, frozenset({16})),  # Mastercard
    (2221, 2720, frozenset({16})),  # Mastercard 2-series
    (34, 34, frozenset({15})),  # American Express
    (37, 37, frozenset({15})),
    (6011, 6011, frozenset({16, 17, 18, 19})),  # Discover
    (644, 649, frozenset({16, 17, 18, 19})),
    (65, 65, frozenset({16, 17, 18, 19})),
    (300, 305, frozenset({14, 15, 16, 17, 18, 19})),  # Diners Club
    (36, 36, frozenset({14, 15, 16, 17, 18, 19})),
    (38, 39, frozenset({14, 15, 16, 17, 18, 19})),
    (3528, 3589, frozenset({16, 17, 18, 19})),  # JCB
    (62, 62, frozenset({16, 17, 18, 19})),  # UnionPay
    (50, 50, frozenset({13, 14, 15, 16, 17, 18, 19})),  # Maestro
    (56, 58, frozenset({13, 14, 15, 16, 17, 18, 19})),
    (63, 63, frozenset({13, 14, 15, 16, 17, 18, 19})),
    (67, 67, frozenset({13, 14, 15, 16, 17, 18, 19})),
    (2200, 2204, frozenset({16, 17, 18, 19})),  # Mir
)

# Published test numbers (Visa, Mastercard, Amex, Discover, Diners, JCB, UnionPay test cards of the networks'
# and of Stripe, Braintree, Adyen and PayPal developer docs): they appear in documentation, not wallets.
TEST_NUMBERS = frozenset(
    """4111111111111111 4012888888881881 4222222222222 4242424242424242 4000056655665556 4000000000000002
    4000000000009995 4000000000000077 4000002500003155 4005519200000004 4009348888881881 4012000033330026
    4012000077777777 4217651111111119 4500600000000061 4444333322221111 4917610000000000 4988438843884305
    5555555555554444 5105105105105100 5200828282828210 5454545454545454 5431111111111111 2223003122003222
    2222400070000005 2223000048400011 378282246310005 371449635398431 378734493671000 340000000000009
    370000000000002 6011111111111117 6011000990139424 6011601160116611 6445644564456445 30569309025904
    38520000023237 3056930009020004 36227206271667 3530111333300000 3566002020360505 3566111111111113
    6200000000000005 6250941006528599 6759649826438453 6799990100000000019 5018000000000009""".split()
)

CARD_REGION = "phones"
"""Cards use the phone detector's digit-run regions (every card number lies inside one): one Rust scan
fewer. Only runs with 13 or more digits are searched."""
_DIGIT_ONLY = re.compile(r"[^0-9]")
_THIRTEEN_DIGITS = re.compile(r"(?:[^0-9]*[0-9]){13}")  # 13 digits or more ahead, without listing them


def luhn_ok(digits: str) -> bool:
    """Luhn (mod 10) checksum of a digit string, the check every issued card number satisfies."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def known_issuer(digits: str) -> bool:
    """True when the number starts with an issuer prefix that issues cards of this length."""
    n = len(digits)
    for low, high, lengths in _ISSUERS:
        width = len(str(low))
        if n in lengths and low <= int(digits[:width]) <= high:
            return True
    return False


def _card_prefix(cand: str) -> int:
    """Length of the longest card-shaped prefix of a candidate (whole groups only), 0 when none is a card."""
    seps = {ch for ch in cand if not ch.isdigit()}
    if not seps:
        return len(cand) if 13 <= len(cand) <= 19 and known_issuer(cand) and luhn_ok(cand) else 0
    if len(seps) > 1:
        return 0
    groups = cand.split(seps.pop())
    for k in range(len(groups), 1, -1):  # "4111 1111 1111 1111 2 times": drop trailing groups
        head = groups[:k]
        digits = "".join(head)
        if tuple(len(g) for g in head) in _GROUPINGS and known_issuer(digits) and luhn_ok(digits):
            return sum(len(g) for g in head) + k - 1
    return 0


def _candidates(text: str, regions: Regions) -> Iterator[re.Match[str]]:
    """Candidate matches inside digit runs of 13+ digits, with two characters each side for the boundary
    checks."""
    long_runs = [(s, e) for s, e in regions if _THIRTEEN_DIGITS.match(text, s, e)]
    for lo, hi in windows(long_runs, 2, 2, len(text)):
        yield from _CANDIDATE.finditer(text, lo, hi)


def find_cards(text: str, cfg: PiiCardsSettings, context_chars: int, regions: dict[str, Regions]) -> list[tuple[int, int]]:
    """Spans of payment-card numbers that the scrub replaces with `<CARD>`."""
    spans: list[tuple[int, int]] = []
    for m in _candidates(text, regions[CARD_REGION]):
        cand = m.group()
        size = _card_prefix(cand)
        if not size:
            continue
        if size == len(cand) and cand.isdigit() and id_context(text, m.start(), context_chars, "cards"):
            continue
        if cfg.keep_test_numbers and _DIGIT_ONLY.sub("", cand[:size]) in TEST_NUMBERS:
            continue
        spans.append((m.start(), m.start() + size))
    return spans
