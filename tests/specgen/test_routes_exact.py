"""Route rules pinned where mutation testing (make mutate) found them unpinned.

Each test names the mutant it kills: a rule that a changed operator leaves green is a
rule nothing checks.
"""

from __future__ import annotations

import pytest

from specgen.routes import Route, first_match, has_control, is_control


@pytest.mark.parametrize("ch", ["\x00", "\x1f", "\x7f", "\x80", "\x85", "\x9f", "\u2028", "\u2029"])
def test_control_characters_and_js_line_terminators_are_control(ch: str) -> None:
    # kills `category(ch) == "Cc"` -> `< "Cc"` and `or` -> `and`
    assert is_control(ch)


@pytest.mark.parametrize("ch", ["a", " ", "\u200b", "\ufeff", "é", "\ud800", "\U0001f600"])
def test_other_characters_are_not(ch: str) -> None:
    assert not is_control(ch)


@pytest.mark.parametrize("target", ["/a", "/c", "/bb", "/B", "/v1/itemz", "/v1/item"])
def test_a_literalsegment_matches_only_itself(target: str) -> None:
    # kills `w != g` -> `w < g` (or `>`): a literal compares equal, never ordered
    allow = (Route("/b", "GET"), Route("/v1/items", "GET"))
    assert first_match(allow, "GET", target) is None


def test_segment_counts_are_compared_by_value_not_identity() -> None:
    # kills `len(got) != len(want)` -> `is not` (ints above 256 are distinct objects)
    pattern = "/a" * 300
    assert first_match([Route(pattern, "GET")], "GET", pattern) == Route(pattern, "GET")
    assert first_match([Route(pattern, "GET")], "GET", "/a" * 299) is None


def test_covers_compares_verbs_by_value() -> None:
    # kills `self.method != other.method` -> `>` and -> `is not`
    catalog = Route("/a/*", "POST")
    assert not catalog.covers(Route("/a/b", "GET"))  # "POST" > "GET": `>` would refuse it
    assert not catalog.covers(Route("/a/b", "PUT"))
    verb = "".join(["PO", "ST"])  # equal, but not the same object
    assert catalog.covers(Route("/a/b", verb))


# -- partial segments (`x*y`) and `covers`: survivors of the complete mutation run --------

from specgen.routes import (  # noqa: E402
    ERR_WILDCARD,
    partial_segment,
    pattern_error,
    route_error,
    target_allowed,
)


@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("/f/abc*.json", "/f/abcX.json"),  # a one-character value: kills `+` -> `*`, `**`, `<<`
        ("/f/v*", "/f/v1"),  # empty suffix: kills `+` -> `/`, `//`, `%` (ZeroDivisionError)
        ("/f/*.json", "/f/a.json"),  # empty prefix
        ("/f/a*@x", "/f/aZ@x"),  # a suffix outside the unreserved set: kills the value's
        (
            "/f/a*:v",
            "/f/a-b~c:v",
        ),  # end `len(got) - len(suffix)` -> `+`, `*`, `%`, `**`, `<<`, `|`, `^`
    ],
)
def test_a_partialsegment_matches_a_value_between_its_prefix_and_suffix(
    pattern: str, target: str
) -> None:
    assert Route(pattern, "GET").matches("GET", target)


@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("/f/abc*.json", "/f/abc.json"),  # the value may not be empty
        ("/f/ab*ba", "/f/aba"),  # prefix and suffix overlapping in a short segment
        ("/f/a*@x", "/f/a@@x"),  # the value itself must be unreserved
        ("/f/a*@x", "/f/aZ@y"),
        ("/f/a*@x", "/f/bZ@x"),
    ],
)
def test_a_partial_segment_refuses_what_lies_outside_its_rule(pattern: str, target: str) -> None:
    assert not Route(pattern, "GET").matches("GET", target)


