"""Frozen dataclass records made in hot loops without their generated `__init__`.

A frozen dataclass's `__init__` sets each field through `object.__setattr__`, one call
per field. Deriving GitHub's document makes about 6,000 small frozen records (its 1,222
operations, their parameters, allow entries and permits), and a sampling profile
put a quarter of that phase in those `__init__`s. `make` gives the new instance the
caller's dict (a literal at each call site, used by nothing else) as its `__dict__` in
one call instead; the records stay frozen (assignment still raises).

Only for classes whose `__init__` does nothing else (no `__post_init__`, `InitVar` or
`__slots__`), and the caller passes every field: a default is not filled in.
tests/specgen/test_frozen_records.py compares every record made this way with what the
class's own `__init__` makes from the same fields.

Which kind of immutable record the generator uses, and why (the one place this is said):
- A NamedTuple for a record made once or a few thousand times: Python 3.11 builds a
  frozen dataclass at every import, its methods compiled from source, five to seven
  times slower than a NamedTuple (about 0.5 ms each), and every `specgen` command pays it.
- A frozen dataclass built through `make` for the records made and read in the hottest
  loops (Operation, Parameter, Route, Permit, AllowEntry): an instance attribute reads
  in about half the time of a NamedTuple field.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_new = object.__new__
_set = object.__setattr__


def make(cls: type[T], fields: dict[str, Any], /) -> T:
    """An instance of the frozen dataclass `cls` whose `__dict__` is `fields` (a fresh
    dict naming every field; keyword arguments would cost a second dict per record)."""
    record = _new(cls)
    _set(record, "__dict__", fields)
    return record
