"""The backpressure breaker: after an upstream says "slow down", stop sending for a while.

Why: a guest in a loop that keeps calling an API answering 429 or 503 turns an outage
or an exhausted quota into a flood under the operator's key. As in the reference, the
breaker is closed until a DELIVERED upstream 429 or 503 opens it for a cooldown taken
from `Retry-After` (integer seconds, sign allowed, or an HTTP date; absent or unreadable
is 1 s; always clamped to [1 s, 30 s]). While open, every permitted call is shed with
503 `host api is shedding load: upstream reported degraded`, never sent. When the
profile has a `health_check` and the window is not a quota window (no 429 opened it),
one caller at most once a second is elected to probe the health route instead: a 2xx
clears the breaker and that call proceeds; anything else reopens the window with the
probe's own Retry-After. A quota (429) window is never probed: the quota will not come
back sooner because the API says it is healthy. Once the window ends the breaker closes
by itself.

Time is real monotonic time (a guest's virtual clock must not shorten a cooldown);
tests inject `clock` and `wall` instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

#: Cooldown when Retry-After is absent or unreadable, and the shortest one (seconds).
DEFAULT_COOLDOWN_S = 1.0
#: The longest cooldown, whatever Retry-After says (seconds).
MAX_COOLDOWN_S = 30.0
#: At most one health probe per this interval (seconds).
PROBE_INTERVAL_S = 1.0
#: A health probe's own timeout (seconds).
PROBE_TIMEOUT_S = 2.0

#: Upstream statuses that open the breaker when delivered to the guest.
OPENING_STATUSES = frozenset({429, 503})

#: A probe: sends GET origin+health path and returns (status, Retry-After or None);
#: status 0 when no reply arrived.
Probe = Callable[[], tuple[int, str | None]]


def cooldown(retry_after: str | None, *, wall: Callable[[], float] = time.time) -> float:
    """Seconds to wait for one `Retry-After` value (RFC 9110 section 10.2.3), clamped."""
    if retry_after is None:
        return DEFAULT_COOLDOWN_S
    text = retry_after.strip()
    seconds: float
    digits = text[1:] if text[:1] in "+-" else text
    if digits and digits.isascii() and digits.isdigit():
        # Huge integers are simply "the longest"; a negative one is "now".
        seconds = float(min(int(text), int(MAX_COOLDOWN_S)))
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return DEFAULT_COOLDOWN_S
        if when.tzinfo is None:
            return DEFAULT_COOLDOWN_S  # an HTTP date is always GMT; anything else is not one
        seconds = when.timestamp() - wall()
    return min(MAX_COOLDOWN_S, max(DEFAULT_COOLDOWN_S, seconds))


class Breaker:
    """One run's breaker; thread-safe. `admit` before sending, `observe` after delivery."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._until: float | None = None
        self._quota = False
        self._last_probe: float | None = None

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._open_now(self._clock())

    def observe(self, status: int, retry_after: str | None) -> None:
        """A reply was delivered to the guest: a 429 or 503 opens (or extends) the window."""
        if status in OPENING_STATUSES:
            self._open(cooldown(retry_after, wall=self._wall), quota=status == 429)

    def admit(self, probe: Probe | None) -> bool:
        """May this call go upstream? False means shed it.

        `probe` is None when the profile has no health route. At most one caller runs
        it (the lock is not held while it runs); the others are shed meanwhile.
        """
        with self._lock:
            now = self._clock()
            if not self._open_now(now):
                return True
            if probe is None or self._quota:
                return False
            if self._last_probe is not None and now - self._last_probe < PROBE_INTERVAL_S:
                return False
            self._last_probe = now
        try:
            status, retry_after = probe()
        except Exception:
            status, retry_after = 0, None
        if 200 <= status < 300:
            with self._lock:
                self._until, self._quota = None, False
            return True
        self._open(cooldown(retry_after, wall=self._wall), quota=False)
        return False

    def _open_now(self, now: float) -> bool:
        """Is a window open at `now`? A lapsed one is cleared (the breaker closes itself)."""
        if self._until is not None and now >= self._until:
            self._until, self._quota = None, False
        return self._until is not None

    def _open(self, seconds: float, *, quota: bool) -> None:
        with self._lock:
            now = self._clock()
            self._open_now(now)
            end = now + seconds
            self._until = end if self._until is None else max(self._until, end)
            self._quota = self._quota or quota


__all__ = [
    "DEFAULT_COOLDOWN_S",
    "MAX_COOLDOWN_S",
    "OPENING_STATUSES",
    "PROBE_INTERVAL_S",
    "PROBE_TIMEOUT_S",
    "Breaker",
    "Probe",
    "cooldown",
]
