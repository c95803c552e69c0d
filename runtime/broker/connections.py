"""Keep-alive connections shared by the runs of one profile in one process.

Each run's broker used to open its own connection pool, so every run's first call paid
a TCP (and TLS) handshake. A process that runs many (a RunPool worker, the MCP server)
now keeps one pool per profile here and gives each run's transport a view of it
(`DeadlineTransport(pool=...)`): the run's deadline still bounds every socket operation,
its abort() still ends only its own calls, and its client, cookie jar and headers stay
its own. The guest never sees any of it: the pool lives in the broker, which only sends
what the policy approved.

What a connection carries between runs is a socket to the profile's origin and nothing
else: HTTP/1.1 sends every request's headers afresh, the jar keeps no cookie, and a
response not read to its end closes its connection instead of returning it. A pool is
for one profile exactly as loaded, at one base URL: when the same name and base URL come
with another profile (the grants file was loaded again), the old pool is closed and a
new one made, so no connection outlives the grant it was opened for. A forked child starts with
none (a socket shared by two processes would interleave their requests).
"""

from __future__ import annotations

import os
import threading

import httpcore

from runtime.broker.grants import Profile
from runtime.broker.transport import connection_pool

#: Seconds an idle connection is kept: under the shortest idle timeout common servers
#: use (node's 5 s; nginx 75 s), so a request rarely meets a connection the server is
#: closing at that moment (one it has already closed is never handed out).
KEEPALIVE_S = 4.0

_lock = threading.Lock()
#: By (profile name, base URL): a profile run with and without `--base-url` keeps a
#: pool for each origin instead of closing one for the other.
_pools: dict[tuple[str, str], tuple[Profile, httpcore.ConnectionPool]] = {}


def pool_for(profile: Profile, max_connections: int) -> httpcore.ConnectionPool:
    """The process's pool for `profile`, made on first use; a changed profile of the
    same name and base URL (the grants file loaded again) closes the old one first."""
    key = (profile.name, profile.base_url)
    with _lock:
        held = _pools.get(key)
        if held is not None and (held[0] is profile or held[0] == profile):
            return held[1]
        pool = connection_pool(max_connections, KEEPALIVE_S)
        _pools[key] = (profile, pool)
    if held is not None:
        held[1].close()
    return pool


def close_all() -> None:
    """Close every pool (a server reloading its grants, or tests)."""
    with _lock:
        held = list(_pools.values())
        _pools.clear()
    for _, pool in held:
        pool.close()


def _forget_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _pools.clear()  # the parent's sockets: never used, never closed, from the child


os.register_at_fork(after_in_child=_forget_in_child)

__all__ = ["KEEPALIVE_S", "close_all", "pool_for"]
