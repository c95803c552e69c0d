"""Per-route caps (`route_max_calls`): "at most 3 calls to remember in a run".

Why apart from the run's budget: `max_calls` bounds a run as a whole, but an operator
often wants a write bounded much tighter than the reads around it. A cap names an allow
entry and a count; the broker charges a call, after the allow match and before anything
is sent, against EVERY capped entry it matches, comparing paths case-insensitively (an
upstream that folds case must not let `/Remember` escape the cap on `/remember`),
regardless of allow order. Charging is all-or-nothing: if one matching cap is full the
call is refused (429) and no cap is charged. Entries that fold to the same (METHOD,
path) share one counter with the tighter limit.

The load-time check refuses a cap an uncapped spelling could bypass: an allow entry of
the same method and shape with `*` where the capped entry has a fixed segment reaches
the capped route's calls through another counter (as the reference does).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from specgen.quoting import go_quote
from specgen.routes import Route, parse_route_line

#: The most calls a cap may allow (the same ceiling as max_calls).
MAX_CAP = 100_000


class CapsError(ValueError):
    """A refused `route_max_calls`, worded to follow `grants: profile "NAME": `."""


@dataclass(frozen=True)
class RouteCaps:
    """The validated caps of one profile: (allow entry, limit) pairs, in key order."""

    entries: tuple[tuple[Route, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    def budget(self) -> CapBudget:
        """A fresh count for one run."""
        return CapBudget(self)


def parse_cap_lines(spec: Any) -> tuple[tuple[Route, Any], ...]:
    """The keys parsed like allow lines (`route_max_calls entry ...`), values unchecked."""
    if not isinstance(spec, dict):
        raise CapsError("route_max_calls must be an object")
    return tuple(
        (parse_route_line(line, "route_max_calls entry"), spec[line]) for line in sorted(spec)
    )


def check_caps(lines: tuple[tuple[Route, Any], ...], allow: tuple[Route, ...]) -> RouteCaps:
    """Validate caps against the allow list (whole-grant validation, after Allow)."""
    allowed = set(allow)
    for route, limit in lines:
        where = f"{route.method} {go_quote(route.path)}"
        if route not in allowed:
            raise CapsError(
                f"host-api grant: RouteMaxCalls names {where}, which is not an entry of Allow"
            )
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_CAP:
            raise CapsError(
                f"host-api grant: RouteMaxCalls for {where} must be between 1 and {MAX_CAP}"
            )
    for route, _ in lines:
        for other in allow:
            if _shadows(other, route):
                raise CapsError(
                    f"host-api grant: RouteMaxCalls caps {route.method} {go_quote(route.path)}, "
                    f"but {other.method} {go_quote(other.path)} matches its calls with a "
                    '"*" in place of a fixed segment, so a call spelled for the wildcard '
                    'alone ("ep1.json" for "ep1") can reach the capped route uncounted; '
                    "move the cap to the wider route, or list the routes it should reach "
                    'instead of the "*"'
                )
    return RouteCaps(tuple((route, limit) for route, limit in lines))


def _shadows(wide: Route, capped: Route) -> bool:
    """Does `wide` reach `capped`'s calls with a `*` where `capped` has a fixed segment?"""
    if wide.method != capped.method:
        return False
    w, c = wide.segments, capped.segments
    if len(w) != len(c):
        return False
    widened = False
    for ws, cs in zip(w, c, strict=True):
        if ws == "*" and cs != "*":
            widened = True
        elif ws.lower() != cs.lower():
            return False
    return widened


#: A percent-escape in a wire path (see CapBudget.charge).
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


class CapBudget:
    """One run's counts against its profile's caps; thread-safe."""

    def __init__(self, caps: RouteCaps) -> None:
        limits: dict[tuple[str, str], int] = {}
        for route, limit in caps.entries:
            key = (route.method.upper(), route.path.lower())
            limits[key] = min(limit, limits.get(key, limit))
        self._limits = limits
        self._folded = {key: Route(path=key[1], method=key[0]) for key in limits}
        self._used = dict.fromkeys(limits, 0)
        self._lock = threading.Lock()

    def charge(self, method: str, path: str) -> bool:
        """Charge one call to every cap it matches; False (nothing charged) if one is full.

        `path` is the wire path, where a structured call's values may be percent-encoded
        (`/v1/items/c%20d`). Route patterns hold no `%`, so an encoded value can only have
        come through a `*`: each `%XX` is read as `_` for matching, which every `*` admits.
        Without this no cap matched such a call and it went out uncharged (adversarial
        review). A literal capped entry with a `_` where the value had an escape is
        charged too: that errs towards refusing.
        """
        if not self._limits:
            return True
        folded_path = _ESCAPE.sub("_", path).lower()
        hits = [key for key, route in self._folded.items() if route.matches(method, folded_path)]
        with self._lock:
            if any(self._used[key] >= self._limits[key] for key in hits):
                return False
            for key in hits:
                self._used[key] += 1
        return True


__all__ = ["MAX_CAP", "CapBudget", "CapsError", "RouteCaps", "check_caps", "parse_cap_lines"]
