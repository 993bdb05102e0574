"""Phone detector: formats libphonenumber validates, and numbers that only look like phones."""


import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii
from corpus_dagster.scrub.phones import national_max_digits, national_min_digits, single_number_ok


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def phones(text: str, cfg: PiiSettings) -> list[str]:
    return [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "phones"]


@pytest.mark.parametrize(
    "number",
    [
        "(202) 555-0143",
        "202-555-0143",
        "202.555.0143",
        "202 555 0143",
        "(202)555-0143",
        "202/555-0143",
        "1-800-275-2273",
        "+1 202 555 0143",
        "+1 (212) 736-5000",
        "+1.202.555.0143",
        "+44 20 7946 0958",
        "+44 (0)20 7946 0958",
        "+49 30 901820",
        "+33 1 23 45 67 89",
        "+91 98765 43210",
        "+81 3-1234-5678",
        "+442079460958",
        "+1-202-555-0143x12",
        "202-555-0143 ext. 5",
    ],
)
def test_valid_numbers_are_found_whole(number: str, cfg: PiiSettings) -> None:
    assert phones(f"Call {number} today", cfg) == [number]


def test_tel_links_and_number_lists(cfg: PiiSettings) -> None:
    assert phones('<a href="tel:+12025550143">', cfg) == ["+12025550143"]
    assert phones("Tel 202-555-0143 202-555-0199 ok", cfg) == ["202-555-0143", "202-555-0199"]
    assert phones("Call 202-555-0143 / 202-555-0199", cfg) == ["202-555-0143", "202-555-0199"]
    assert phones("+1 202 555 0143 +1 202 555 0199", cfg) == ["+1 202 555 0143", "+1 202 555 0199"]


@pytest.mark.parametrize(
    "text",
    [
        "2025550143",  # bare digit runs are never phones
        "ID 4829103822",
        "2023-01-15",
        "on 1999-12-31 at 23:59",
        "2024-02-29T08:15:00Z",
        "Copyright 1994-1997, 2001 - 2005",
        "ISBN 978-3-16-148410-0",
        "ISBN-10: 0-306-40615-2",
        "192.168.1.1",
        "version 10.0.19041.1",
        "40.7128, -74.0060",
        "$1,299.99 or 1 234 567 EUR",
        "123-45-6789",
        "ZIP 02110-1301",
        "1 2 3 4 5 6 7 8 9 10",
        "0 83 skipped 0 1412881037 914578 5217",
        "550e8400-e29b-41d4-a716-446655440000",
    ],
)
def test_dates_ids_and_numbers_stay(text: str, cfg: PiiSettings) -> None:
    assert phones(text, cfg) == []


@pytest.mark.parametrize(
    "text",
    ["Order number: 415-555-2671", "Ticket 212-736-5000", "Invoice #800-275-2273", "SKU 650-253-0000",
     "ref 202 555 0143", "ISBN 202-555-0143"],
)
def test_id_cues_drop_valid_numbers(text: str, cfg: PiiSettings) -> None:
    assert phones(text, cfg) == []


def test_a_nearer_phone_cue_beats_an_id_cue(cfg: PiiSettings) -> None:
    assert phones("order 12, call 415-555-2671", cfg) == ["415-555-2671"]


def test_national_formats_follow_the_default_region(cfg: PiiSettings) -> None:
    assert phones("Office 020 7946 0958 now", cfg) == []  # no cue: a GB national number is not tried
    gb = pii_settings({"phones": {"default_region": "GB"}})
    assert phones("Office 020 7946 0958 now", gb) == ["020 7946 0958"]
    assert national_min_digits("US") == 10 and national_max_digits("US") == 11


