"""What firewall source ranges reach, judged by the addresses they cover rather than by how they are written.

One implementation for both sides: components/settings/ refuses such configuration before any cloud
call, and the policy pack reports it in a preview. The pack runs in its own virtualenv and is published
as the policy/ directory alone, so this module lives here and imports only the standard library; the
program imports it as `policy.address_ranges`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Where a VPC's own addresses come from: RFC 1918, RFC 6598 (shared address space) and IPv6 ULA.
PRIVATE_RANGES: tuple[Network, ...] = tuple(ipaddress.ip_network(text) for text in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))
PRIVATE_RANGES_TEXT = ("10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (RFC 1918), 100.64.0.0/10 (RFC 6598) "
                       "or fc00::/7 (IPv6 ULA)")

# IPv4 blocks no host on the internet sends from (IANA special-purpose registry, RFC 6890), pairwise
# disjoint so their overlaps with a range add up.
OFF_INTERNET_IPV4: tuple[ipaddress.IPv4Network, ...] = tuple(ipaddress.IPv4Network(text) for text in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
ALL_PUBLIC_IPV4 = 2**32 - sum(block.num_addresses for block in OFF_INTERNET_IPV4)
# The only IPv6 block IANA hands out for the internet (global unicast).
GLOBAL_UNICAST_IPV6 = ipaddress.IPv6Network("2000::/3")
ALL_PUBLIC_IPV6 = GLOBAL_UNICAST_IPV6.num_addresses
# A dual-stack socket sees IPv4 clients as ::ffff:a.b.c.d, so this block means all of IPv4.
IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")

# More public addresses than one organisation's block is "anyone": a /16 of IPv4 (65,536 addresses,
# a large company or a whole ISP pool) or a /48 of IPv6 (one site). Your address, your office or your
# VPN's egress fits well inside; 0.0.0.0/1, a cloud provider's ranges or ::/0 do not.
WIDEST_IPV4_PREFIX = 16
WIDEST_IPV6_PREFIX = 48
MOST_PUBLIC_IPV4 = 2 ** (32 - WIDEST_IPV4_PREFIX)
MOST_PUBLIC_IPV6 = 2 ** (128 - WIDEST_IPV6_PREFIX)


def parse(text: str) -> Network:
    """A source range as GCP reads it: host bits dropped, '0.0.0.0/00' is '0.0.0.0/0'. Raises ValueError."""
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not a CIDR range; write it like 203.0.113.7/32") from None


def has_host_bits(text: str) -> bool:
    """'203.0.113.7/24' means 203.0.113.0/24: probably a typo for one address."""
    return ipaddress.ip_interface(str(text).strip()).ip != parse(text).network_address


def _pieces(network: Network) -> list[Network]:
    """The range by meaning: IPv4-mapped IPv6 is the IPv4 range it carries."""
    if network.version == 6:
        if network.subnet_of(IPV4_MAPPED):
            address = network.network_address.ipv4_mapped
            return [ipaddress.IPv4Network(f"{address}/{network.prefixlen - 96}")]
        if network.supernet_of(IPV4_MAPPED):
            return [network, ipaddress.IPv4Network("0.0.0.0/0")]
    return [network]


def is_private(network: Network) -> bool:
    """Entirely inside RFC 1918, RFC 6598 or IPv6 ULA space (IPv4-mapped forms included)."""
    return all(any(piece.version == private.version and piece.subnet_of(private) for private in PRIVATE_RANGES)
               for piece in _pieces(network))


def _overlap(network: Network, block: Network) -> int:
    # Two CIDR blocks either nest or do not meet.
    if network.version != block.version or not network.overlaps(block):
        return 0
    return min(network.num_addresses, block.num_addresses)


def public_addresses(networks: Iterable[Network]) -> tuple[int, int]:
    """(public IPv4, public IPv6) addresses the ranges cover together, overlaps counted once."""
    pieces = [piece for network in networks for piece in _pieces(network)]
    ipv4 = list(ipaddress.collapse_addresses(p for p in pieces if p.version == 4))
    ipv6 = list(ipaddress.collapse_addresses(p for p in pieces if p.version == 6))
    public_ipv4 = sum(n.num_addresses - sum(_overlap(n, block) for block in OFF_INTERNET_IPV4) for n in ipv4)
    public_ipv6 = sum(_overlap(n, GLOBAL_UNICAST_IPV6) for n in ipv6)
    return public_ipv4, public_ipv6


def reaching_public(ranges: Iterable[str]) -> tuple[str, ...]:
    """The ranges (as written) that cover at least one public address."""
    return tuple(text for text in ranges if any(public_addresses([parse(text)])))


def _too_many(public_ipv4: int, public_ipv6: int) -> bool:
    return public_ipv4 > MOST_PUBLIC_IPV4 or public_ipv6 > MOST_PUBLIC_IPV6


@dataclass(frozen=True)
class Exposure:
    """Ranges that open a port to the public internet."""

    ranges: tuple[str, ...]
    """The ranges (as written) that do it: one that is enough alone, or every range reaching public addresses."""
    public_ipv4: int
    public_ipv6: int
    """What those ranges cover together."""

    def describe(self) -> str:
        """'0.0.0.0/1 and 128.0.0.0/1 together reach every public IPv4 address'."""
        who = self.ranges[0] + " reaches" if len(self.ranges) == 1 else " and ".join(self.ranges) + " together reach"
        scope = []
        if self.public_ipv4 >= ALL_PUBLIC_IPV4:
            scope.append("every public IPv4 address")
        elif self.public_ipv4 > MOST_PUBLIC_IPV4:
            scope.append(f"{self.public_ipv4:,} public IPv4 addresses (more than a /{WIDEST_IPV4_PREFIX})")
        if self.public_ipv6 >= ALL_PUBLIC_IPV6:
            scope.append("every public IPv6 address")
        elif self.public_ipv6 > MOST_PUBLIC_IPV6:
            scope.append(f"more public IPv6 addresses than a /{WIDEST_IPV6_PREFIX}")
        return f"{who} " + " and ".join(scope)


def internet_exposure(ranges: Iterable[str]) -> Exposure | None:
    """None if the ranges, together, stay within one organisation's share of the internet.

    Raises ValueError for a range that is not CIDR.
    """
    parsed = [(text, parse(text)) for text in ranges]
    together = public_addresses(network for _, network in parsed)
    if not _too_many(*together):
        return None
    # Name one range when it covers all the others add; otherwise every range that reaches the internet.
    alone = next((text for text, network in parsed if public_addresses([network]) == together), None)
    return Exposure((alone,) if alone else reaching_public(text for text, _ in parsed), *together)
