"""Phone detector: digit groups with separators, validated by libphonenumber (`phonenumbers`).

A candidate is a run of digit groups joined by spaces, dots, dashes, slashes or parentheses, optionally led
by `+` (or `tel:`) and followed by an extension. It must hold `min_digits` (international) or a full
national number's digits (national format of `default_region`) and, unless it starts with `+`, a
separator: bare digit runs are never phones. Dates, year ranges, dotted quads, ZIP+4 codes, id contexts
(context.py) and numeric table rows are dropped before libphonenumber is asked. A candidate holding
several numbers is cut into pieces. Each piece must parse as a valid number (`phonenumbers`) and, at
`strict_grouping`, be written without splitting a digit group of its national or international format,
which removes most ISBNs, ids and coordinates that happen to be valid numbers; `exact_grouping` wants
one of those groupings exactly. This is libphonenumber's matcher verdict at a third of the cost.

National formats of other regions (`0415 645 206` in Australia, `030 632606` in Berlin, `078 158 83 24` in
Switzerland) are valid numbers of many regions at once and look like ids anywhere, so they count only
with a phone cue right before them (`Tel:`, `call`, `Telefon`, `appelez` ..., context.phone_cue) and when
the number is valid in one of `regions` (tried in list order) at `cued_leniency` (default `valid`: the
number plan decides; people group national numbers many ways, `02033 12 5219`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from itertools import accumulate

import numpy as np
import phonenumbers

from corpus_dagster.core.errors import ConfigError
from corpus_dagster.core.settings import PiiPhonesSettings
from corpus_dagster.scrub.context import id_context, phone_cue
from corpus_dagster.scrub.prescreen import Anchored, windows
from corpus_dagster.scrub.spans import Bytes, Matches, Regions, merged_windows

# libphonenumber compiles its metadata patterns through `re.compile`, whose cache holds 512 patterns: a
# worker that meets numbers of many regions (and other regex users) can evict and recompile them, which
# costs more than validating. Keep them instead; the metadata bounds the count.
if hasattr(phonenumbers, "enable_pattern_cache"):
    phonenumbers.enable_pattern_cache()

_GROUP = r"(?:\([0-9]{1,5}\) ?)?[0-9]{1,9}"
_SEP = r"(?:[ \t.\-/]|\u2013| - ){1,3}"
_BEFORE = r"[\w+\-./:#$\u00a2-\u00a5\u20ac@%,]"  # a character right before that makes a digit part of a token
# A candidate is `+` then 7-15 digits, or digit groups (the first maybe led by `+ `, a group maybe led by
# an area code in parentheses) joined by 1-3 separators, or an area code in parentheses then one group
# (`(601) 2341965`); then an optional extension. It starts after `tel:` or after a character that is not
# _BEFORE. Written so that its first element is the class of first characters, `[+(0-9]`, which lets the
# scan jump between those characters; the look-behinds then read the character before it (`.` is the
# first character itself) and each branch goes on after the first character it is for.
_CANDIDATE = re.compile(
    r"[+(0-9](?:(?<=tel:.)|(?<!" + _BEFORE + r".))"
    r"(?:(?<=\+)(?:[0-9]{7,15}| ?" + _GROUP + r"(?:" + _SEP + _GROUP + r"){1,7})"
    r"|(?<=\()(?:[0-9]{1,5}\) ?[0-9]{1,9}(?:" + _SEP + _GROUP + r"){1,7}|[0-9]{1,5}\) ?[0-9]{4,9})"
    r"|(?<=[0-9])[0-9]{0,8}(?:" + _SEP + _GROUP + r"){1,7})"
    r"(?:[ ]?(?:x|ext\.?|extension)[ ]?[0-9]{1,6})?"
    r"(?![\w@%]|[.,\-/][0-9])"
)
# Shapes that are never phone numbers, rejected before libphonenumber is asked: dates (with an hour),
# year ranges (`1994-1997`, `2001 - 05`), dotted quads (IPs, versions), ZIP+4 codes.
_NOT_PHONE = re.compile(
    r"^(?:(?:[0-9]{4}[-./ ][0-9]{1,2}[-./ ][0-9]{1,2}|[0-9]{1,2}[-./ ][0-9]{1,2}[-./ ][0-9]{2,4})"
    r"(?:[ T][0-9]{1,2}(?:[:.][0-9]{2}){0,2})?"
    r"|(?:1[5-9]|20)[0-9]{2} ?[-\u2013/] ?(?:(?:1[5-9]|20)[0-9]{2}|[0-9]{2})"
    r"|[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?:/[0-9]{1,2})?"
    r"|[0-9]{5}-[0-9]{4})$"
)
# After a phone cue, only real calendar dates are dates (`0450 00 20 28` is a Belgian mobile number).
_NOT_PHONE_CUED = re.compile(
    r"^(?:(?:[0-9]{4}[-./ ](?:0?[1-9]|1[0-2])[-./ ](?:0?[1-9]|[12][0-9]|3[01])"
    r"|(?:0?[1-9]|[12][0-9]|3[01])[-./ ](?:0?[1-9]|[12][0-9]|3[01])[-./ ](?:19|20)?[0-9]{2})"
    r"(?:[ T](?:[01]?[0-9]|2[0-3])(?:[:.][0-5][0-9]){0,2})?"
    r"|(?:1[5-9]|20)[0-9]{2} ?[-\u2013/] ?(?:(?:1[5-9]|20)[0-9]{2}|[0-9]{2})"
    r"|[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?:/[0-9]{1,2})?"
    r"|[0-9]{5}-[0-9]{4})$"
)
# Never a cued national number: a decimal (`112.5 - 118.0`) or a one-digit group after a separator
# (`1234 5678 9 times`); national formats group digits in twos to fives after the trunk prefix.
_NOT_CUED = re.compile(r"[0-9]\.[0-9](?![0-9])|[ \t.\-/\u2013][0-9](?![0-9])")
_NO_DIGITS = str.maketrans("", "", "0123456789")
_DIGIT_GROUPS = re.compile(r"[0-9]+")
_EXTENSION = re.compile(r"(?i)[ ]?(?:x|ext\.?|extension)[ ]?[0-9]{1,6}$")
_INTL_SPAN = 40  # an international number with its separators spans at most this many characters
_SEPARATED = re.compile(r"[0-9][ \t.\-/()\u2013]+[0-9]")
_SPACED_GROUP = re.compile(r"[^ \t]+")  # groups of a candidate between single spaces
_MAX_GROUPS = 12
_WIDE_SEPARATOR = re.compile(r"[ \t]{2,}|[ \t]*[/\u2013][ \t]*|[ \t]+-[ \t]+")


def _digit_count(text: str) -> int:
    """How many ASCII digits text holds (one C-level pass, no list of matches)."""
    return len(text) - len(text.translate(_NO_DIGITS))


_CARD_DIGITS = 13  # the fewest digits of a card number: cards read the same regions


_INTL_REGION = r"\+[ (]?[0-9]"


def _plus_then_digit(plus: Bytes) -> tuple[np.ndarray, int, np.ndarray]:
    """The `phones_intl` matches from the `+` bytes: `+`, then a space or `(` if a digit follows it (the
    optional part is greedy), else a digit. Only a match's first byte is a `+`: they never overlap."""
    one, two = plus.at(1), plus.at(2)
    long = ((one == 32) | (one == 40)) & (two >= 48) & (two <= 57)
    return long | ((one >= 48) & (one <= 57)), 0, np.where(long, 3, 2)