def test_grouping_leniency(cfg: PiiSettings) -> None:
    # 202555 0143 keeps every real group whole (strict accepts), but is not a real format (exact rejects)
    assert single_number_ok("202555 0143", "US", "strict_grouping")
    assert not single_number_ok("202555 0143", "US", "exact_grouping")
    assert not single_number_ok("20-25-55-01-43", "US", "strict_grouping")
    assert single_number_ok("20-25-55-01-43", "US", "valid")
    assert not single_number_ok("+1 212 555 01", "US", "valid")


def test_min_digits_and_disable(cfg: PiiSettings) -> None:
    short = pii_settings({"phones": {"min_digits": 12}})
    assert phones("+49 30 901820", short) == []
    off = pii_settings({"phones": {"enabled": False}})
    assert phones("(202) 555-0143", off) == []


def test_unknown_default_region_is_a_config_error(cfg: PiiSettings) -> None:
    bad = pii_settings({"phones": {"default_region": "ZZ"}})
    with pytest.raises(ValueError, match="default_region 'ZZ'"):
        find_pii("x", bad)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("Tel: 0415 645 206", "0415 645 206"),  # AU mobile
        ("For bookings call 030 632606 today", "030 632606"),  # DE Berlin
        ("Natel: Tel. 078 158 83 24", "078 158 83 24"),  # CH mobile
        ("Tel.: 02033 12 5219 (Zentrale)", "02033 12 5219"),  # DE, grouped the way people write it
        ("call 1800 176 369 from anywhere", "1800 176 369"),  # AU freecall
        ("Call the clinic on 085 012 8416.", "085 012 8416"),  # cue four words back
        ("Teléfono: (601) 2341965", "(601) 2341965"),  # area code in parentheses, then one group
        ("Tel. 0450 00 20 28 (secretariaat)", "0450 00 20 28"),  # not a date after a cue (month 00)
        ("Appelez le 01 42 68 53 00", "01 42 68 53 00"),
    ],
)
def test_cued_national_numbers_of_other_regions(text: str, number: str, cfg: PiiSettings) -> None:
    assert phones(text, cfg) == [number]
    if number.startswith("(601)"):
        return  # also a valid US number: found without a cue, as before
    assert phones(f"Room {number} today", cfg) == []  # without a cue the national format is not tried
    none = pii_settings({"phones": {"regions": []}})
    assert phones(text, none) == []


@pytest.mark.parametrize(
    "text",
    [
        "contact angle 112.5 - 118.0 degrees",  # decimals
        "call sign DL 1234 567",  # id word between the cue and the number
        "Ring size 52 54 56 58 60 available",
        "Tel: siehe oben, Fax: 15.03.2024",  # a real date after a cue
        "Call order 0415 645 206 shipped today.",  # id word nearer than the cue
        "call 1234 5678 9 times",  # valid nowhere
    ],
)
def test_cued_non_phones_stay(text: str, cfg: PiiSettings) -> None:
    assert phones(text, cfg) == []


def test_cued_leniency_and_region_order(cfg: PiiSettings) -> None:
    strict = pii_settings({"phones": {"cued_leniency": "strict_grouping"}})
    assert phones("Tel.: 02033 12 5219", cfg) == ["02033 12 5219"]
    assert phones("Tel.: 02033 12 5219", strict) == ["02033 12 5219"]  # a Nigerian grouping, strictly
    strict_de = pii_settings({"phones": {"cued_leniency": "strict_grouping", "regions": ["DE"]}})
    assert phones("Tel.: 02033 12 5219", strict_de) == []  # not how Germany groups it
    only_au = pii_settings({"phones": {"regions": ["AU"]}})
    assert phones("Tel: 0415 645 206", only_au) == ["0415 645 206"]
    assert phones("Telefon: 030 632606", only_au) == []


def test_unknown_region_is_a_config_error(cfg: PiiSettings) -> None:
    from corpus_dagster.core.errors import ConfigError

    bad = pii_settings({"phones": {"regions": ["AU", "XX"]}})
    with pytest.raises(ConfigError, match=r"pii\.phones\.regions(.|\n)*'XX'"):
        phones("Tel: 0415 645 206", bad)


