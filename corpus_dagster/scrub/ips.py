"""IP detector: IPv4 dotted quads and IPv6 addresses, validated by `ipaddress`, filtered by range and context.

Ranges (config): private (RFC 1918, CGNAT, link-local, IPv6 ULA) are redacted by default; loopback and
the documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20) are
kept by default; non-host addresses (0.0.0.0, `::`, multicast, 240.0.0.0/4 such as the netmask
255.255.255.0, broadcast) identify nobody and are kept unless `redact_reserved`; so are the well-known
service addresses listed in `keep_addresses` (public DNS resolvers, the textbook `1.2.3.4`). A network address written
as a CIDR block (`10.0.0.0/8`) names a range, not a host, and is kept. Dotted quads after a version word
(`version 1.2.3.4`, `build`, `release` ...) or inside a longer dotted run (`1.2.3.4.5`) are versions.
"""

from __future__ import annotations

import ipaddress
import re
from bisect import bisect_right
from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from corpus_dagster.core.settings import PiiIpsSettings
from corpus_dagster.scrub.context import version_context
from corpus_dagster.scrub.prescreen import Anchored, windows
from corpus_dagster.scrub.spans import Bytes, Regions

_V4 = re.compile(r"(?<![\w.\-])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![\w\-]|\.[0-9])")
_V6 = re.compile(
    r"(?<![\w:.%])(?=[0-9A-Fa-f]{0,4}:)(?:[0-9A-Fa-f]{0,4}:){2,7}"
    r"(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?(?:%[\w.]{1,16})?(?![\w:]|\.[0-9])"
)
_TWO_GROUPS = re.compile(r":[0-9A-Fa-f]{0,4}:")  # two colons with at most a group between
_CIDR = re.compile(r"/([0-9]{1,3})(?![0-9])")
_VERSION_AFTER = re.compile(r"(?i)[\s(]*(?:release|build|beta|alpha|rc[0-9]*|final|lts|tag|branch|version|patch|update)\b")
_DOC_NETS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20")
)

IP_REGIONS = {
    "ips4": r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}",
    "ips6": r"[0-9A-Fa-f]{3}:",
}
"""Rust-regex regions: dotted quads; three hex digits before a colon, which every IPv6 address the detector
accepts holds except `::1:abcd`-like forms whose only long group is the last, and full forms whose every
group has one or two digits (both rare in text, and cheaper to miss than to scan every `::` in C++ code)."""

_HEX_BYTE = np.zeros(257, bool)  # by byte + 1, so -1 (outside the text) reads False
_HEX_BYTE[[ord(c) + 1 for c in "0123456789abcdefABCDEF"]] = True


def _hex_before_colon(colon: Bytes) -> tuple[np.ndarray, int, int]:
    """The `ips6` matches from the `:` bytes: three hex digits right before a colon. A match ends at its
    colon, so each colon gives at most one and they never overlap: the regex's matches exactly."""
    ok = np.flatnonzero(_HEX_BYTE[colon.at(-1) + 1])  # most colons end a word: test the rest on the others
    near = colon.take(ok)
    ok = ok[_HEX_BYTE[near.at(-2) + 1] & _HEX_BYTE[near.at(-3) + 1]]
    hit = np.zeros(len(colon), bool)
    hit[ok] = True
    return hit, -3, 1


IP_ANCHORED = {"ips6": Anchored(IP_REGIONS["ips6"], ":", (-3, 0), _hex_before_colon)}
"""IPv6 regions found from the colons (api._Plan.anchored)."""

IP_SPARSE = frozenset({"ips4"})
"""Dotted quads are rare in most text (prescreen.locate's sparse)."""


# IPv4 categories as sorted integer ranges (first match wins by the order of _V4_TABLE): ipaddress's
# is_private walks a list of networks per call, ten times slower than a bisect.
_V4_TABLE = (
    ("loopback", "127.0.0.0/8"),
    ("documentation", "192.0.2.0/24"), ("documentation", "198.51.100.0/24"), ("documentation", "203.0.113.0/24"),
    ("reserved", "0.0.0.0/32"), ("reserved", "224.0.0.0/4"), ("reserved", "240.0.0.0/4"),
    ("private", "0.0.0.0/8"), ("private", "10.0.0.0/8"), ("private", "100.64.0.0/10"),
    ("private", "169.254.0.0/16"), ("private", "172.16.0.0/12"), ("private", "192.0.0.0/24"),
    ("private", "192.168.0.0/16"), ("private", "198.18.0.0/15"),
)


