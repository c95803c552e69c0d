"""Properties that must hold for every input, not just the examples we thought of.

Names generated from a hostile document end up as JavaScript identifiers inside the
sandbox, and route patterns end up in grants: a single counter-example is a broken client
or a grant that admits less (or more) than it says. The oracles here are independent of
the implementation (a regex for identifiers, urllib for wire encoding).
"""

from __future__ import annotations

import re
import string
from urllib.parse import quote, unquote

from hypothesis import example, given, settings
from hypothesis import strategies as st

from specgen.naming import CLIENT_METHODS, OBJECT_PROTOTYPE, RESERVED, arg_names, js_ident
from specgen.routes import Route, first_match, pattern_error, route_error, target_allowed

ASCII_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
# ECMAScript reserved words, written out independently of specgen.naming.
JS_RESERVED = set(
    [
        "arguments",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "eval",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "implements",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
    ]
)
# Go's url.PathEscape leaves these alone in a path (unreserved plus $&+,/:;=@).
PATH_SAFE = "$&+,/:;=@"

settings.register_profile("specgen", max_examples=300, deadline=None)
settings.load_profile("specgen")

names_text = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="hbody_$-.09 é", max_size=6),
    st.sampled_from(["h", "h_", "body", "body_", "default", "class", "a-b", "a.b", "2fa", ""]),
)


def test_reserved_set_is_the_ecmascript_list() -> None:
    assert set(RESERVED) == JS_RESERVED
    assert len(RESERVED) == 48


@given(st.text())
@example("")
@example("2fa")
@example("café")
@example("\U0001f600")
@example("a\u2028b")
def test_js_ident_is_always_a_valid_ascii_identifier(raw: str) -> None:
    name = js_ident(raw)
    assert ASCII_IDENT.match(name), name
    # one output character per code point, plus `_` before a leading digit
    expected = 1 if not raw else len(raw) + (raw[0] in string.digits)
    assert len(name) == expected
    # valid identifier characters survive unchanged
    if raw and ASCII_IDENT.match(raw):
        assert name == raw


@given(st.lists(names_text, max_size=8), st.booleans())
@example(["h", "h_", "body", "body"], True)
@example(["a-b", "a.b", "a_b", "a b"], False)
@example(["default", "default_", "class"], True)
def test_arg_names_are_valid_unique_and_never_clash(raw: list[str], has_body: bool) -> None:
    names = arg_names(raw, has_body)
    assert len(names) == len(raw)
    assert len(set(names)) == len(names)
    for name in names:
        assert ASCII_IDENT.match(name), name
        assert name not in JS_RESERVED
        assert name != "h"
        if has_body:
            assert name != "body"
    # deterministic, and each name starts from the identifier of its raw name
    assert names == arg_names(raw, has_body)
    for r, n in zip(raw, names, strict=True):
        assert n.rstrip("_") == js_ident(r).rstrip("_")


def test_refused_method_names_are_identifiers_js_ident_can_produce() -> None:
    # the refusal sets are compared with js_ident output, so each must be a fixed point
    for name in (*CLIENT_METHODS, *OBJECT_PROTOTYPE):
        assert js_ident(name) == name


segment = st.one_of(
    st.just("*"),
    st.text(alphabet=string.ascii_letters + string.digits + "-._~$&+,:=@", min_size=1, max_size=6),
    st.text(alphabet=string.ascii_letters + "*;.%?#\\ é[]!'()", min_size=0, max_size=4),
)
patterns = st.lists(segment, max_size=6).map(lambda segs: "/" + "/".join(segs))


@given(patterns)
@example("/")
@example("/*")
@example("/a/*/b")
@example("/$batch/*")
@example("/a&b/*")
def test_every_valid_pattern_admits_its_own_instantiation(path: str) -> None:
    if pattern_error(path) is not None:
        return
    assert route_error("GET", path) is None
    route = Route(path=path, method="GET")
    target = path.replace("*", "x")
    assert target_allowed(target)
    assert first_match([route], "GET", target) == route
    assert first_match([route], "get", target) == route
    # and nothing with another segment count
    assert first_match([route], "GET", target + "/x") is None


@given(patterns)
def test_valid_patterns_are_canonical(path: str) -> None:
    if pattern_error(path) is not None:
        return
    instance = path.replace("*", "x")
    assert quote(instance, safe=PATH_SAFE) == instance
    assert unquote(instance) == instance


targets = st.one_of(
    st.text(max_size=20),
    st.lists(
        st.text(
            alphabet=string.ascii_letters + string.digits + "-._~$&+,:;=@%/?#\\ *é", max_size=6
        ),
        max_size=5,
    ).map(lambda segs: "/" + "/".join(segs)),
)


@given(targets)
@example("/")
@example("/v1/items/x")
@example("/v1/items/..")
@example("/v1/items/%41")
def test_an_approved_target_is_canonical(target: str) -> None:
    if not target_allowed(target):
        return
    assert target.startswith("/")
    # exactly what goes on the wire: no escaping would change it, nothing to decode
    assert quote(target, safe=PATH_SAFE) == target
    assert "%" not in target and unquote(target) == target
    # path-clean: no empty, `.` or `..` segment (except the root itself)
    segments = target.split("/")[1:]
    if target != "/":
        assert all(s not in ("", ".", "..") for s in segments)
    # no `;` segment, no all-dot segment
    assert all(";" not in s and (s == "" or s.strip(".") != "") for s in segments)
