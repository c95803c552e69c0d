"""The shared route rules (specgen/routes.py) against the reference's route rules.

These rules decide what a grant can hold and what the broker approves, so every message
text and every denial of the reference list is pinned here: a rule that silently loosens
would let a request reach a route the operator never granted.
"""

from __future__ import annotations

import pytest

from specgen.routes import (
    ERR_ABSOLUTE,
    ERR_ENCODED,
    ERR_RAW,
    ERR_SEGMENTS,
    ERR_WILDCARD,
    ERR_WIRE,
    Route,
    RouteError,
    first_match,
    parse_route_line,
    pattern_error,
    route_error,
    target_allowed,
)


def test_error_texts_are_the_reference_texts() -> None:
    assert ERR_ABSOLUTE == "path must be absolute"
    assert ERR_RAW == "path contains a backslash, control character, query, or fragment"
    assert ERR_ENCODED == "path must be decoded and canonical"
    assert ERR_SEGMENTS == 'path must not contain empty, dot, traversal, or ";" segments'
    assert ERR_WIRE == "path contains bytes that require wire encoding"
    assert ERR_WILDCARD == "wildcard must occupy a complete path segment"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/*",
        "/a",
        "/a/*",
        "/a/*/b",
        "/v1/items/*/tags",
        "/a-b_c.d~e",
        "/$batch",
        "/a:b",
        "/a&b=c+d,e@f",
        "/*/*",
    ],
)
def test_valid_patterns(path: str) -> None:
    assert pattern_error(path) is None


@pytest.mark.parametrize(
    ("path", "error"),
    [
        # 1. absolute
        ("", ERR_ABSOLUTE),
        ("a", ERR_ABSOLUTE),
        ("*", ERR_ABSOLUTE),
        ("a/b?c", ERR_ABSOLUTE),
        # 2. backslash, control, query, fragment
        ("/a\\b", ERR_RAW),
        ("/a?b=1", ERR_RAW),
        ("/a#frag", ERR_RAW),
        ("/a\x00", ERR_RAW),
        ("/a\nb", ERR_RAW),
        ("/a\x7f", ERR_RAW),
        ("/a\x85", ERR_RAW),  # C1 control
        # 3. any percent sign
        ("/%41", ERR_ENCODED),
        ("/a%", ERR_ENCODED),
        ("/a/%2e%2e", ERR_ENCODED),
        # 4. not clean, `;` segments, dot-only segments
        ("//", ERR_SEGMENTS),
        ("/a//b", ERR_SEGMENTS),
        ("/a/.", ERR_SEGMENTS),
        ("/a/./b", ERR_SEGMENTS),
        ("/a/../b", ERR_SEGMENTS),
        ("/..", ERR_SEGMENTS),
        ("/a/..;/b", ERR_SEGMENTS),
        ("/a;b", ERR_SEGMENTS),
        ("/...", ERR_SEGMENTS),
        ("/a/..../b", ERR_SEGMENTS),
        # 5. bytes that need wire encoding
        ("/a b", ERR_WIRE),
        ("/café", ERR_WIRE),
        ("/[x]", ERR_WIRE),
        ("/a!", ERR_WIRE),
        ("/a'b", ERR_WIRE),
        ("/a(b)", ERR_WIRE),
        ('/a"b', ERR_WIRE),
        ("/a<b>", ERR_WIRE),
        ("/a{id}", ERR_WIRE),
        ("/a|b", ERR_WIRE),
        ("/a^b", ERR_WIRE),
        ("/a`b", ERR_WIRE),
        ("/a\u2028b", ERR_WIRE),  # a line terminator, but not Cc: caught as wire bytes
        # 6. partial wildcards
        ("/a*", ERR_WILDCARD),
        ("/*a", ERR_WILDCARD),
        ("/a/**", ERR_WILDCARD),
        ("/a/x*y/b", ERR_WILDCARD),
    ],
)
def test_pattern_errors(path: str, error: str) -> None:
    assert pattern_error(path) == error


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("a b?", ERR_ABSOLUTE),  # 1 before 2 and 5
        ("/a b?c", ERR_RAW),  # 2 before 5
        ("/a/%2e/../?", ERR_RAW),  # 2 before 3 and 4
        ("/a/%2e/../", ERR_ENCODED),  # 3 before 4
        ("/a//b c", ERR_SEGMENTS),  # 4 before 5
        ("/a;b c", ERR_SEGMENTS),
        ("/a b/x*", ERR_WIRE),  # 5 before 6
        ("/x*//", ERR_SEGMENTS),  # 4 before 6
    ],
)
def test_pattern_checks_run_in_the_reference_order(path: str, error: str) -> None:
    assert pattern_error(path) == error


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE", "PATCH"])
def test_route_error_accepts_the_five_verbs(method: str) -> None:
    assert route_error(method, "/a/*") is None


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE", "get", "Get", "", "CONNECT"])
def test_route_error_refuses_other_methods_case_sensitively(method: str) -> None:
    assert (
        route_error(method, "/a")
        == f'route method "{method}" is not one of GET, PUT, POST, DELETE, PATCH'
    )


