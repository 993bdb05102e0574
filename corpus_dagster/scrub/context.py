"""Cue words before a number: why a valid-looking number is an id, a version or an ISBN, not PII.

A number such as `415-555-2671` is a valid phone number and also a fine ticket number; only the words in
front of it tell. The detectors read the last few words of the `context_chars` characters before each
candidate: an id cue (`ISBN`, `order`, `invoice`, or a `#` / `§` right before it) drops a phone or card
candidate unless a phone or payment cue (`tel`, `call`, `card` ...) is nearer; a version cue (`version`,
`build`, `since dpkg`, `section`, `>=`) drops a dotted quad. Word lookup in sets, not regex search: the
check runs for every candidate.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z]+")

ID_WORDS = frozenset(
    """isbn issn doi pmid pmc arxiv id ids ident identifier uuid guid order orders invoice ticket ref reference
    serial sn sku part model case docket account acct patent version ver build release ssn tin ein vat iban bic
    routing tracking shipment isin cusip lot batch item product catalog catalogue receipt transaction txn
    confirmation booking reservation claim policy member membership license licence registration reg imei mac
    port pid uid gid hash checksum revision rev commit issue bug pr oid zip postcode population total sum
    amount price cost salary revenue balance clause dfars section sec usc cfr statute""".split()
)
PHONE_WORDS = frozenset(
    """tel phone telephone phones call called calling fax mobile mob cell cellphone whatsapp sms text dial
    contact hotline helpline reach ring ph""".split()
)
CARD_WORDS = frozenset(
    """card cards credit debit visa mastercard amex express discover diners jcb unionpay maestro cc ccn pan
    payment pay paid charge charged""".split()
)
VERSION_WORDS = frozenset(
    """version versions ver v release released rel build firmware fw revision rev patch kernel driver sdk pkg
    changelog since upgrade upgraded section sections sec chapter ch clause figure fig table eq equation
    paragraph para article appendix oid""".split()
)
_ID_MARKS = ("#", "\u00a7")
_VERSION_OPERATORS = (">=", "<=", "==", "~=", "!=")


def _last_words(text: str, start: int, window: int, n: int) -> list[str]:
    """The last n words (lowercase) of the `window` characters before `start`, nearest last."""
    return [w.lower() for w in _WORD.findall(text, max(0, start - window), start)[-n:]]


def id_context(text: str, start: int, window: int, kind: str) -> bool:
    """True when the words before `start` say the number there is an id: an id word among the last two
    words (or `#`/`§` right before) and no nearer phone (kind "phones") or payment (kind "cards") word."""
    if text[max(0, start - window) : start].rstrip().endswith(_ID_MARKS):
        return True
    words = _last_words(text, start, window, 3)
    cues = PHONE_WORDS if kind == "phones" else CARD_WORDS
    for word in reversed(words):  # nearest first: whichever cue comes first decides
        if word in cues:
            return False
        if word in ID_WORDS and word in words[-2:]:
            return True
    return False


def version_context(text: str, start: int, window: int) -> bool:
    """True when the words before `start` say the dotted quad there is a version or section number:
    a version word among the last two words (`since dpkg 1.15.5.4`) or a requirement operator (`>=`)."""
    before = text[max(0, start - window) : start].rstrip()
    if before.endswith(_VERSION_OPERATORS) or before.endswith("\u00a7"):
        return True
    return any(w in VERSION_WORDS for w in _last_words(text, start, window, 2))
