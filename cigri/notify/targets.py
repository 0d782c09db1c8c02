"""Where a webhook may point: public addresses, and the networks the site allows.

A webhook is a URL a user chooses and cigri's own account calls. Pointed at loopback, a private
network or a cloud's metadata service (169.254.169.254), it would let any user reach, and probe,
what only the grid's host can. So every address the target's host resolves to must be a public
(global unicast) address or inside one of ``notify.webhook_allow``'s networks, checked when the
subscription is made and again at each delivery, since a name may resolve elsewhere by then. The
address is the one the system's resolver gives, so every spelling of a host (``0x7f000001``,
``2130706433``, ``localhost``, ``[::ffff:127.0.0.1]``) is judged by where it really leads, and
the delivery connects to exactly that checked address (:mod:`cigri.notify.senders`).
"""

from __future__ import annotations

import ipaddress
import socket
from functools import cache
from typing import TYPE_CHECKING

from cigri.errors import Refused

if TYPE_CHECKING:  # httpx is for the delivery; every command in direct mode imports this module
    import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class TargetRefused(Refused):
    """The webhook's host leads to an address the site does not allow."""


@cache
def networks(allow: tuple[str, ...]) -> tuple[Network, ...]:
    """``notify.webhook_allow`` parsed (the configuration checked each one already)."""
    return tuple(ipaddress.ip_network(network) for network in allow)


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to (mapped, 6to4, NAT64, compatible), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped or address.sixtofour:
        return address.ipv4_mapped or address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def allowed(address: Address, allow: tuple[str, ...]) -> bool:
    """Inside an allowed network, or public: not loopback, link-local, private, shared,
    reserved, documentation or multicast, whichever way an IPv6 address embeds it."""
    embedded = _embedded_ipv4(address)
    if any(candidate in network for candidate in (address, embedded) if candidate is not None
           for network in networks(allow)):
        return True
    target = embedded or address
    return target.is_global and not target.is_multicast


def resolve(url: httpx.URL) -> list[Address]:
    """Every address the URL's host resolves to now (raises OSError when it does not)."""
    port = url.port or (443 if url.scheme == "https" else 80)
    found = socket.getaddrinfo(url.raw_host.decode("ascii"), port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(entry[4][0]) for entry in found))


def check(addresses: list[Address], allow: tuple[str, ...]) -> list[Address]:
    """``addresses`` if every one is allowed; else :class:`TargetRefused`."""
    refused = [address for address in addresses if not allowed(address, allow)]
    if refused:
        raise TargetRefused(f"webhook URL: leads to {refused[0]}, a loopback, link-local, private or reserved "
                            "address; this site sends webhooks to public addresses only (and to the networks "
                            "in notify.webhook_allow)")
    return addresses