def test_route_error_wraps_the_pattern_error() -> None:
    assert route_error("GET", "/a//") == f'route GET "/a//": {ERR_SEGMENTS}'
    assert route_error("POST", "/a/../b") == f'route POST "/a/../b": {ERR_SEGMENTS}'
    assert route_error("PUT", "x") == f'route PUT "x": {ERR_ABSOLUTE}'
    # the method is checked before the path
    assert route_error("HEAD", "x").startswith('route method "HEAD"')


def test_parse_route_line() -> None:
    assert parse_route_line("GET /a/*") == Route(path="/a/*", method="GET")
    assert parse_route_line("  post   /a  ") == Route(path="/a", method="POST")
    # only the shape: a bad pattern parses, route_error then names the rule
    bad = parse_route_line("GET /a/./b")
    assert route_error(bad.method, bad.path) == f'route GET "/a/./b": {ERR_SEGMENTS}'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("GET", 'allow entry "GET" must be "METHOD /path"'),
        ("", 'allow entry "" must be "METHOD /path"'),
        ("GET /a /b", 'allow entry "GET /a /b" must be "METHOD /path"'),
        ("GET a", 'allow entry "GET a": path must be absolute'),
        ("/a GET", 'allow entry "/a GET": path must be absolute'),
    ],
)
def test_parse_route_line_refusals(line: str, message: str) -> None:
    with pytest.raises(RouteError) as exc:
        parse_route_line(line)
    assert str(exc.value) == message


def test_parse_route_line_names_what_it_parses() -> None:
    with pytest.raises(RouteError, match=r'^catalog entry "x" must be "METHOD /path"$'):
        parse_route_line("x", "catalog entry")


# The reference's denial list, each against allow `GET /v1/items/*`.
REFERENCE_DENIALS = [
    "/v1/items/x?admin=1",
    "/v1/items/x#fragment",
    "/v1/items/%78",
    "/v1/items/%2e%2e",
    "/v1/items/../admin",
    "/v1/items//x",
    "/v1/items/a\\b",
    "/v1/items/has space",
    "/v1/items/café",
    "/v1/items/[x]",
]
ITEMS = [Route(path="/v1/items/*", method="GET")]


@pytest.mark.parametrize("target", REFERENCE_DENIALS)
def test_reference_denials(target: str) -> None:
    assert target_allowed(target) is False
    assert first_match(ITEMS, "GET", target) is None


@pytest.mark.parametrize(
    "target",
    [
        "",
        "v1/items/x",
        "/v1/items/%41",  # even a harmless escape
        "/v1/items/x//",
        "/v1/items//",
        "/v1/items/./x",
        "/v1/items/...",
        "/v1/items/a;b",
        "/v1/items/x\x00",
        "/v1/items/x\x9f",
        "/v1/items/*",  # `*` is a pattern character, never a target character
        "/v1/items/a!",
        "/v1/items/'",
        "/v1/items/(x)",
        "/v1/items/x\u2028",
    ],
)
def test_more_targets_the_broker_refuses(target: str) -> None:
    assert target_allowed(target) is False


@pytest.mark.parametrize(
    "target", ["/", "/v1/items/x", "/v1/items/a:b", "/a/$batch", "/a/b=c&d+e,f@g", "/a/~x-y_z.1"]
)
def test_canonical_targets_are_allowed(target: str) -> None:
    assert target_allowed(target) is True