PHONE_ANCHORED = {"phones_intl": Anchored(_INTL_REGION, "+", (1, 3), _plus_then_digit)}
"""International regions found from the `+` bytes (api._Plan.anchored)."""


def phone_regions(cfg: PiiPhonesSettings) -> dict[str, str]:
    """Rust-regex regions: a `+` before a digit (international numbers), and runs of digits and separators
    holding enough digits for a national number of the default region or of a cued region (digit to digit).

    A run is matched from its first digit to its last, so each maximal run of digits and separators gives
    one region or none: exactly the runs `_candidates` keeps (`cued_min_digits` digits or more), and the
    card detector's (13 or more: cards share the pattern, hence the 13). Times and years (`12:57:31 2018`,
    `2018 12`) hold too few digits and never reach Python.
    """
    digits = min(_CARD_DIGITS, cued_min_digits(cfg))
    return {"phones_intl": _INTL_REGION, "phones": rf"[0-9](?:[ \t.\-/()\u2013]*[0-9]){{{digits - 1},}}"}


def other_regions(cfg: PiiPhonesSettings) -> tuple[str, ...]:
    """`regions` without the default region, in list order, checked against libphonenumber's metadata."""
    return _other_regions(cfg.default_region, tuple(cfg.regions))


@lru_cache(maxsize=64)
def _other_regions(default: str, regions: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for region in regions:
        if phonenumbers.PhoneMetadata.metadata_for_region(region) is None:
            raise ConfigError("pii.phones.regions", [
                f"{region!r} is not a region libphonenumber knows; use an ISO 3166-1 alpha-2 code such as AU"])
        if region != default and region not in out:
            out.append(region)
    return tuple(out)


def cued_min_digits(cfg: PiiPhonesSettings) -> int:
    """Fewest digits a candidate needs: a national number of the default region, or of a cued region."""
    regions = (cfg.default_region, *other_regions(cfg))
    return max(cfg.min_digits, min(national_min_digits(r) for r in regions))


def _candidates(text: str, regions: dict[str, Regions], national_min: int) -> Iterator[re.Match[str]]:
    """Candidate matches near the regions: after each `+`, and around runs holding a national number's
    digits, with room for a leading `+ (` and a trailing extension (the windows come precomputed for the
    whole batch, phone_windows, when every region holds enough digits)."""
    if WINDOWS in regions:
        spans = regions[WINDOWS]
    else:
        rich = regions["phones"]
        if national_min > _CARD_DIGITS:  # else every region holds enough digits (phone_regions)
            enough = _at_least_digits(national_min)
            rich = [(s, e) for s, e in rich if enough.match(text, s, e)]
        rich = rich + [(s, s + _INTL_SPAN) for s, _ in regions["phones_intl"]]
        rich.sort()
        spans = windows(rich, _BEFORE_RUN, _AFTER_RUN, len(text))
    finditer = _CANDIDATE.finditer
    for lo, hi in spans:
        yield from finditer(text, lo, hi)


WINDOWS = "phones_windows"
_BEFORE_RUN, _AFTER_RUN = 6, 24  # room for a leading `+ (` (and the look-behinds), and for an extension


def phone_windows(found: dict[str, Matches], sizes: np.ndarray, cfg: PiiPhonesSettings) -> Matches | None:
    """The windows `_candidates` scans, for every text of a batch at once (api._Plan.derived); None when
    cued_min_digits exceeds what the region pattern guarantees, so each region's digits must be counted."""
    if cued_min_digits(cfg) > _CARD_DIGITS:
        return None
    parts = [(found.get("phones", Matches.empty()), None), (found.get("phones_intl", Matches.empty()), _INTL_SPAN)]
    return merged_windows(parts, _BEFORE_RUN, _AFTER_RUN, sizes)


@lru_cache(maxsize=64)
def _at_least_digits(n: int) -> re.Pattern[str]:
    """A pattern that matches at a position followed by at least n digits (one match, no list of digits)."""
    return re.compile(rf"(?:[^0-9]*[0-9]){{{n}}}")


@lru_cache(maxsize=64)
def national_min_digits(region: str) -> int:
    """Fewest digits a full national number of `region` has (local-only short forms are never valid)."""
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    lengths = [n for n in meta.general_desc.possible_length if n > 0] if meta is not None else []
    return min(lengths) if lengths else 1


@lru_cache(maxsize=64)
def national_max_digits(region: str) -> int:
    """Most digits one national number of `region` has, national prefix (`1`, `0` ...) included."""
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if meta is None:
        return 15
    lengths = [n for n in meta.general_desc.possible_length if n > 0] or [15]
    return max(lengths) + len(meta.national_prefix or "")


def _boundaries(written: str, nsn: str) -> frozenset[int] | None:
    """Where the digit groups of `written` break, counted in digits of the national significant number
    (digits before it, a country code or national prefix, are skipped); None if it does not end in nsn."""
    groups = _DIGIT_GROUPS.findall(written)
    skip = sum(len(g) for g in groups) - len(nsn)
    if skip < 0 or not "".join(groups).endswith(nsn):
        return None
    bounds, pos = set(), -skip
    for group in groups[:-1]:
        pos += len(group)
        if pos > 0:
            bounds.add(pos)
    return frozenset(bounds)


_PLAIN_NATIONAL = re.compile(r"[0-9 \t.\-/()\u2013]+")


@lru_cache(maxsize=64)
def _national_screen(region: str) -> tuple[re.Pattern[str], tuple[int, ...]] | None:
    """The general pattern and lengths every valid national number of `region` has; None where parsing may
    rewrite digits (a national prefix transform rule: AR, BR) or the metadata sets no bound."""
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if meta is None or meta.national_prefix_transform_rule is not None:
        return None
    desc = meta.general_desc
    lengths = tuple(sorted(n for n in desc.possible_length if n > 0))
    if desc.national_number_pattern is None or not lengths:
        return None
    return re.compile(desc.national_number_pattern), lengths


def national_suffix_possible(cand: str, region: str) -> bool:
    """False only when no parse of `cand` in `region` can be a valid number, decided without parsing.

    For a candidate of digits and separators alone (no `+`, no letters, so no extension and no second
    number), libphonenumber's parse only strips digits from the front (an international call prefix and
    country code, a national prefix or carrier code) unless the region has a transform rule. So the
    national significant number is a suffix of the candidate's digits, and validity for the region needs it
    to have one of the general description's lengths and match its pattern. Of the 69.4 k distinct numbers a
    150 MB corpus asked libphonenumber about, 65.5 k (table rows, decimals) fail this; parsing was most
    of the phone detector's cost.
    """
    screen = _national_screen(region)
    if screen is None or not _PLAIN_NATIONAL.fullmatch(cand):
        return True
    pattern, lengths = screen
    digits = "".join(_DIGIT_GROUPS.findall(cand))
    return any(pattern.fullmatch(digits[len(digits) - n:]) for n in lengths if n <= len(digits))


@lru_cache(maxsize=65536)
def single_number_ok(cand: str, region: str, leniency: str) -> bool:
    """Whether a candidate holding one number is a valid phone number written with a real grouping.

    The same verdict as libphonenumber's matcher at this leniency, at a third of the cost: parse, validity
    for the default region (national format) or the country code (+ format), then the written digit
    groups must not split a group of the national or international format (`strict_grouping`) or must
    equal one of them (`exact_grouping`). Cached: footers repeat the same numbers across documents.
    """
    international = cand.lstrip().startswith("+")
    if not international and not national_suffix_possible(cand, region):
        return False
    try:
        num = phonenumbers.parse(cand, region)
    except phonenumbers.NumberParseException:
        return False
    if international:  # the country's main region first: +1 numbers are mostly US, and checking every
        # NANP region (what is_valid_number does) costs ten times more
        main = phonenumbers.region_code_for_country_code(num.country_code)
        valid = phonenumbers.is_valid_number_for_region(num, main) or phonenumbers.is_valid_number(num)
    else:
        valid = phonenumbers.is_valid_number_for_region(num, region)
    if not valid or leniency == "valid":
        return valid
    nsn = phonenumbers.national_significant_number(num)
    written = _boundaries(_EXTENSION.sub("", cand), nsn)
    if written is None:
        return False
    plain = phonenumbers.PhoneNumber(
        country_code=num.country_code,
        national_number=num.national_number,
        italian_leading_zero=num.italian_leading_zero,
        number_of_leading_zeros=num.number_of_leading_zeros,
    )
    for fmt in (phonenumbers.PhoneNumberFormat.NATIONAL, phonenumbers.PhoneNumberFormat.INTERNATIONAL):
        canonical = _boundaries(phonenumbers.format_number(plain, fmt), nsn)
        if canonical is not None and (written == canonical if leniency == "exact_grouping" else written <= canonical):
            return True
    return False


def find_phones(text: str, cfg: PiiPhonesSettings, context_chars: int, regions: dict[str, Regions]) -> list[tuple[int, int]]:
    """Spans of phone numbers that the scrub replaces with `<PHONE>`."""
    region = cfg.default_region
    national_min = max(cfg.min_digits, national_min_digits(region))
    national_max = national_max_digits(region)
    others = other_regions(cfg)
    cued_min = cued_min_digits(cfg)
    spans: list[tuple[int, int]] = []
    intl_min = cfg.min_digits
    not_phone, no_digits = _NOT_PHONE_CUED.match, _NO_DIGITS
    for m in _candidates(text, regions, cued_min):
        cand = m.group()
        intl = cand[0] == "+"
        digits = len(cand) - len(cand.translate(no_digits))
        if digits < (intl_min if intl else cued_min):
            continue  # no number inside can be long enough: skip libphonenumber
        if not_phone(cand) or cand.count("(") != cand.count(")"):
            continue
        start = m.start()
        if not intl and _numeric_neighbor(text, start, m.end()):
            continue  # first: a table row is the commonest reject, and cheaper to see than an id cue
        if id_context(text, start, context_chars, "phones"):
            continue
        found = []
        if (intl or digits >= national_min) and not _NOT_PHONE.match(cand):
            found = _numbers(cand, digits, cfg, region, national_min, national_max)
        cued = not found and not intl and others and phone_cue(text, start, context_chars)
        if cued and not _NOT_CUED.search(_EXTENSION.sub("", cand)):
            for other in others:  # a cued national number of another region
                low = max(cfg.min_digits, national_min_digits(other))
                if digits >= low:
                    found = _numbers(cand, digits, cfg, other, low, national_max_digits(other), cfg.cued_leniency)
                    if found:
                        break
        spans.extend((start + a, start + b) for a, b in found)
    return spans


def _digits_fit(intl: bool, digits: int, cfg: PiiPhonesSettings, national_min: int, national_max: int) -> bool:
    """Whether a piece with this many digits can be one number (international: min_digits..15)."""
    return (cfg.min_digits if intl else national_min) <= digits <= (15 if intl else national_max)


def _ok(piece: str, cfg: PiiPhonesSettings, region: str, national_min: int, national_max: int, leniency: str) -> bool:
    """Whether one piece of a candidate is a phone number on its own (national format of `region`)."""
    intl = piece.startswith("+")
    if not _digits_fit(intl, _digit_count(piece), cfg, national_min, national_max):
        return False
    shapes = _NOT_PHONE if leniency == cfg.leniency and region == cfg.default_region else _NOT_PHONE_CUED
    if shapes.match(piece) or not (intl or _SEPARATED.search(piece)):
        return False  # a bare digit run is never a phone number
    return single_number_ok(piece, region, leniency)


def _numbers(cand: str, digits: int, cfg: PiiPhonesSettings, region: str, national_min: int, national_max: int,
             leniency: str | None = None) -> list[tuple[int, int]]:
    """Spans (within cand) of the phone numbers in a candidate.

    A candidate that can hold one number is checked whole. A longer one ("202-555-0143 / 202-555-0199",
    "202 555 0143 202 555 0199") is cut at wide separators and then, greedily from the left, into runs of
    space-separated groups, each checked on its own; a run of more than _MAX_GROUPS groups (od dumps,
    tables) is not searched.
    """
    leniency = leniency or cfg.leniency
    if digits <= (15 if cand.startswith("+") else national_max):
        return [(0, len(cand))] if _ok(cand, cfg, region, national_min, national_max, leniency) else []
    out: list[tuple[int, int]] = []
    pos = 0
    parts = [(sep.start(), sep.end()) for sep in _WIDE_SEPARATOR.finditer(cand)] + [(len(cand), len(cand))]
    # digits before each position: most runs tried below have too many or too few digits to be one number,
    # and are passed over here without slicing or scanning them (the same test _ok starts with)
    before = list(accumulate(("0" <= c <= "9" for c in cand), initial=0))
    for sep_start, sep_end in parts:
        groups = [(g.start() + pos, g.end() + pos) for g in _SPACED_GROUP.finditer(cand[pos:sep_start])]
        pos = sep_end
        if len(groups) > _MAX_GROUPS:
            continue
        g = 0
        while g < len(groups):
            for last in range(len(groups) - 1, g - 1, -1):  # longest run first
                start, end = groups[g][0], groups[last][1]
                if not _digits_fit(cand[start] == "+", before[end] - before[start], cfg, national_min, national_max):
                    continue
                if _ok(cand[start:end], cfg, region, national_min, national_max, leniency):
                    out.append((start, end))
                    g = last
                    break
            g += 1
    return out


def _numeric_neighbor(text: str, start: int, end: int) -> bool:
    """True when a number sits right before or after the candidate on its line: a table row, not a phone."""
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < start - 1 and i >= 0 and text[i].isdigit():
        return True
    j = end
    while j < len(text) and text[j] in " \t":
        j += 1
    return j > end and j < len(text) and text[j].isdigit()
