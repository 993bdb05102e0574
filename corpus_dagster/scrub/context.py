"""Cue words before a number: why a valid-looking number is an id, a version or an ISBN, not PII.

A number such as `415-555-2671` is a valid phone number and also a fine ticket number; only the words in
front of it tell. The detectors read the last few words of the `context_chars` characters before each
candidate: an id cue (`ISBN`, `order`, `invoice`, or a `#` / `§` right before it) drops a phone candidate
unless a phone cue (`tel`, `call`, `Telefon` ...) is nearer, and a card candidate unless a payment cue
(`card`, `CC#`, `refund` ...) is among the last CUE_REACH words (a word naming a card or a payment
overrides any id cue); a version cue (`version`, `build`, `since dpkg`, `section`, `>=`) drops a dotted
quad. A phone cue right before a number also lets the phone detector try the national formats of
`pii.phones.regions` (phone_cue). Word lookup in sets, not regex search: the check runs for every
candidate. Words are letter runs in any script (`Téléphone`, `Teléfono`), compared in lowercase.
"""

from __future__ import annotations

import re

# A placeholder the scrub inserted (`<PHONE>`) is not a word: were it read as `phone`, a number after a
# redacted one would find a phone cue that the original text never had, and every re-check pass would
# redact one more number of a table (the scrub must be idempotent). Same names as scrub.api.PLACEHOLDERS.
PLACEHOLDER_PATTERN = r"<(?:EMAIL|PHONE|CARD|IP|KEY)>"
_WORD = re.compile(PLACEHOLDER_PATTERN + r"|[^\W\d_]+")
CUE_REACH = 4  # words before a number a payment or phone cue may stand at

ID_WORDS = frozenset(
    """isbn issn doi pmid pmc arxiv id ids ident identifier uuid guid order orders invoice ticket ref reference
    serial sn sku part model case docket account acct patent version ver build release ssn tin ein vat iban bic
    routing tracking shipment isin cusip lot batch item product catalog catalogue receipt transaction txn
    confirmation booking reservation claim policy member membership license licence registration reg imei mac
    port pid uid gid hash checksum revision rev commit issue bug pr oid zip postcode population total sum
    amount price cost salary revenue balance clause dfars section sec usc cfr statute sign size sizes""".split()
)
PHONE_WORDS = frozenset(
    """tel tele tél tlf tfno telf phone telephone phones call called calling fax mobile mob cell cellphone
    whatsapp sms text dial contact hotline helpline reach ring ph landline
    telefon telefonnummer handy mobil anrufen rufen
    téléphone telephone portable appelez appeler appelle contactez
    teléfono telefono tel móvil movil celular llame llámenos llamar contacto
    telefone fone ligue ligar contato""".split()
)
CARD_WORDS = frozenset(
    """card cards credit debit visa mastercard amex express discover diners jcb unionpay maestro cc ccn pan
    payment payments pay paid paying charge charged refund refunded refunds billing billed cardholder
    tarjeta carte kreditkarte cartão""".split()
)
VERSION_WORDS = frozenset(
    """version versions ver v release released rel build firmware fw revision rev patch kernel driver sdk pkg
    changelog since upgrade upgraded section sections sec chapter ch clause figure fig table eq equation
    paragraph para article appendix oid""".split()
)
# `office number`, `direct line`: a noun naming a phone line after one of these words, among the last two
# words before a number, is a phone cue (`our office number is (02) 1252 5307`); `number` alone is not
# (`order number`, `number of units`), nor `line of sight`, nor `office no.` (a room as often as a phone).
LINE_WORDS = frozenset("number numbers line lines".split())
LINE_QUALIFIERS = frozenset(
    """office home work direct main business contact emergency switchboard reception support service
    toll free tollfree private personal mobile cell fax landline hotline helpline customer sales""".split()
)
_ID_MARKS = ("#", "\u00a7")
_VERSION_OPERATORS = (">=", "<=", "==", "~=", "!=")


def _last_words(text: str, start: int, window: int, n: int) -> list[str]:
    """The last n words (lowercase) of the `window` characters before `start`, nearest last."""
    words = [w for w in _WORD.findall(text, max(0, start - window), start) if w[0] != "<"]
    return [w.lower() for w in words[-n:]]


def id_context(text: str, start: int, window: int, kind: str) -> bool:
    """True when the words before `start` say the number there is an id: an id word among the last two
    words (or `#`/`§` right before) and no nearer phone word (kind "phones"), no payment word among the
    last CUE_REACH words (kind "cards"), and no cue word right before the `#` (`Tel#`, `CC#`)."""
    cues = PHONE_WORDS if kind == "phones" else CARD_WORDS
    before = text[max(0, start - window) : start].rstrip()
    if before.endswith(_ID_MARKS):
        mark_words = _last_words(before, len(before) - 1, window, 1)
        touching = bool(mark_words) and before[: len(before) - 1].rstrip().lower().endswith(mark_words[0])
        return not (touching and mark_words[0] in cues)
    if kind == "cards" and any(w in cues for w in _last_words(text, start, window, CUE_REACH)):
        return False
    words = _last_words(text, start, window, 3)
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


def phone_cue(text: str, start: int, window: int) -> bool:
    """True when a phone word (`Tel:`, `call`, `Telefon`, `appelez` ...) is among the last CUE_REACH words
    before `start` (`call the clinic on`, `Rufen Sie uns an:`), or a phone line is named among the last two
    (`office number is`, `direct line`: LINE_WORDS after LINE_QUALIFIERS), and no id word stands between
    it and the number."""
    words = _last_words(text, start, window, CUE_REACH + 1)
    for i in range(len(words) - 1, max(0, len(words) - CUE_REACH) - 1, -1):
        word = words[i]
        line = word in LINE_WORDS and i >= len(words) - 2 and i > 0 and words[i - 1] in LINE_QUALIFIERS
        if word in PHONE_WORDS or line:
            return True
        if word in ID_WORDS:
            return False
    return False
