"""Card detector: Luhn, issuer prefixes and groupings, and the long numbers that are not cards."""


import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii
from corpus_dagster.scrub.cards import TEST_NUMBERS, known_issuer, luhn_ok


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    """The default config with the published test numbers redacted too: the detector tests below use them."""
    return pii_settings({"cards": {"keep_test_numbers": False}})


def cards(text: str, cfg: PiiSettings) -> list[str]:
    return [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "cards"]


def test_luhn_and_issuer_tables() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert luhn_ok("79927398713")
    assert known_issuer("4111111111111111")  # Visa 16
    assert known_issuer("378282246310005")  # Amex 15
    assert not known_issuer("37828224631000")  # Amex with 14 digits
    assert known_issuer("2221000000000009")  # Mastercard 2-series
    assert not known_issuer("9780306406157")  # ISBN-13 prefix
    assert not known_issuer("1234567890123456")


@pytest.mark.parametrize(
    "number",
    [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "5555 5555 5555 4444",
        "3782 822463 10005",
        "30569309025904",
        "6011 1111 1111 1117",
        "3530 1113 3330 0000",
        "4222222222222",
    ],
)
def test_cards_are_found(number: str, cfg: PiiSettings) -> None:
    assert cards(f"Card number: {number} exp 04/27", cfg) == [number]


def test_trailing_group_is_dropped_when_only_the_prefix_is_a_card(cfg: PiiSettings) -> None:
    assert cards("paid with 4111 1111 1111 1111 2 times", cfg) == ["4111 1111 1111 1111"]


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # Luhn fails
        "1234 5678 9012 3456",  # no issuer
        "4111 1111-1111 1111",  # mixed separators
        "4111 11111 111 1111",  # not a card grouping
        "timestamp 1700000000000",
        "ISBN-13: 9780306406157",
        "IMEI 35-209900-176148-1",
        "EAN 4006381333931",
        "IBAN DE89 3704 0044 0532 0130 00",
        "$4,111,111,111,111.00",
        "price 4111111111111111.50",
        "order 4111111111111111",  # an id cue before a bare run
        "tracking number 9400 1000 0000 0000 0000 00",
    ],
)
def test_numbers_that_are_not_cards_stay(text: str, cfg: PiiSettings) -> None:
    assert cards(text, cfg) == []


def test_card_cue_beats_id_cue_and_disable(cfg: PiiSettings) -> None:
    assert cards("order 17 paid by card 4111111111111111", cfg) == ["4111111111111111"]
    assert cards("CC#4111111111111111 exp 04/27", cfg) == ["4111111111111111"]  # `#` after a payment word
    assert cards("CC # 4111111111111111", cfg) == ["4111111111111111"]
    assert cards("Ref #4111111111111111", cfg) == []  # `#` after anything else is an id cue
    assert cards("Refund the amount to 4556737586899855 today", cfg) == ["4556737586899855"]
    assert cards("the amount to 4556737586899855 today", cfg) == []  # the id cue alone
    assert cards("billing: invoice 5351328804012218", cfg) == ["5351328804012218"]
    off = pii_settings({"cards": {"enabled": False}})
    assert cards("4111 1111 1111 1111", off) == []


@pytest.mark.parametrize("number", ["4111 1111 1111 1111", "4242424242424242", "5555-5555-5555-4444",
                                    "378282246310005", "6011111111111117", "3530111333300000"])
def test_published_test_numbers_are_kept_by_default(number: str) -> None:
    text = f"In test mode use the card {number} with any CVC and a future date."
    assert cards(text, pii_settings()) == []
    off = pii_settings({"cards": {"keep_test_numbers": False}})
    assert cards(text, off) == [number]


def test_test_number_table_holds_only_valid_card_numbers() -> None:
    assert all(luhn_ok(n) and known_issuer(n) for n in TEST_NUMBERS)
    assert cards("card 4556 7375 8689 9855", pii_settings()) == ["4556 7375 8689 9855"]  # not a test number
