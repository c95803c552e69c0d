"""A value made from some objects, found again by those objects' identity.

Why: a profile hands every run the same allow tuple and preamble string, and what is
made from them (a run's prelude, a grant's key for an engine process) costs a walk over
a thousand routes or a hash of 0.3 MB when looked up by value. Looked up by identity it
costs a few `id()` calls. Each entry holds its objects, so no id it was keyed by can be
reused by another object while it is kept; the least recently used go past `size`.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """At most `size` values, each by the identity of the objects it was made from."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple[int, ...], tuple[tuple[object, ...], T]] = (
            collections.OrderedDict()
        )

    def get(self, parts: tuple[object, ...], make: Callable[[], T]) -> T:
        """The value made from exactly these objects, `make()` the first time. Only for
        objects that cannot change (a tuple, a str): a changed one would keep its value."""
        key = tuple(map(id, parts))
        with self._lock:
            held = self._entries.get(key)
            if held is not None and all(a is b for a, b in zip(held[0], parts, strict=True)):
                self._entries.move_to_end(key)
                return held[1]
        value = make()
        with self._lock:
            self._entries[key] = (parts, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)