@pytest.mark.parametrize("seg", ["$*", "&*", "$*x", "a*b", "*.json", "v*"])
def test_a_segment_with_one_star_inside_literal_text_is_partial(seg: str) -> None:
    """kills `seg == "*"` -> `seg < "*"` / `<=` in partial_segment ("$" and "&" sort before
    "*"), and in pattern_error `seg != "*"` -> `seg > "*"`: without `partial` "$*" is refused."""
    prefix, suffix = seg.split("*")
    assert partial_segment(seg) == (prefix, suffix)
    assert pattern_error(f"/a/{seg}", partial=True) is None
    assert pattern_error(f"/a/{seg}") == ERR_WILDCARD


def test_route_error_refuses_a_partial_segment_unless_asked() -> None:
    """kills `partial: bool = False` -> `True` (the reference's rule is the default)."""
    assert route_error("GET", "/a/*.json") == f'route GET "/a/*.json": {ERR_WILDCARD}'
    assert route_error("GET", "/a/*.json", partial=True) is None


@pytest.mark.parametrize("pattern", ["/a/x*.json", "/a/*", "/a/b", "/a/$*"])
def test_a_route_covers_itself(pattern: str) -> None:
    """kills `mine == theirs` -> `mine is theirs` in segment_covers (two splits of equal
    text are different objects)."""
    assert Route(pattern, "GET").covers(Route(pattern, "GET"))
    assert Route(pattern, "GET").covers(Route("".join([pattern, ""]), "GET"))


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        ("/v/literal", "/v/a*b"),  # kills `mine == "*"` -> `mine >= "*"`
        ("/v/$", "/v/a*b"),  # kills `mine == "*"` -> `mine <= "*"` ("$" sorts before "*")
        ("/v/*", "/v/x*y*z"),  # kills `parts is not None and ...` -> `or`
        ("/v/*", "/v/x*@"),  # a part outside the unreserved set
        ("/v/x*.json", "/v/*"),
    ],
)
def test_a_route_does_not_cover_a_wider_one(mine: str, theirs: str) -> None:
    assert not Route(mine, "GET").covers(Route(theirs, "GET"))


def test_a_whole_segment_star_covers_a_partial_one() -> None:
    assert Route("/v/*", "GET").covers(Route("/v/a*b", "GET"))
    assert Route("/v/*", "GET").covers(Route("/v/*.json", "GET"))


def test_covers_compares_segment_counts_by_value() -> None:
    """kills `len(mine) != len(theirs)` -> `is not` (ints above 256 are not shared)."""
    long = "/" + "/".join(["s"] * 300)
    assert Route(long, "GET").covers(Route(long, "GET"))
    assert Route(long, "GET").matches("GET", long)


@pytest.mark.parametrize("method", ["DELETE", "CONNECT", "A", "PATCH", "POST", "PUT", "get2"])
def test_a_route_matches_its_own_method_only(method: str) -> None:
    """kills `method.upper() != self.method.upper()` -> `>`: DELETE sorts before GET."""
    assert not Route("/a", "GET").matches(method, "/a")
    assert Route("/a", "GET").matches("get", "/a")


def test_the_root_is_clean_however_its_string_was_built() -> None:
    """kills `path == "/"` -> `path is "/"`: a "/" built by join or lower() is another object."""
    for root in ("/".lower(), "".join(["/", ""])):
        assert pattern_error(root) is None
        assert target_allowed(root)


def test_a_route_is_a_frozen_hashable_value() -> None:
    """kills `@dataclass(frozen=True, order=True)` -> `frozen=False` (unhashable then)."""
    import dataclasses

    route = Route("/a", "GET")
    assert {route: 1}[Route("/a", "GET")] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.path = "/b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("abc", False),
        ("", False),
        ("a\x00b", True),
        ("\x7f", True),
        ("a\x9f", True),
        ("x\u2028", True),
        ("\u2029", True),
        ("\u200b\ufeff", False),
    ],
)
def test_has_control_agrees_with_is_control(s: str, expected: bool) -> None:
    """kills `_CC_OR_TERMINATOR.search(s) is not None` -> `is None`."""
    assert has_control(s) is expected
    assert has_control(s) == any(is_control(ch) for ch in s)
