"""Two rules about a grant's origins that both the loader (runtime/broker/grants.py) and
`grant init` (specgen/grant_init.py) apply, kept here once: the generator never imports
the runtime, and the runtime may import the generator.
"""

from __future__ import annotations

import ipaddress


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


__all__ = ["is_loopback", "read_alike_by_httpx"]
