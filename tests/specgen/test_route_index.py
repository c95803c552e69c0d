"""The route index answers exactly what a scan of the allow list in order answers.

Each lookup the index serves is held to its linear rule, written here as the rule reads
(a loop over the list with the per-route predicate), over generated grants whose
segments collide on purpose: literals that repeat, `*`, partial segments (`*.json`,
`v*`), trailing slashes, segments that name Object.prototype members, verbs in either
case, and the same route listed twice (the first position is the one the trace keeps).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.broker.calls import _segment_admits, build_path, match_wire
from specgen.route_index import RouteIndex
from specgen.routes import Route, first_match, target_allowed

SEGMENTS = st.sampled_from(["a", "b", "*", "*.json", "v*", "a.json", "v1", "", "__proto__"])
VERBS = st.sampled_from(["GET", "POST", "get", "DELETE"])


@st.composite
def routes(draw: st.DrawFn) -> Route:
    segs = draw(st.lists(SEGMENTS, min_size=1, max_size=3))
    return Route("/" + "/".join(segs), draw(VERBS))


GRANTS = st.lists(routes(), max_size=16)
# Request segments: the pattern alphabet's literals plus what a wildcard may stand for.
GOT = st.sampled_from(
    ["a", "b", "items", "x", "x.json", "v2", "v", "a.json", "v1", "", "__proto__", "%41", "*"]
)


def _linear_raw(allow: list[Route], method: str, target: str) -> Route | None:
    if not target_allowed(target):
        return None
    return next((r for r in allow if r.matches(method, target)), None)


def _linear_wire(
    allow: list[Route], method: str, wire: str, from_value: tuple[bool, ...]
) -> Route | None:
    got = wire.split("/")[1:]
    for route in allow:
        want = route.path.split("/")[1:]
        if route.method.upper() != method or len(want) != len(got):
            continue
        if all(_segment_admits(w, g, v) for w, g, v in zip(want, got, from_value, strict=True)):
            return route
    return None


def _instance(route: Route, fill: list[str]) -> str:
    """A target `route` admits, or nearly: each `*` replaced by one of `fill`."""
    values = iter(fill * 4)
    return "/".join(seg.replace("*", next(values, "x")) for seg in route.path.split("/"))


@settings(max_examples=600)
@given(
    allow=GRANTS,
    method=VERBS,
    got=st.lists(GOT, min_size=1, max_size=4),
    pick=st.integers(min_value=0),
    fill=st.lists(GOT, min_size=1, max_size=4),
)
def test_the_raw_match_is_the_linear_first_match(
    allow: list[Route], method: str, got: list[str], pick: int, fill: list[str]
) -> None:
    # Half the targets are instances of a route of the grant, so matches are common and
    # several routes often compete for the first place.
    if allow and pick % 2:
        target = _instance(allow[pick % len(allow)], fill)
    else:
        target = "/" + "/".join(got)
    index = RouteIndex(allow)
    assert index.first_match(method, target) == _linear_raw(allow, method, target)
    assert first_match(allow, method, target) == _linear_raw(allow, method, target)


@settings(max_examples=400)
@given(
    allow=GRANTS,
    method=st.sampled_from(["GET", "POST", "DELETE"]),
    pattern=routes(),
    values=st.lists(st.sampled_from(["a", "x", "é", "a b", "v", ".json"]), max_size=4),
    pick=st.integers(min_value=0),
)
def test_the_structured_match_is_the_linear_first_match(
    allow: list[Route], method: str, pattern: Route, values: list[str], pick: int
) -> None:
    if allow and pick % 2:
        pattern = allow[pick % len(allow)]
    stars = pattern.path.count("*")
    values = (values * 4)[:stars] if values else ["x"] * stars
    try:
        wire, from_value = build_path(pattern.path, tuple(values))
    except ValueError:
        return  # a pattern or value build_path refuses never reaches the match
    index = RouteIndex(allow)
    assert match_wire(index, method, wire, from_value) == _linear_wire(
        allow, method, wire, from_value
    )


@settings(max_examples=400)
@given(ops=GRANTS, entry=routes(), pick=st.integers(min_value=0))
def test_every_covering_route_is_found_in_order(ops: list[Route], entry: Route, pick: int) -> None:
    if ops and pick % 2:
        entry = ops[pick % len(ops)]
    index = RouteIndex(ops, fold_case=False)
    found = index.every(entry.method, entry.path.split("/")[1:], lambda w, g, i: _covers(w, g))
    assert found == [i for i, op in enumerate(ops) if op.covers(entry)]


def _covers(want: str, got: str) -> bool:
    from specgen.routes import segment_covers

    return segment_covers(want, got)


def test_the_first_of_two_equal_routes_is_the_one_matched() -> None:
    allow = [Route("/a/*", "GET"), Route("/a/b", "GET"), Route("/a/*", "GET")]
    index = RouteIndex(allow)
    assert index.first("GET", ["a", "b"], lambda w, g, i: True) == 0
    assert index.every("GET", ["a", "b"], lambda w, g, i: True) == [0, 1, 2]
    # A literal matches without asking the rule; only wildcard segments are asked.
    assert index.first("GET", ["a", "b"], lambda w, g, i: False) == 1


def test_a_trailing_slash_and_a_segment_count_are_kept_exact() -> None:
    index = RouteIndex([Route("/a/", "GET"), Route("/a", "POST")])
    assert index.first_match("GET", "/a/") == Route("/a/", "GET")
    assert index.first_match("GET", "/a") is None
    assert index.first_match("POST", "/a/") is None
    assert index.first_match("post", "/a") == Route("/a", "POST")


def test_prototype_names_are_plain_segments_in_the_json_form() -> None:
    tree = RouteIndex([Route("/__proto__/constructor", "GET")]).to_json()
    assert tree == {
        "GET 2": {"f": 0, "l": {"__proto__": {"f": 0, "l": {"constructor": {"f": 0, "e": 0}}}}}
    }