def _v4_ranges() -> tuple[list[int], list[tuple[int, str]]]:
    """Disjoint (start, end, category) integer ranges from _V4_TABLE, earlier rows winning overlaps."""
    owner: dict[int, str] = {}
    cuts = {0, 1 << 32}
    nets = [(c, ipaddress.ip_network(n)) for c, n in _V4_TABLE]
    for _, net in nets:
        cuts.update({int(net.network_address), int(net.broadcast_address) + 1})
    bounds = sorted(cuts)
    for lo in bounds[:-1]:
        owner[lo] = next((c for c, net in nets if ipaddress.IPv4Address(lo) in net), "public")
    return bounds[:-1], [(lo, owner[lo]) for lo in bounds[:-1]]


_V4_STARTS, _V4_OWNERS = _v4_ranges()


def ip_category(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """One of loopback, documentation, reserved (non-host), private, public: what the config decides on."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return _V4_OWNERS[bisect_right(_V4_STARTS, int(ip)) - 1][1]
    if ip.is_loopback:
        return "loopback"
    if any(ip in net for net in _DOC_NETS if net.version == ip.version):
        return "documentation"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved:
        return "reserved"
    if ip.is_private or ip.is_link_local:
        return "private"
    return "public"


def _redact(category: str, cfg: PiiIpsSettings) -> bool:
    """Whether the config redacts addresses of this category (public addresses always)."""
    return category == "public" or bool(getattr(cfg, f"redact_{category}", False))


@lru_cache(maxsize=16)
def _keep_set(addresses: tuple[str, ...]) -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The configured well-known addresses, parsed once."""
    return frozenset(ipaddress.ip_address(a) for a in addresses)


def _kept(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, cfg: PiiIpsSettings) -> bool:
    """True for a configured well-known address (public DNS resolvers, the textbook 1.2.3.4)."""
    return ip in _keep_set(tuple(cfg.keep_addresses))


def _v6_shape_ok(cand: str) -> bool:
    """Reject code that parses as IPv6 (`a::b`, `x[10::2]`): need two groups and one of 3+ hex digits."""
    groups = [g for g in cand.split("%")[0].split(":") if g]
    if "::" not in cand:
        return True
    return len(groups) >= 2 and any(len(g) >= 3 for g in groups)


def _network_block(text: str, end: int, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True when `ip` is followed by `/n` and is that block's network address (a range, not a host)."""
    m = _CIDR.match(text, end)
    if not m:
        return False
    try:
        net = ipaddress.ip_network(f"{ip}/{m.group(1)}", strict=False)
    except ValueError:
        return False
    return net.network_address == ip and net.prefixlen < ip.max_prefixlen


def _v4_candidates(text: str, regions: Regions) -> Iterator[re.Match[str]]:
    """Dotted-quad matches inside the regions, with room for the boundary look-arounds."""
    for lo, hi in windows(regions, 2, 3, len(text)):
        yield from _V4.finditer(text, lo, hi)


def _v6_candidates(text: str, regions: Regions) -> Iterator[re.Match[str]]:
    """IPv6 matches around the regions (an address with a zone id spans at most ~60 characters)."""
    for lo, hi in windows(regions, 64, 64, len(text)):
        if _TWO_GROUPS.search(text, lo, hi):  # in every match: most windows (`bpo-43521:`) have none
            yield from _V6.finditer(text, lo, hi)


def find_ips(text: str, cfg: PiiIpsSettings, context_chars: int, regions: dict[str, Regions]) -> list[tuple[int, int]]:
    """Spans of IPv4/IPv6 addresses that the scrub replaces with `<IP>`."""
    spans: list[tuple[int, int]] = []
    for m in _v4_candidates(text, regions["ips4"]):
        try:
            ip = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if cfg.skip_version_context and (
            version_context(text, m.start(), context_chars) or _VERSION_AFTER.match(text, m.end())
        ):
            continue
        if _redact(ip_category(ip), cfg) and not _network_block(text, m.end(), ip) and not _kept(ip, cfg):
            spans.append(m.span())
    if cfg.ipv6:
        for m in _v6_candidates(text, regions["ips6"]):
            cand = m.group()
            if not _v6_shape_ok(cand):
                continue
            try:
                ip6 = ipaddress.IPv6Address(cand.split("%")[0])
            except ValueError:
                continue
            if _redact(ip_category(ip6), cfg) and not _network_block(text, m.end(), ip6) and not _kept(ip6, cfg):
                spans.append(m.span())
    spans.sort()
    return spans
