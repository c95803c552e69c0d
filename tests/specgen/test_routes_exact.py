"""Route rules pinned where mutation testing (make mutate) found them unpinned.

Each test names the mutant it kills: a rule that a changed operator leaves green is a
rule nothing checks.
"""

from __future__ import annotations

import pytest

from specgen.routes import Route, first_match, is_control


@pytest.mark.parametrize("ch", ["\x00", "\x1f", "\x7f", "\x80", "\x85", "\x9f", "\u2028", "\u2029"])
def test_control_characters_and_js_line_terminators_are_control(ch: str) -> None:
    # kills `category(ch) == "Cc"` -> `< "Cc"` and `or` -> `and`
    assert is_control(ch)


@pytest.mark.parametrize("ch", ["a", " ", "\u200b", "\ufeff", "é", "\ud800", "\U0001f600"])
def test_other_characters_are_not(ch: str) -> None:
    assert not is_control(ch)


@pytest.mark.parametrize("target", ["/a", "/c", "/bb", "/B", "/v1/itemz", "/v1/item"])
def test_a_literal_segment_matches_only_itself(target: str) -> None:
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