def test_wildcard_matches_one_unreserved_segment() -> None:
    on = [Route(path="/v1/lights/*/on", method="GET")]
    assert first_match(on, "GET", "/v1/lights/abc/on") == on[0]
    assert first_match(on, "GET", "/v1/lights/A-b_c.d~e/on") == on[0]
    assert first_match(on, "GET", "/v1/lights/on") is None
    assert first_match(on, "GET", "/v1/lights/a/b/on") is None
    # allowed targets whose segment is not unreserved do not fill a `*`
    assert first_match(ITEMS, "GET", "/v1/items/a:setIamPolicy") is None
    assert first_match(ITEMS, "GET", "/v1/items/$batch") is None
    assert first_match(ITEMS, "GET", "/v1/items/$each") is None
    # but a literal segment may hold them
    literal = [Route(path="/v1/items/$batch", method="POST")]
    assert first_match(literal, "POST", "/v1/items/$batch") == literal[0]


def test_literals_are_case_sensitive_and_methods_are_not() -> None:
    routes = [Route(path="/v1/Items", method="GET")]
    assert first_match(routes, "get", "/v1/Items") == routes[0]
    assert first_match(routes, "Get", "/v1/Items") == routes[0]
    assert first_match(routes, "GET", "/v1/items") is None
    assert first_match(routes, "POST", "/v1/Items") is None


def test_segment_counts_must_be_equal() -> None:
    routes = [Route(path="/a/*", method="GET")]
    assert first_match(routes, "GET", "/a") is None
    assert first_match(routes, "GET", "/a/b/c") is None
    root = [Route(path="/", method="GET")]
    assert first_match(root, "GET", "/") == root[0]
    assert first_match(root, "GET", "/a") is None
    star = [Route(path="/*", method="GET")]
    assert first_match(star, "GET", "/a") == star[0]
    assert first_match(star, "GET", "/") is None


def test_first_match_is_the_first_entry_in_allow_order() -> None:
    wild = Route(path="/a/*", method="GET")
    lit = Route(path="/a/b", method="GET")
    assert first_match([wild, lit], "GET", "/a/b") is wild
    assert first_match([lit, wild], "GET", "/a/b") is lit
    assert first_match([lit, wild], "GET", "/a/c") is wild
    assert first_match([], "GET", "/a/b") is None


def test_route_covers_its_instances() -> None:
    catalog = Route(path="/accounts/*/items/*", method="GET")
    assert catalog.covers(Route(path="/accounts/42/items/*", method="GET"))
    assert catalog.covers(Route(path="/accounts/42/items/7", method="GET"))
    assert catalog.covers(catalog)
    assert not catalog.covers(Route(path="/accounts/42/items/7", method="DELETE"))
    assert not catalog.covers(Route(path="/accounts/42/items", method="GET"))
    assert not catalog.covers(Route(path="/accounts/42/items/7/x", method="GET"))
    assert not catalog.covers(Route(path="/accounts/42/other/7", method="GET"))
    # a literal never covers a wildcard: that would widen the grant
    assert not Route(path="/accounts/42/items/7", method="GET").covers(catalog)


def test_routes_sort_by_path_then_method_and_print_as_lines() -> None:
    routes = [
        Route(path="/b", method="GET"),
        Route(path="/a/b", method="GET"),
        Route(path="/a/*", method="PUT"),
        Route(path="/a/*", method="DELETE"),
        Route(path="/a/*", method="GET"),
        Route(path="/a/*", method="PATCH"),
        Route(path="/a/*", method="POST"),
    ]
    assert [str(r) for r in sorted(routes)] == [
        "DELETE /a/*",
        "GET /a/*",
        "PATCH /a/*",
        "POST /a/*",
        "PUT /a/*",
        "GET /a/b",
        "GET /b",
    ]


@pytest.mark.parametrize("line", ["GET\x1f/a", "GET\x1c/a", "GET/a"])
def test_a_route_line_split_only_by_what_go_calls_space_is_refused(line: str) -> None:
    # Python's str.split() would split on U+001C-U+001F and load "GET\x1f/a" as GET /a.
    with pytest.raises(RouteError, match='must be "METHOD /path"'):
        parse_route_line(line)


