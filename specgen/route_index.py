"""An index of route patterns, so a lookup costs the same for 14 routes or 1,222.

Every rule that pairs a request (or a pattern) with allow entries has the same shape:
same verb, same number of segments, and each segment of the entry admitting the
request's segment. A literal segment (no `*`) admits exactly its own text under every
one of those rules, so it can be looked up in a dict; only `*` and partial segments
(`*.json`) need the rule itself. The index is a tree: its roots are keyed by (verb,
segment count), each level holds its literal segments by text and its wildcard segments
in a list, and a pattern ends at the node of its last segment, which records the
pattern's position in the list it was built from. A lookup walks only the branches
whose segments admit the request's, so its cost follows how many patterns share the
request's literal segments, not how many there are.

The index answers exactly what a scan of the list in order would: `first` gives the
smallest position whose pattern admits every segment (the entry a linear scan stops at,
which the trace records), `every` all of them in order. The segment rule is the
caller's (`admits(want, got, index)`), and is asked only about wildcard segments: the
broker's structured rule, its raw rule and `Route.covers` differ there and nowhere else.
Trailing slashes need nothing special: `/a/` has an empty last segment, a literal.

The same tree, as JSON (`to_json`), is what the guest's client consults
(templates/client.js.j2), so the courtesy check in the sandbox and the broker's
decision read one structure built once per grant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from specgen.routes import Route, segment_matches, target_allowed

#: `admits(want, got, index)`: does wildcard pattern segment `want` admit request
#: segment `got`, the `index`-th (0-based) of the request's segments?
Admits = Callable[[str, str, int], bool]

_NONE = 1 << 62  # "no pattern": larger than any position


class _Node:
    __slots__ = ("end", "ends", "first", "literal", "wild")

    def __init__(self) -> None:
        #: Positions of the patterns ending here (the same route listed more than once),
        #: in order; `end` is the first of them, or _NONE.
        self.ends: list[int] = []
        self.end = _NONE
        #: Smallest position of any pattern ending here or below (prunes `first`).
        self.first = _NONE
        self.literal: dict[str, _Node] = {}
        self.wild: dict[str, _Node] = {}


def is_wild(segment: str) -> bool:
    """Does this pattern segment need the segment rule (it holds a `*`)?"""
    return "*" in segment


def _raw_admits(want: str, got: str, index: int) -> bool:
    return segment_matches(want, got)


class RouteIndex:
    """Route patterns by verb, segment count and literal segments (see the module doc).

    `fold_case` keys the patterns' verbs upper-cased (the broker's rules compare
    `route.method.upper()` with the request's verb); without it a verb is keyed as
    written (`Route.covers`). A lookup's `method` is compared as given: the caller
    upper-cases it where its rule does.
    """

    def __init__(self, routes: Iterable[Route], *, fold_case: bool = True) -> None:
        self._fold = fold_case
        self._roots: dict[tuple[str, int], _Node] = {}
        self._routes: tuple[Route, ...] = tuple(routes)
        for position, route in enumerate(self._routes):
            segments = route.path.split("/")[1:]
            node = self._roots.setdefault((self._verb(route.method), len(segments)), _Node())
            node.first = min(node.first, position)
            for seg in segments:
                children = node.wild if is_wild(seg) else node.literal
                node = children.setdefault(seg, _Node())
                node.first = min(node.first, position)
            node.ends.append(position)
            node.end = node.ends[0]

    def _verb(self, method: str) -> str:
        return method.upper() if self._fold else method

    @property
    def routes(self) -> tuple[Route, ...]:
        """The patterns in the order given (positions index into this)."""
        return self._routes

    def __len__(self) -> int:
        return len(self._routes)

    def first(self, method: str, segments: list[str], admits: Admits) -> int | None:
        """The smallest position whose pattern admits (method, segments), or None."""
        root = self._roots.get((method, len(segments)))
        if root is None:
            return None
        best = _NONE
        depth = len(segments)
        stack = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if node.first >= best:
                continue
            if i == depth:
                best = min(best, node.end)
                continue
            got = segments[i]
            child = node.literal.get(got)
            if child is not None:
                stack.append((child, i + 1))
            for want, wild in node.wild.items():
                if wild.first < best and admits(want, got, i):
                    stack.append((wild, i + 1))
        return None if best == _NONE else best

    def route(self, method: str, segments: list[str], admits: Admits) -> Route | None:
        """The pattern at `first`'s position, or None."""
        position = self.first(method, segments, admits)
        return None if position is None else self._routes[position]

    def first_match(self, method: str, target: str) -> Route | None:
        """`specgen.routes.first_match` over these routes: the broker's raw-call rule."""
        if not target_allowed(target) or not method.isascii():
            return None
        return self.route(method.upper(), target.split("/")[1:], _raw_admits)

    def every(self, method: str, segments: list[str], admits: Admits) -> list[int]:
        """Every position whose pattern admits (method, segments), in order."""
        root = self._roots.get((method, len(segments)))
        if root is None:
            return []
        found: list[int] = []
        depth = len(segments)
        stack = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == depth:
                found += node.ends
                continue
            got = segments[i]
            child = node.literal.get(got)
            if child is not None:
                stack.append((child, i + 1))
            for want, wild in node.wild.items():
                if admits(want, got, i):
                    stack.append((wild, i + 1))
        return sorted(found)

    def to_json(self) -> dict[str, Any]:
        """The tree as plain JSON for the guest's client.

        `{"VERB SEGMENTS": node}`, node = `{"f": first, "e": end?, "l": {seg: node}?,
        "w": [[seg, node], ...]?}`. Keys of "l" are path segments, so a reader must look
        them up as own properties (a segment may be `__proto__` or `constructor`).
        """

        def node_json(node: _Node) -> dict[str, Any]:
            out: dict[str, Any] = {"f": node.first}
            if node.end != _NONE:
                out["e"] = node.end
            if node.literal:
                out["l"] = {seg: node_json(child) for seg, child in node.literal.items()}
            if node.wild:
                out["w"] = [[seg, node_json(child)] for seg, child in node.wild.items()]
            return out

        return {f"{verb} {count}": node_json(node) for (verb, count), node in self._roots.items()}


__all__ = ["Admits", "RouteIndex", "is_wild"]
