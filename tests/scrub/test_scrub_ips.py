"""IP detector: IPv4/IPv6 validated by ipaddress, range policy, versions and code that parses as IPv6."""

import ipaddress

import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import find_pii
from corpus_dagster.scrub.ips import ip_category


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def ips(text: str, cfg: PiiSettings) -> list[str]:
    return [text[s:e] for kind, s, e in find_pii(text, cfg) if kind == "ips"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Failed password for root from 61.177.172.13 port 22", ["61.177.172.13"]),
        ("host 52.14.200.7.", ["52.14.200.7"]),
        ("server 10.0.0.1:8080", ["10.0.0.1"]),
        ("iface 192.168.1.17/24", ["192.168.1.17"]),
        ("host route 52.94.76.10/32", ["52.94.76.10"]),
        ("peer 100.64.3.9 (CGNAT)", ["100.64.3.9"]),
        ("inet6 2a03:2880:f12f:83:face:b00c:0:25de", ["2a03:2880:f12f:83:face:b00c:0:25de"]),
        ("http://[2a00:1450:4001:82a::200e]:443/", ["2a00:1450:4001:82a::200e"]),
        ("link fe80::1ff:fe23:4567:890a%eth0 up", ["fe80::1ff:fe23:4567:890a%eth0"]),
        ("mapped ::ffff:93.184.216.34", ["::ffff:93.184.216.34"]),
        ("XFF: 203.0.114.9, 198.51.99.2", ["203.0.114.9", "198.51.99.2"]),
    ],
)
def test_addresses_are_found(text: str, expected: list[str], cfg: PiiSettings) -> None:
    assert ips(text, cfg) == expected


def test_categories() -> None:
    cat = {a: ip_category(ipaddress.ip_address(a)) for a in
           ["127.0.0.1", "::1", "192.0.2.1", "2001:db8::1", "0.0.0.0", "255.255.255.0", "224.0.0.251",
            "10.1.2.3", "169.254.1.1", "fd12::1", "52.14.200.7"]}
    assert cat == {"127.0.0.1": "loopback", "::1": "loopback", "192.0.2.1": "documentation",
                   "2001:db8::1": "documentation", "0.0.0.0": "reserved", "255.255.255.0": "reserved",
                   "224.0.0.251": "reserved", "10.1.2.3": "private", "169.254.1.1": "private",
                   "fd12::1": "private", "52.14.200.7": "public"}


def test_range_policy_is_configurable(cfg: PiiSettings) -> None:
    text = "lo 127.0.0.1 doc 192.0.2.10 lan 10.1.2.3 mask 255.255.255.0 pub 52.14.200.7"
    assert ips(text, cfg) == ["10.1.2.3", "52.14.200.7"]
    everything = pii_settings({"ips": {"redact_loopback": True, "redact_documentation": True, "redact_reserved": True}})
    assert ips(text, everything) == ["127.0.0.1", "192.0.2.10", "10.1.2.3", "255.255.255.0", "52.14.200.7"]
    public_only = pii_settings({"ips": {"redact_private": False}})
    assert ips(text, public_only) == ["52.14.200.7"]


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3.4 of the driver",
        "upgraded to 4.3.2.1 last week",
        "Build 10.0.19041.1",
        "(since dpkg 1.15.5.4)",
        "Requires-Dist: fasttext-predict>=0.9.2.4",
        "see section 2.3.1.4",
        "Section\\ 7.8.2.2",
        "1.2.3.4-beta",
        "the 4.19.0.0 tag",
        "v1.2.3.4",
        "1.2.3.4.5",
        "OID 1.3.6.1.4.1.2021",
        "999.1.1.1 and 01.02.03.04",
        "10.0.0.0/8 and 192.168.0.0/16",
    ],
)
def test_versions_sections_and_networks_stay(text: str, cfg: PiiSettings) -> None:
    assert ips(text, cfg) == []


@pytest.mark.parametrize(
    "text",
    ["std::vector<int>", "a::b", "x[10::2]", "12:30:45", "00:1A:2B:3C:4D:5E", "Vec::<u8>::new()", "ff02::1",
     "fe80::/10", "::1", "2001:db8::1"],
)
def test_code_times_macs_and_special_v6_stay(text: str, cfg: PiiSettings) -> None:
    assert ips(text, cfg) == []


def test_public_addresses_redacted_by_default_unless_kept(cfg: PiiSettings) -> None:
    assert ips("ping 8.8.8.8", cfg) == ["8.8.8.8"]  # default: every public address is redacted
    kept = pii_settings({"ips": {"keep_addresses": ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"]}})
    assert ips("ping 8.8.8.8 or 1.1.1.1 or 2001:4860:4860::8888", kept) == []
    assert ips("ping 8.8.4.4", kept) == ["8.8.4.4"]


def test_version_context_and_v6_switches(cfg: PiiSettings) -> None:
    loose = pii_settings({"ips": {"skip_version_context": False}})
    assert ips("version 52.14.200.7", loose) == ["52.14.200.7"]
    no6 = pii_settings({"ips": {"ipv6": False}})
    assert ips("inet6 2a03:2880:f12f:83:face:b00c:0:25de and 52.14.200.7", no6) == ["52.14.200.7"]
    off = pii_settings({"ips": {"enabled": False}})
    assert ips("52.14.200.7", off) == []
