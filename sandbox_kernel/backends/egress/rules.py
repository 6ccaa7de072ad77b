"""The allowlist of an egress proxy: which destinations a sandbox may reach, by name or address.

Standard library only: the host checks the option with it, and the docker backend's proxy runs
the same source in its container (sent over the container's stream: :mod:`.bootstrap`).
Bad entries raise ``ValueError`` with a one-line message.

An entry is one of::

    pypi.org             a host name, on ports 80 and 443 (HTTP, HTTPS)
    api.example.com:8443 a host name on that port only
    *.example.com        any name under example.com (not example.com itself), ports 80 and 443
    203.0.113.7          an address (IPv4 or IPv6, ``[2001:db8::1]:443`` with a port)
    10.20.0.0/16:443     a network of addresses, optionally on one port

A name is matched after :func:`normalize` (lower case, no trailing dot, IDNA for non-ASCII
names). An address or network entry also lets an allowed name resolve into it when it is
private (RFC 1918, unique local, shared 100.64/10): a name that resolves to a private address
is refused otherwise, so an allowed public name cannot be pointed at the user's own network.
Loopback, link-local (the cloud metadata address 169.254.169.254 among them), multicast,
unspecified and reserved addresses, and the proxy's own addresses and gateways, are refused
whatever the allowlist says.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

DEFAULT_PORTS = (80, 443)
"""The ports of an entry that names none: plain HTTP and HTTPS."""
SHARED = ipaddress.ip_network("100.64.0.0/10")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def normalize(host: str) -> str:
    """``host`` as the allowlist compares it: lower case, without brackets or a trailing dot,
    non-ASCII labels in IDNA form. Raises ValueError for what cannot be a host name."""
    host = host.strip().strip("[]").rstrip(".").lower()
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{host!r} is not a host name") from None
    return host


def as_address(host: str) -> Address | None:
    """The IP address ``host`` spells (an IPv4-mapped IPv6 address as its IPv4 one), else None."""
    try:
        address = ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def _split_port(text: str) -> tuple[str, int | None]:
    """``("host", port)`` from ``host``, ``host:port``, ``[v6]:port``, ``cidr:port``; an IPv6
    address or network without brackets has no port."""
    if text.startswith("["):
        host, found, rest = text[1:].partition("]")
        if not found:
            raise ValueError(f"{text!r}: expected [ADDRESS] or [ADDRESS]:PORT")
        port = rest[1:] if rest.startswith(":") else ("" if not rest else None)
        if port is None:
            raise ValueError(f"{text!r}: expected [ADDRESS]:PORT")
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if port == "":
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port)


@dataclass(frozen=True)
class Entry:
    """One allowlist entry: a name (``*.`` for any name under a domain) or a network, and its ports."""

    text: str
    name: str | None
    network: Network | None
    ports: tuple[int, ...]

    def allows(self, host: str, address: Address | None, port: int) -> bool:
        if port not in self.ports:
            return False
        if address is not None:
            return self.network is not None and address in self.network
        if self.name is None:
            return False
        if self.name.startswith("*."):
            return host.endswith(self.name[1:])
        return host == self.name


def parse_entry(text: str) -> Entry:
    """One entry (see the module docstring).

    Raises:
        ValueError: it is not a host name, ``*.domain``, address or network, with an optional port.
    """
    stripped = text.strip()
    host, port = _split_port(stripped)
    ports = (port,) if port else DEFAULT_PORTS
    try:
        network = ipaddress.ip_network(host.strip(), strict=False)
    except ValueError:
        network = None
    if network is not None:
        return Entry(stripped, None, network, ports)
    name = normalize(host)
    labels = name[2:].split(".") if name.startswith("*.") else name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or len(name) > 253:
        raise ValueError(f"{text!r} is not a host name (NAME, *.DOMAIN), an address or a network (CIDR), "
                       "with an optional :PORT")
    return Entry(stripped, name, None, ports)


class Allowlist:
    """The entries in force; :meth:`allows` answers for one destination."""

    def __init__(self, entries: list[str]) -> None:
        self.entries = [parse_entry(e) for e in entries]

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host`` (a name or an address) on ``port`` matches an entry."""
        address = as_address(host)
        name = "" if address is not None else normalize(host)
        return any(entry.allows(name, address, port) for entry in self.entries)

    def private_ok(self, address: Address) -> bool:
        """Whether an address or network entry names ``address`` (see the module docstring)."""
        return any(e.network is not None and address in e.network for e in self.entries)

    def forbidden(self, address: Address, own: set[Address]) -> str | None:
        """Why the proxy must not connect to ``address``, resolved from an allowed name (None:
        it may). ``own``: the proxy's own addresses and gateways."""
        if address in own:
            return "an address of the proxy itself or of its gateway"
        if (address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified
                or address.is_reserved):
            return "a loopback, link-local, multicast or reserved address"
        if (address.is_private or address in SHARED) and not self.private_ok(address):
            return "a private address, which only an address or network entry allows"
        return None


def suggestion(host: str, port: int) -> str:
    """The entry that would allow ``host:port``: the name alone for ports 80 and 443."""
    address = as_address(host)
    shown = f"[{address}]" if address is not None and address.version == 6 else (str(address) if address else host)
    return shown if port in DEFAULT_PORTS else f"{shown}:{port}"
