"""Properties that must hold for every input, not just the examples we thought of.

Names generated from a hostile document end up as JavaScript identifiers inside the
sandbox, and route patterns end up in grants: a single counter-example is a broken client
or a grant that admits less (or more) than it says. The oracles here are independent of
the implementation (a regex for identifiers, urllib for wire encoding).
"""

from __future__ import annotations

import re
import string
from typing import Any
from urllib.parse import quote, unquote

from hypothesis import example, given, settings
from hypothesis import strategies as st

from specgen.errors import SpecError
from specgen.naming import CLIENT_METHODS, OBJECT_PROTOTYPE, RESERVED, arg_names, js_ident
from specgen.operations import generate
from specgen.render import artifacts
from specgen.routes import Route, first_match, pattern_error, route_error, target_allowed
from specgen.servers import server_prefix
from tests.specgen.test_specgen_preamble_js import TABLE_LINES

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
    # deterministic, and each name is the identifier of its raw name with at most one
    # `_` or a `_<count>` added (never a run of underscores that grows with the input)
    assert names == arg_names(raw, has_body)
    for r, n in zip(raw, names, strict=True):
        base = js_ident(r)
        assert n in (base, base + "_") or re.fullmatch(re.escape(base) + r"_[0-9]+", n), n


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
    if target.endswith("/") and target != "/":
        segments = segments[:-1]  # one trailing `/` is an ordinary route (`/a/` != `/a`)
    if target != "/":
        assert all(s not in ("", ".", "..") for s in segments)
    # no `;` segment, no all-dot segment
    assert all(";" not in s and (s == "" or s.strip(".") != "") for s in segments)


# -- arbitrary documents: a result or a one-line refusal, never a crash ----------------------

_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
)
_json = st.recursive(
    _scalar,
    lambda c: st.one_of(
        st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)
    ),
    max_leaves=6,
)
_param = st.one_of(
    _json,
    st.fixed_dictionaries(
        {
            "name": st.one_of(st.text(max_size=4), _json),
            "in": st.one_of(
                st.sampled_from(["path", "query", "header", "cookie", "body", " Query "]), _json
            ),
        },
        optional={
            "required": st.one_of(st.booleans(), _json),
            "$ref": st.sampled_from(["#/components/parameters/P", "#/x", "x.json#/a"]),
        },
    ),
)
_op = st.one_of(
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "operationId": st.one_of(
                st.sampled_from(["a", "b", "get", "__proto__", "do-it", "do.it", "", "get_a"]),
                _json,
            ),
            "summary": _json,
            "requestBody": _json,
            "parameters": st.one_of(st.lists(_param, max_size=3), _json),
            "x-plimsoll-health-check": st.one_of(st.booleans(), _json),
        },
    ),
)
_item = st.one_of(
    _json,
    st.dictionaries(
        st.sampled_from(
            ["get", "put", "post", "delete", "patch", "head", "options", "parameters", "$ref"]
        ),
        st.one_of(
            _op,
            st.lists(_param, max_size=2),
            st.sampled_from(["#/components/x/I", "#/paths", "http://x"]),
        ),
        max_size=4,
    ),
)
_path = st.one_of(
    st.sampled_from(
        ["/", "/a", "/a/{id}", "/{x}.json", "/a/", "x-ext", "a", "/a/{}", "/{h}/{body}", "/é"]
    ),
    st.text(max_size=6),
)
_documents = st.fixed_dictionaries(
    {
        "openapi": st.just("3.0.3"),
        "paths": st.one_of(st.dictionaries(_path, _item, max_size=4), _json),
    },
    optional={
        "info": st.one_of(
            _json, st.fixed_dictionaries({}, optional={"title": _json, "version": _json})
        ),
        "servers": st.one_of(
            _json,
            st.lists(
                st.fixed_dictionaries(
                    {"url": st.one_of(st.sampled_from(["https://x/v1", "/api", "{a}/b"]), _json)},
                    optional={"variables": _json},
                ),
                max_size=2,
            ),
        ),
        "components": st.just(
            {
                "parameters": {"P": {"name": "p", "in": "query"}},
                "x": {"I": {"get": {"operationId": "i"}}},
            }
        ),
    },
)


@given(_documents)
def test_any_document_generates_or_is_refused_in_one_line(doc: dict[str, Any]) -> None:
    """The generator's own rules (what --no-validate leaves) never crash on odd shapes."""
    try:
        gen = generate(doc, name="doc", global_name="host", prefix=server_prefix(doc))
        files = artifacts(gen)
    except SpecError as exc:
        assert str(exc).startswith("specgen: ")
        assert "\n" not in str(exc)
        return
    # one line per operation: a row of the table, or a function of the reference build
    rows = re.findall(r"^    \[.*\],$", files["preamble.js"], re.M)
    if any(op.structured for op in gen.operations):
        assert len(rows) == len(gen.operations)
        assert files["preamble.js"].count("\n") == len(gen.operations) + TABLE_LINES
    else:
        assert files["preamble.js"].count("\n") == len(gen.operations) + 5
    # allow is the set of the operations' routes, in (path, method) order
    assert list(gen.allow) == sorted({Route(path=o.route, method=o.method) for o in gen.operations})
