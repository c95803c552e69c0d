"""Quotas that span runs: calls per minute, hour or day, counted across every run,
worker process and replica that shares one store.

A profile's `quotas` (docs/grants.md) are limits over time, where `max_calls` and
`route_max_calls` bound one run. Each limit counts the calls the broker admitted and
is about to send, in fixed windows aligned to the clock (a minute from :00 to :59, an
hour, a UTC day): exact for "20 per minute", and one counter per window, so the store
needs no log of past calls. A call takes one unit from every limit that applies to it,
or from none: a call one limit refuses uses up no other limit's room.

Two stores, chosen by URL (`--quota-store`):

- `sqlite` (the default) or `sqlite:///absolute/path`: a file in the user's state
  folder, one immediate transaction per take, so the worker processes of one machine
  share it.
- `redis://host:port/db` (or `rediss://`): one Lua script per take, atomic on the
  server, for several replicas; counters expire with their window.

A store that cannot be reached refuses the call (fail closed): a quota nobody can
count is not a quota kept. A profile without quotas never opens the store.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from specgen.routes import Route

#: Seconds in each window a quota may name.
WINDOWS = {"minute": 60, "hour": 3600, "day": 86400}
#: Who shares one counter: every caller of the profile, or each caller on its own.
SCOPES = ("profile", "caller")
#: Most calls one limit may allow per window.
MAX_QUOTA_CALLS = 10_000_000
#: Environment variable naming the store when no flag does.
STORE_ENV = "PLIMSOLL_QUOTA_STORE"
#: Seconds a take waits for the store before the call is refused.
STORE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Quota:
    """One limit of a profile: `calls` per `per`, shared `by` the profile or per caller,
    on one route of the allow list or (route None) on all of them together."""

    calls: int
    per: str
    by: str = "profile"
    route: Route | None = None

    @property
    def window_s(self) -> int:
        return WINDOWS[self.per]

    def label(self) -> str:
        """How the operator wrote it, for hints and the audit: never a caller id or a
        path value (the route is the grant's template)."""
        where = f" on {self.route.method} {self.route.path}" if self.route is not None else ""
        return f"{self.calls} per {self.per} by {self.by}{where}"

    def applies(self, route: Route) -> bool:
        return self.route is None or self.route == route

    def key(self, profile: str, caller: str, window_start: int) -> str:
        """The counter's name: the profile, the scope, the route template, the window.
        A caller id is part of it only for `by: caller` quotas."""
        who = caller if self.by == "caller" else "*"
        route = f"{self.route.method} {self.route.path}" if self.route is not None else "*"
        return "\x1f".join(
            ("plimsoll-quota", profile, self.by, who, route, self.per, str(window_start))
        )


@dataclass(frozen=True)
class Taken:
    """The store's answer: taken, with the room each applying quota has left in its
    window (`left`), or refused by `quota` for `retry_after_s` more seconds."""

    ok: bool
    quota: Quota | None = None
    retry_after_s: int = 0
    left: tuple[tuple[Quota, int], ...] = ()


class StoreDown(Exception):
    """The store could not be asked; the call is refused, never sent uncounted."""


class QuotaStore(Protocol):
    def take(self, keys: Sequence[tuple[str, int, int]]) -> tuple[int, tuple[int, ...]]:
        """Take one unit from each (key, limit, ttl seconds) if every one has room.
        Returns (-1, each counter's count after the take) when taken, else (the index
        of the first key with no room left, ()). Raises StoreDown when the store cannot
        answer."""
        ...


def take(
    store: QuotaStore,
    quotas: Sequence[Quota],
    profile: str,
    caller: str,
    route: Route,
    clock: Callable[[], float] = time.time,
) -> Taken:
    """One call's units from every quota that applies to `route`, or a refusal."""
    applying = [q for q in quotas if q.applies(route)]
    if not applying:
        return Taken(True)
    now = clock()
    keys = []
    for quota in applying:
        start = int(now // quota.window_s) * quota.window_s
        # The counter outlives its window a little, so a clock a second behind the
        # store's never finds it gone early.
        keys.append((quota.key(profile, caller, start), quota.calls, quota.window_s + 5))
    refused, used = store.take(keys)
    if refused < 0:
        left = tuple((q, max(0, q.calls - n)) for q, n in zip(applying, used, strict=True))
        return Taken(True, left=left)
    quota = applying[refused]
    end = (int(now // quota.window_s) + 1) * quota.window_s
    return Taken(False, quota, max(1, math.ceil(end - now)))


class SqliteStore:
    """Counters in one SQLite file, for the processes of one machine."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=STORE_TIMEOUT_S, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS quota_counts"
                " (key TEXT PRIMARY KEY, used INTEGER NOT NULL, expires REAL NOT NULL)"
            )
            self._local.db = db
        return db

    def take(self, keys: Sequence[tuple[str, int, int]]) -> tuple[int, tuple[int, ...]]:
        try:
            db = self._db()
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            try:
                for index, (key, limit, _ttl) in enumerate(keys):
                    row = db.execute(
                        "SELECT used FROM quota_counts WHERE key = ? AND expires > ?", (key, now)
                    ).fetchone()
                    if row is not None and row[0] >= limit:
                        db.execute("COMMIT")
                        return index, ()
                used = []
                for key, _limit, ttl in keys:
                    # fetchall steps the upsert to its end, so COMMIT finds no statement
                    # still running.
                    [(count,)] = db.execute(
                        "INSERT INTO quota_counts (key, used, expires) VALUES (?, 1, ?)"
                        " ON CONFLICT(key) DO UPDATE SET"
                        " used = CASE WHEN expires > ? THEN used + 1 ELSE 1 END,"
                        " expires = CASE WHEN expires > ? THEN expires ELSE excluded.expires END"
                        " RETURNING used",
                        (key, now + ttl, now, now),
                    ).fetchall()
                    used.append(int(count))
                db.execute("DELETE FROM quota_counts WHERE expires <= ?", (now,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return -1, tuple(used)
        except (sqlite3.Error, OSError) as exc:
            raise StoreDown(f"quota store {str(self.path)!r}: {type(exc).__name__}") from None


#: KEYS: the counters; ARGV: their limits, then their TTLs. Checks every counter before
#: incrementing any, in one script, so the take is atomic on the server. Returns {-1,
#: each count after the take} or {the index of the full counter}.
_REDIS_TAKE = """
local n = #KEYS
for i = 1, n do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if used >= tonumber(ARGV[i]) then return {i - 1} end
end
local counts = {-1}
for i = 1, n do
  local count = redis.call('INCR', KEYS[i])
  if count == 1 then
    redis.call('EXPIRE', KEYS[i], tonumber(ARGV[n + i]))
  end
  counts[i + 1] = count
end
return counts
"""


class RedisStore:
    """Counters in Redis, for several replicas."""

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self._redis = redis.Redis.from_url(
            url, socket_timeout=STORE_TIMEOUT_S, socket_connect_timeout=STORE_TIMEOUT_S
        )
        self._script: Any = self._redis.register_script(_REDIS_TAKE)

    def take(self, keys: Sequence[tuple[str, int, int]]) -> tuple[int, tuple[int, ...]]:
        import redis

        try:
            first, *counts = self._script(
                keys=[k for k, _, _ in keys],
                args=[limit for _, limit, _ in keys] + [ttl for _, _, ttl in keys],
            )
            return int(first), tuple(int(c) for c in counts)
        except (redis.RedisError, OSError) as exc:
            raise StoreDown(f"quota store {_shown_url(self.url)}: {type(exc).__name__}") from None


def _shown_url(url: str) -> str:
    """The store's address without a password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return repr(f"{parts.scheme}://{host}{port}{parts.path}")


def default_path() -> Path:
    """quotas.sqlite3 in the user's state folder."""
    import platformdirs

    return Path(platformdirs.user_state_path("plimsoll-specgen", appauthor=False)) / (
        "quotas.sqlite3"
    )


class StoreUrlError(ValueError):
    """The store's URL is not one of the forms a store is opened from."""


def check_url(url: str | None) -> None:
    """Refuse a URL `open_store` would not open, before anything starts."""
    text = url or "sqlite"
    if text == "sqlite":
        return
    scheme = urlsplit(text).scheme
    if scheme == "sqlite":
        path = text.removeprefix("sqlite://")
        if not path.startswith("/") or text.count("://") != 1:
            raise StoreUrlError(f"quota store {text!r}: a sqlite store is sqlite:///absolute/path")
        return
    if scheme in ("redis", "rediss", "unix"):
        return
    raise StoreUrlError(
        f"quota store {text!r}: use sqlite, sqlite:///absolute/path or redis://host:port/db"
    )


_opened: dict[str, QuotaStore] = {}
_opened_lock = threading.Lock()


def open_store(url: str | None = None) -> QuotaStore:
    """The store `url` names (None: $PLIMSOLL_QUOTA_STORE, else the default file), one
    per URL per process, so every run of a server shares its connection."""
    text = url or os.environ.get(STORE_ENV) or "sqlite"
    check_url(text)
    with _opened_lock:
        store = _opened.get(text)
        if store is None:
            if text == "sqlite":
                store = SqliteStore(default_path())
            elif text.startswith("sqlite://"):
                store = SqliteStore(Path(text.removeprefix("sqlite://")))
            else:
                store = RedisStore(text)
            _opened[text] = store
        return store


__all__ = [
    "SCOPES",
    "STORE_ENV",
    "WINDOWS",
    "Quota",
    "QuotaStore",
    "RedisStore",
    "SqliteStore",
    "StoreDown",
    "StoreUrlError",
    "Taken",
    "check_url",
    "open_store",
    "take",
]