def test_a_placeholder_is_not_a_phone_cue(cfg: PiiSettings) -> None:
    """`<PHONE>` before a table of decimals must not read as the cue word `phone`: a real PDF content
    stream (`0\\n11.529216\\n0\\n12.669696`) lost one more number per re-check pass that way."""
    assert phones("<PHONE>\n0\n11.529216\n0\n12.669696\n", cfg) == []
    assert phones("phone\n0\n11.529216\n", cfg) == ["11.529216"]  # the word itself still cues


def test_scrubbing_a_number_before_a_decimal_table_is_idempotent(cfg: PiiSettings) -> None:
    from corpus_dagster.scrub.api import PLACEHOLDERS, scrub_text
    from corpus_dagster.scrub.context import PLACEHOLDER_PATTERN

    text = "202-555-0143\n0\n11.529216\n0\n12.669696\n0\n8.066304\n"
    once, counts = scrub_text(text, cfg)
    assert once == "<PHONE>\n0\n11.529216\n0\n12.669696\n0\n8.066304\n" and counts["phones"] == 1
    assert find_pii(once, cfg) == [] and scrub_text(once, cfg)[0] == once
    import re

    assert all(re.fullmatch(PLACEHOLDER_PATTERN, p) for p in PLACEHOLDERS.values())


def test_the_national_screen_rejects_only_what_libphonenumber_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    # national_suffix_possible skips parsing for candidates no parse can make valid; on random digit groups with
    # every separator, in regions with and without national prefixes (and AR/BR, whose transform rules it
    # leaves alone), the verdict with the screen must equal the verdict of a full parse
    import random

    from corpus_dagster.scrub import phones as ph

    full_ok = ph.single_number_ok.__wrapped__
    rng = random.Random(11)
    regions = ["US", "GB", "IN", "CA", "AU", "NZ", "IE", "ZA", "NG", "PH", "MX", "ES", "CO", "FR", "BE", "CH",
               "DE", "AT", "PT", "AR", "BR", "IT", "JP"]
    seps = [" ", "-", ".", "/", "(", ")", " - ", "\u2013", "\t"]
    cases = []
    for _ in range(6000):
        groups = [str(rng.randrange(10 ** rng.randint(1, 5))).zfill(rng.randint(1, 4)) for _ in range(rng.randint(1, 5))]
        cand = groups[0] + "".join(rng.choice(seps) + g for g in groups[1:])
        cases.append((cand, rng.choice(regions), rng.choice(["valid", "strict_grouping", "exact_grouping"])))
    cases += [("(202) 555-0143", "US", "strict_grouping"), ("030 632606", "DE", "valid"),
              ("0415 645 206", "AU", "valid"), ("011 54 9 11 1234 5678", "AR", "valid")]
    screened = [c for c in cases if not ph.national_suffix_possible(c[0], c[1])]
    assert len(screened) > 1000  # the screen does work on such input
    with_screen = [full_ok(*c) for c in cases]
    monkeypatch.setattr(ph, "national_suffix_possible", lambda cand, region: True)
    assert [full_ok(*c) for c in cases] == with_screen
    assert any(with_screen)


def test_the_national_screen_leaves_what_parsing_may_rewrite() -> None:
    from corpus_dagster.scrub.phones import national_suffix_possible

    assert not national_suffix_possible("0 -1 409.841003", "US")  # a table row: no valid 10-digit suffix
    assert national_suffix_possible("202-555-0143", "US")
    assert national_suffix_possible("0 -1 409.841003", "AR")  # a transform rule may rewrite the digits
    assert national_suffix_possible("0 -1 409.841003", "BR")
    assert national_suffix_possible("555-0143 x12", "US")  # an extension: left to libphonenumber
    assert national_suffix_possible("+1 409.841003", "US")  # international: left to libphonenumber