def test_a_route_line_split_by_unicode_space_parses_like_go() -> None:
    assert str(parse_route_line("get\u3000/a")) == "GET /a"


# Trailing slashes: `/a/` is an ordinary route, distinct from `/a`.


@pytest.mark.parametrize("target", ["/a/", "/v1/items/x/", "/v1/memories/"])
def test_one_trailing_slash_is_a_canonical_target(target: str) -> None:
    assert target_allowed(target) is True
    assert pattern_error(target) is None


def test_trailing_slash_routes_and_bare_routes_do_not_admit_each_other() -> None:
    slash = [Route(path="/v1/memories/", method="GET")]
    bare = [Route(path="/v1/memories", method="GET")]
    assert first_match(slash, "GET", "/v1/memories/") == slash[0]
    assert first_match(slash, "GET", "/v1/memories") is None
    assert first_match(bare, "GET", "/v1/memories/") is None
    # a `*` never stands for the empty segment a trailing slash leaves
    assert first_match(ITEMS, "GET", "/v1/items/") is None
    assert first_match(ITEMS, "GET", "/v1/items/x/") is None
    star_slash = [Route(path="/v1/items/*/", method="GET")]
    assert first_match(star_slash, "GET", "/v1/items/x/") == star_slash[0]
    assert first_match(star_slash, "GET", "/v1/items/x") is None
    assert first_match(star_slash, "GET", "/v1/items//") is None


@pytest.mark.parametrize("path", ["/a/", "/a/*/"])
def test_the_reference_rule_still_refuses_a_trailing_slash(path: str) -> None:
    assert pattern_error(path, trailing_slash=False) == ERR_SEGMENTS


@pytest.mark.parametrize("path", ["/a//", "//", "/a/./", "/a/../"])
def test_only_one_trailing_slash_after_a_real_segment(path: str) -> None:
    assert pattern_error(path) == ERR_SEGMENTS
    assert target_allowed(path) is False


# Partial segments: `*` with literal text around it, one per segment.


def test_a_partial_segment_is_a_pattern_only_when_asked_for() -> None:
    assert pattern_error("/files/*.json") == ERR_WILDCARD  # the grants loader's rule today
    assert pattern_error("/files/*.json", partial=True) is None
    assert pattern_error("/files/v*", partial=True) is None
    assert pattern_error("/files/*.*", partial=True) == ERR_WILDCARD  # two in one segment
    assert pattern_error("/files/**", partial=True) == ERR_WILDCARD


def test_a_partial_segment_matches_a_non_empty_unreserved_value_between_its_literals() -> None:
    files = [Route(path="/files/*.json", method="GET")]
    assert first_match(files, "GET", "/files/a.json") == files[0]
    assert first_match(files, "GET", "/files/a.b.json") == files[0]  # value "a.b"
    assert first_match(files, "GET", "/files/.json") is None  # empty value
    assert first_match(files, "GET", "/files/a.jsonx") is None
    assert first_match(files, "GET", "/files/a:b.json") is None  # not unreserved
    assert first_match(files, "GET", "/files/a/b.json") is None  # never spans a segment
    assert first_match(files, "GET", "/files/a.json/") is None


def test_covers_with_partial_segments() -> None:
    whole = Route(path="/files/*", method="GET")
    part = Route(path="/files/*.json", method="GET")
    assert whole.covers(part)  # `.json` is unreserved: everything *.json admits, * admits
    assert not part.covers(whole)
    assert part.covers(Route(path="/files/a.json", method="GET"))
    assert not part.covers(Route(path="/files/a.xml", method="GET"))
    assert not Route(path="/files/*:x", method="GET").covers(Route(path="/files/*:y", method="GET"))


def test_the_segment_bound_counts_segments_not_slashes() -> None:
    from specgen.routes import ERR_DEEP, MAX_SEGMENTS, pattern_error

    assert pattern_error("/a" * MAX_SEGMENTS) is None
    assert pattern_error("/a" * MAX_SEGMENTS + "/") is None  # a trailing slash adds none
    assert pattern_error("/a" * (MAX_SEGMENTS + 1)) == ERR_DEEP
    assert pattern_error("/*" * (MAX_SEGMENTS + 1)) == ERR_DEEP
