"""The run's deadline, which stops while a person is being asked to approve a call.

A run's timeout bounds what the guest and its calls cost; it must not end a run
because a person took a minute to read an approval question. The broker holds a call
for approval inside `RunClock.hold()`; while any hold is open the deadline moves
forward with the clock, so the time left is frozen, and when the last hold closes the
deadline stays extended by the time spent waiting. Each wait is bounded on its own (the
grant's `approval_timeout_s`), so holds can lengthen a run by at most that much each.

Both the sandbox (its host-side waits and the epoch deadline of the guest's Store) and
the broker (its upstream timeouts) read the same clock, which is why it lives outside
both rooms: it is plain bookkeeping, knowing nothing about grants or WebAssembly.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class RunClock:
    """`deadline()` is start + timeout + the time any call spent held for approval."""

    def __init__(self, timeout_s: float, *, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._end = now() + timeout_s
        self._lock = threading.Lock()
        self._holds = 0
        self._held_since = 0.0
        self._held_total = 0.0
        self._ended_at: float | None = None

    def deadline(self) -> float:
        """The run's end on the `time.monotonic()` clock, as of now."""
        with self._lock:
            if self._ended_at is not None:
                return self._ended_at
            extra = self._held_total
            if self._holds:
                extra += self._now() - self._held_since
            return self._end + extra

    def end(self) -> float:
        """End the run now (its operator interrupted it): the deadline is now and no hold
        moves it again. Returns how long the run had left, which the caller needs to move
        the engine's epoch past the guest's own deadline."""
        with self._lock:
            now = self._now()
            if self._ended_at is not None:
                return 0.0
            extra = self._held_total + (now - self._held_since if self._holds else 0.0)
            deadline = self._end + extra
            self._ended_at = min(now, deadline)  # never later than it was
            return max(0.0, deadline - now)

    @property
    def ended(self) -> bool:
        """Was the run ended early (`end`)?"""
        with self._lock:
            return self._ended_at is not None

    @property
    def held_s(self) -> float:
        """Seconds the run has spent with at least one call held (so far)."""
        with self._lock:
            extra = self._now() - self._held_since if self._holds else 0.0
            return self._held_total + extra

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Stop the run's clock for as long as the block runs (holds may overlap)."""
        with self._lock:
            if self._holds == 0:
                self._held_since = self._now()
            self._holds += 1
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1
                if self._holds == 0:
                    self._held_total += self._now() - self._held_since


__all__ = ["RunClock"]
