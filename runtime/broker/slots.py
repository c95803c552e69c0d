"""The broker's send slots: at most MAX_IN_FLIGHT calls of one run on the wire at once.

Why not `threading.BoundedSemaphore`: ending a run must wait for every slot, and a
semaphore can only be drained one acquire at a time, sixteen of them for every run
(about 35 us, more than the rest of a broker's set-up). Here one wait under the same
condition takes every free slot at once.
"""

from __future__ import annotations

import threading
import time


class Slots:
    """`size` slots; `take` one per call on the wire, `drain` all of them at the end."""

    __slots__ = ("_cond", "_free", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._free = size
        self._cond = threading.Condition(threading.Lock())

    def take(self, timeout: float | None = None) -> bool:
        """One slot: at once when `timeout` is 0, else within `timeout` seconds (None:
        however long it takes). False when none came free in time."""
        with self._cond:
            if self._free == 0 and (
                timeout == 0 or not self._cond.wait_for(self._any_free, timeout)
            ):
                return False
            self._free -= 1
            return True

    def give(self, count: int = 1) -> None:
        """Give back `count` slots taken with `take` or `drain`."""
        with self._cond:
            if self._free + count > self._size:
                raise ValueError("more slots given back than were taken")
            self._free += count
            # Everyone waiting re-checks: a drain waits for all slots, a take for one.
            self._cond.notify_all()

    def drain(self, timeout: float) -> int:
        """Wait up to `timeout` seconds for every slot to be free, then take all the free
        ones (every slot, unless some call still held one at the end): how many."""
        stop = time.monotonic() + timeout
        with self._cond:
            while self._free < self._size:
                left = stop - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    break
            taken, self._free = self._free, 0
            return taken

    def _any_free(self) -> bool:
        return self._free > 0
