"""The rules for a grant's origins, which both the loader (runtime/broker/grants.py) and
`grant init` (specgen/grant_init.py) apply, kept here once so a draft grant init writes
is one the loader takes: the generator never imports the runtime, and the runtime may
import the generator. Each side words a fault its own way (the loader keeps the
reference's texts); the verdict is this module's.
"""

from __future__ import annotations

import ipaddress
from enum import Enum
from urllib.parse import urlsplit

#: The port of a loopback override origin that stands for any port.
ANY_PORT = "*"


class OriginFault(Enum):
    """Why a text cannot be a grant's origin, in the order `origin_fault` looks."""

    EMPTY = "empty"
    NOT_A_URL = "not a URL with a host"
    SCHEME = "scheme is not http or https"
    PLAIN_HTTP = "plain http for a host that is not loopback"
    NOT_AN_ORIGIN = "more than scheme, host and port"
    ANY_PORT_NOT_LOOPBACK = "port * for a host that is not loopback"


def origin_fault(url: str, *, any_port: bool = False) -> OriginFault | None:
    """Why `url` cannot be a grant's origin (http(s)://host[:port], https unless the host
    is loopback), or None. With `any_port`, a loopback origin may end in `:*` (an
    override for a fake on an ephemeral port)."""
    if not url:
        return OriginFault.EMPTY
    wildcard = any_port and url.endswith(":" + ANY_PORT)
    if wildcard:
        url = url[: -len(ANY_PORT)] + "1"
    if not encodable(url) or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        return OriginFault.NOT_A_URL
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return OriginFault.NOT_A_URL
    if not parts.hostname or not read_alike_by_httpx(url, parts.hostname, parts.port):
        return OriginFault.NOT_A_URL
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return OriginFault.SCHEME
    if scheme == "http" and not is_loopback(parts.hostname):
        return OriginFault.PLAIN_HTTP
    if "@" in parts.netloc or parts.path or parts.query or parts.fragment:
        return OriginFault.NOT_AN_ORIGIN
    if "?" in url or "#" in url:
        return OriginFault.NOT_AN_ORIGIN
    if wildcard and not is_loopback(parts.hostname):
        return OriginFault.ANY_PORT_NOT_LOOPBACK
    return None


def encodable(s: str) -> bool:
    """Whether `s` is valid UTF-8 text (no lone surrogate, as JSON may carry)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address: where plain http and port `*` are allowed."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_alike_by_httpx(url: str, hostname: str, port: int | None) -> bool:
    """Does httpx, which the broker sends with, read the same host and port as urlsplit,
    which the rules were checked on? A URL the two parse differently (or httpx cannot
    parse at all, e.g. a bad IDNA label) must be refused when it is written or loaded,
    not when a run starts."""
    import httpx  # the broker's HTTP stack; imported here to keep grant loading light

    try:
        parsed = httpx.URL(url)
        _ = parsed.host  # decodes IDNA labels: a bad one raises here
        raw_host = parsed.raw_host.decode("ascii").lower()
        parsed_port = parsed.port
    except Exception:
        return False
    if hostname.isascii() and raw_host != hostname.lower():
        return False  # a non-ASCII name is IDNA-encoded by httpx; loopback names are ASCII
    default = {"http": 80, "https": 443}.get(parsed.scheme)
    return (parsed_port or default) == (port or default)


__all__ = [
    "ANY_PORT",
    "OriginFault",
    "encodable",
    "is_loopback",
    "origin_fault",
    "read_alike_by_httpx",
]
