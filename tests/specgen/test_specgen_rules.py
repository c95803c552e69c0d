"""Every generation rule and message of the reference, as this project implements them.

Where the project differs on purpose the test says so: local `$ref`s are
resolved, an operation that cannot be represented is skipped with a reason (`--strict`
makes it an error), an operation without operationId gets a derived name and a warning,
routes carry the server's path, and every message starts with `specgen: `.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from specgen.build import check_version
from specgen.errors import SpecError
from specgen.load import Source
from specgen.operations import HEALTH_NOTE, SKIP_VERB, Generated, generate, one_line
from specgen.render import artifacts
from specgen.servers import server_prefix, url_path

ROOT = Path(__file__).resolve().parents[2]
NAME = "doc.json"
REQUIRES = (
    "which a brokered call cannot send: a grant authorizes a literal path, the broker "
    "rejects any query string, and guest code sets no headers"
)
OPTIONAL = "cannot be sent through the broker, so the generated method always calls the bare route"


def doc(paths: Any, **top: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}}
    if paths is not None:
        d["paths"] = paths
    d.update(top)
    return d


def gen(paths: Any, **kw: Any) -> Generated:
    """Generate in reference mode: this file pins the reference's rules and messages.

    The default build's differences are tested in test_specgen_params.py.
    """
    top = kw.pop("top", {})
    kw.setdefault("compat", "reference")
    return generate(doc(paths, **top), name=NAME, **kw)


def refusal(paths: Any, **kw: Any) -> str:
    with pytest.raises(SpecError) as exc:
        gen(paths, **kw)
    message = str(exc.value)
    assert message.startswith("specgen: ")
    assert "\n" not in message
    return message


def op(op_id: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"responses": {"200": {"description": "OK"}}}
    if op_id is not None:
        out["operationId"] = op_id
    out.update(extra)
    return out


def param(name: str, where: str, required: bool | None = None, **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, "in": where, **extra}
    if required is not None:
        p["required"] = required
    return p


def names(g: Generated) -> list[str]:
    return [o.name for o in g.operations]


def allow(g: Generated) -> list[str]:
    return [str(r) for r in g.allow]


# -- order of operations ----------------------------------------------------------------


def test_global_name_defaults_to_host() -> None:
    assert gen({"/a": {"get": op("a")}}, global_name="").global_name == "host"
    assert gen({"/a": {"get": op("a")}}).global_name == "host"
    assert gen({"/a": {"get": op("a")}}, global_name="memory").global_name == "memory"


@pytest.mark.parametrize(
    ("version", "shown"),
    [("2.0", '"2.0"'), (None, '""'), ("", '""'), (" 3.0.3", '" 3.0.3"'), ("4.0", '"4.0"')],
)
def test_unsupported_openapi_version(version: str | None, shown: str) -> None:
    d = doc({"/a": {"get": op("a")}})
    if version is None:
        del d["openapi"]
    else:
        d["openapi"] = version
    with pytest.raises(SpecError) as exc:
        check_version(Source(name=NAME, doc=d))
    assert str(exc.value) == f"specgen: unsupported openapi version {shown} (need 3.x)"


@pytest.mark.parametrize("version", ["3.0.0", "3.0.3", "3.1.0", "3.1.1"])
def test_supported_openapi_versions(version: str) -> None:
    d = doc({"/a": {"get": op("a")}}, openapi=version)
    assert check_version(Source(name=NAME, doc=d)) == version


@pytest.mark.parametrize("paths", [None, {}])
def test_no_paths(paths: Any) -> None:
    assert refusal(paths) == "specgen: spec declares no paths"


def test_null_paths() -> None:
    d = doc(None)
    d["paths"] = None
    with pytest.raises(SpecError, match=r"^specgen: spec declares no paths$"):
        generate(d, name=NAME)


def test_paths_are_processed_in_byte_order() -> None:
    g = gen({"/b": {"get": op("b")}, "/B": {"get": op("B")}, "/a": {"get": op("a")}})
    assert names(g) == ["B", "a", "b"]


# -- differences on purpose: $refs are resolved -------------------------------------------


def test_path_item_ref_is_resolved() -> None:
    components = {"x-items": {"Light": {"get": op("getLight")}}}
    g = gen({"/lights": {"$ref": "#/components/x-items/Light"}}, top={"components": components})
    assert allow(g) == ["GET /lights"]
    assert names(g) == ["getLight"]


def test_ref_pointers_are_decoded_per_rfc_6901_including_percent_encoding() -> None:
    components = {"x-items": {"a/b c~d": {"get": op("escaped")}}}
    ref = "#/components/x-items/a~1b%20c~0d"
    g = gen({"/x": {"$ref": ref}}, top={"components": components})
    assert names(g) == ["escaped"]


def test_parameter_and_request_body_refs_are_resolved() -> None:
    components = {
        "parameters": {"Q": param("q", "query", True), "Id": param("id", "path", True)},
        "requestBodies": {"B": {"content": {"application/json": {"schema": {}}}}},
    }
    paths = {
        "/search": {"get": op("search", parameters=[{"$ref": "#/components/parameters/Q"}])},
        "/docs/{id}": {
            "parameters": [{"$ref": "#/components/parameters/Id"}],
            "put": op("putDoc", requestBody={"$ref": "#/components/requestBodies/B"}),
        },
    }
    g = gen(paths, top={"components": components})
    assert names(g) == ["putDoc"]
    assert g.operations[0].arg_list == ("id", "body")
    assert [str(s) for s in g.skipped] == [f'GET /search: requires query "q", {REQUIRES}']


def test_chained_refs_are_followed() -> None:
    components = {"x-items": {"A": {"$ref": "#/components/x-items/B"}, "B": {"get": op("b")}}}
    g = gen({"/x": {"$ref": "#/components/x-items/A"}}, top={"components": components})
    assert names(g) == ["b"]


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (
            {"/a": {"$ref": "other.json#/x"}},
            'specgen: doc.json: path "/a": $ref "other.json#/x" points outside the document; '
            "only local references (#/...) are resolved, so bundle the document first",
        ),
        (
            {"/a": {"$ref": "https://example.com/api.json#/paths/~1a"}},
            'specgen: doc.json: path "/a": $ref "https://example.com/api.json#/paths/~1a" '
            "points outside the document; only local references (#/...) are resolved, so "
            "bundle the document first",
        ),
        (
            {"/a": {"$ref": "#/components/x-items/missing"}},
            'specgen: doc.json: path "/a": $ref "#/components/x-items/missing" does not resolve',
        ),
        (
            {"/a": {"get": op("a", parameters=[{"$ref": "other.yaml#/p"}])}},
            'specgen: doc.json: GET /a parameter 0: $ref "other.yaml#/p" points outside the '
            "document; only local references (#/...) are resolved, so bundle the document first",
        ),
        (
            {"/a": {"get": op("a", parameters=[{"$ref": "#/components/parameters/nope"}])}},
            'specgen: doc.json: GET /a parameter 0: $ref "#/components/parameters/nope" does not resolve',
        ),
        (
            {"/a": {"post": op("a", requestBody={"$ref": "#/nope"})}},
            'specgen: doc.json: POST /a requestBody: $ref "#/nope" does not resolve',
        ),
        (
            {"/a": {"$ref": "#/components/x-items/loop"}},
            'specgen: doc.json: path "/a": $ref "#/components/x-items/loop" is circular',
        ),
        (
            {"/a": {"$ref": 7}},
            'specgen: doc.json: path "/a": $ref must be a string',
        ),
    ],
)
def test_remote_unresolvable_and_circular_refs_are_one_line_errors(
    paths: Any, message: str
) -> None:
    components = {"x-items": {"loop": {"$ref": "#/components/x-items/loop"}}}
    assert refusal(paths, top={"components": components}) == message


def test_a_ref_on_a_head_operation_is_still_followed() -> None:
    # classifyParams runs for HEAD/OPTIONS/TRACE too, so a broken ref there is an error
    paths = {"/a": {"get": op("a"), "head": op(parameters=[{"$ref": "#/missing"}])}}
    assert "does not resolve" in refusal(paths)


# -- deriveRoute ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "route", "args"),
    [
        ("/lights/{id}", "/lights/*", ("id",)),
        ("/rooms/{room}/lights", "/rooms/*/lights", ("room",)),
        ("/", "/", ()),
        ("/a/{x}/b/{y}", "/a/*/b/*", ("x", "y")),
    ],
)
def test_derive_route(template: str, route: str, args: tuple[str, ...]) -> None:
    g = gen({template: {"get": op("x")}})
    assert allow(g) == [f"GET {route}"]
    assert g.operations[0].args == args
    assert g.operations[0].template == template


def test_param_names_come_from_the_template_not_the_parameter_list() -> None:
    g = gen({"/a/{first}/{second}": {"get": op("x", parameters=[param("zzz", "path", True)])}})
    assert g.operations[0].args == ("first", "second")


@pytest.mark.parametrize("path", ["lights", "", "X-y", "*"])
def test_path_must_start_with_a_slash(path: str) -> None:
    assert refusal({path: {"get": op("x")}}) == f'specgen: path "{path}" must start with /'


def test_path_must_start_with_a_slash_even_with_a_server_prefix() -> None:
    # "/api" + "lights" must not become the route "/apilights"
    assert refusal({"lights": {"get": op("x")}}, prefix="/api") == (
        'specgen: path "lights" must start with /'
    )


def test_extensions_of_the_paths_object_are_not_paths() -> None:
    g = gen({"x-internal": {"note": 1}, "/a": {"get": op("a")}}, prefix="/api")
    assert allow(g) == ["GET /api/a"]


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/x/{a\nb}", '"/x/{a\\nb}"'),
        ("/x\t", '"/x\\t"'),
        ("/x\x7f", '"/x\\x7f"'),
        ("/x\x85", '"/x\\u0085"'),
        ("/x\u2028", '"/x\\u2028"'),
        ("/x\u2029y", '"/x\\u2029y"'),
    ],
)
def test_control_characters_in_a_path_are_refused(path: str, shown: str) -> None:
    assert refusal({path: {"get": op("x")}}) == (
        f"specgen: path {shown} contains a control character or line terminator"
    )


def test_partial_segment_parameter_is_skipped_with_its_reason() -> None:
    g = gen({"/files/{name}.json": {"get": op("getFile")}, "/a": {"get": op("a")}})
    assert [str(s) for s in g.skipped] == [
        'GET /files/{name}.json: has a parameter that is only part of a segment ("{name}.json"); '
        "a grant's * stands for a whole segment"
    ]
    assert names(g) == ["a"]


@pytest.mark.parametrize("seg", ["{a}{b}", "x{a}", "{a}x", "{a", "a}", "{{a}}"])
def test_other_mixed_segments_are_skipped(seg: str) -> None:
    g = gen({f"/p/{seg}": {"get": op("x")}, "/a": {"get": op("a")}})
    assert len(g.skipped) == 1
    assert "only part of a segment" in g.skipped[0].reason


def test_empty_parameter_is_skipped() -> None:
    g = gen({"/x/{}": {"get": op("x")}, "/a": {"get": op("a")}})
    assert [str(s) for s in g.skipped] == ["GET /x/{}: has an empty {} parameter"]


@pytest.mark.parametrize(
    ("path", "route", "error"),
    [
        ("/lights/", "/lights/", 'path must not contain empty, dot, traversal, or ";" segments'),
        ("/a/../b", "/a/../b", 'path must not contain empty, dot, traversal, or ";" segments'),
        ("/a/..;/b", "/a/..;/b", 'path must not contain empty, dot, traversal, or ";" segments'),
        ("/a//b", "/a//b", 'path must not contain empty, dot, traversal, or ";" segments'),
        ("/a b", "/a b", "path contains bytes that require wire encoding"),
        ("/a/%41", "/a/%41", "path must be decoded and canonical"),
        ("/a/{id}/b*", "/a/*/b*", "wildcard must occupy a complete path segment"),
        ("/q?x=1", "/q?x=1", "path contains a backslash, control character, query, or fragment"),
    ],
)
def test_paths_the_broker_refuses_are_skipped_naming_the_rule(
    path: str, route: str, error: str
) -> None:
    g = gen({path: {"get": op("x")}, "/ok": {"get": op("ok")}})
    assert [str(s) for s in g.skipped] == [
        f'GET {path}: maps to route "{route}", which a grant cannot hold: {error}'
    ]
    assert allow(g) == ["GET /ok"]


def test_strict_turns_every_skip_into_an_error() -> None:
    paths = {
        "/lights/": {"get": op("a")},
        "/files/{n}.json": {"get": op("b")},
        "/ok": {"get": op("ok"), "options": op("pre")},
    }
    assert refusal(paths, strict=True) == (
        "specgen: --strict: cannot generate GET /files/{n}.json: has a parameter that is only "
        'part of a segment ("{n}.json"); a grant\'s * stands for a whole segment (and 2 more)'
    )
    assert refusal({"/ok": {"get": op("ok"), "head": op()}}, strict=True) == (
        f"specgen: --strict: cannot generate HEAD /ok: {SKIP_VERB}"
    )
    # without skips --strict changes nothing
    assert allow(gen({"/ok": {"get": op("ok")}}, strict=True)) == ["GET /ok"]


def test_two_templates_may_collapse_to_one_route() -> None:
    g = gen({"/a/{x}": {"get": op("byX")}, "/a/{y}": {"get": op("byY")}})
    assert allow(g) == ["GET /a/*"]
    assert names(g) == ["byX", "byY"]


# -- verbs --------------------------------------------------------------------------------


def test_verbs_in_fixed_order_and_head_options_trace_skipped() -> None:
    item = {
        v: op(f"{v}X")
        for v in ("trace", "options", "head", "patch", "delete", "post", "put", "get")
    }
    g = gen({"/x": item})
    assert names(g) == ["getX", "putX", "postX", "deleteX", "patchX"]
    assert [str(s) for s in g.skipped] == [
        f"HEAD /x: {SKIP_VERB}",
        f"OPTIONS /x: {SKIP_VERB}",
        f"TRACE /x: {SKIP_VERB}",
    ]
    assert SKIP_VERB == "host-API grants enforce only GET/PUT/POST/DELETE/PATCH"


def test_reference_options_case() -> None:
    d = {
        "openapi": "3.1.0",
        "info": {"title": "t"},
        "paths": {
            "/lights": {
                "get": {"operationId": "listLights"},
                "options": {"operationId": "preflightLights"},
            }
        },
    }
    g = generate(d, name=NAME, compat="reference")
    assert allow(g) == ["GET /lights"]
    assert [f"{s.method} {s.path}" for s in g.skipped] == ["OPTIONS /lights"]
    assert "preflightLights" not in artifacts(g)["preamble.js"]


def test_only_unsupported_verbs_is_an_error() -> None:
    assert refusal({"/x": {"head": op("h"), "options": op("o")}}) == (
        "specgen: spec declares paths but no supported operations (GET/PUT/POST/DELETE/PATCH)"
    )


def test_only_skipped_operations_is_an_error() -> None:
    assert "no supported operations" in refusal({"/x/": {"get": op("h")}})


def test_path_item_keys_that_are_not_verbs_are_ignored() -> None:
    g = gen({"/x": {"summary": "s", "description": "d", "servers": [], "get": op("x")}})
    assert names(g) == ["x"]


# -- classifyParams -----------------------------------------------------------------------


def test_required_query_header_cookie_skip_the_operation() -> None:
    paths = {
        "/search": {"get": op("search", parameters=[param("q", "query", True)])},
        "/admin": {"get": op("admin", parameters=[param("X-Admin", "header", True)])},
        "/jar": {"get": op("jar", parameters=[param("sid", "cookie", True)])},
        "/feed": {"get": op("feed")},
    }
    g = gen(paths)
    assert [str(s) for s in g.skipped] == [
        f'GET /admin: requires header "X-Admin", {REQUIRES}',
        f'GET /jar: requires cookie "sid", {REQUIRES}',
        f'GET /search: requires query "q", {REQUIRES}',
    ]
    assert names(g) == ["feed"]
    assert allow(g) == ["GET /feed"]


def test_required_parameters_are_listed_and_optional_ones_then_not_mentioned() -> None:
    params = [param("a", "query", True), param("b", "query"), param("c", "header", True)]
    g = gen({"/x": {"get": op("x", parameters=params)}, "/ok": {"get": op("ok")}})
    assert [s.reason for s in g.skipped] == [f'requires query "a", header "c", {REQUIRES}']
    assert g.warnings == ()


def test_optional_parameters_give_exactly_one_warning() -> None:
    params = [
        param("per_page", "query"),
        param("order", "query", False),
        param("X-Trace", "header"),
    ]
    g = gen({"/feed": {"get": op("feed", parameters=params)}, "/other": {"get": op("other")}})
    assert g.warnings == (
        f'GET /feed: optional query "per_page", query "order", header "X-Trace" {OPTIONAL}',
    )
    assert names(g) == ["feed", "other"]
    assert g.skipped == ()


def test_the_page_warning_text_with_the_server_prefix() -> None:
    params = [param(n, "query") for n in ("per_page", "order", "direction", "cursor")]
    template = "/accounts/{account_id}/agent-memory/namespaces"
    g = gen({template: {"get": op("list", parameters=params)}}, prefix="/client/v4")
    assert g.warnings == (
        'GET /client/v4/accounts/{account_id}/agent-memory/namespaces: optional query "per_page", '
        'query "order", query "direction", query "cursor" cannot be sent through the broker, so '
        "the generated method always calls the bare route",
    )


def test_path_item_parameters_then_operation_parameters_merged_by_location_and_name() -> None:
    item = {
        "parameters": [param("q", "query", True), param("a", "header"), param("id", "path", True)],
        # the operation's optional q overrides the item's required one; position stays
        "get": op("x", parameters=[param(" q ", "QUERY"), param("b", "cookie")]),
        # a different location is a different parameter
        "put": op("y", parameters=[param("q", "header")]),
    }
    g = gen({"/x/{id}": item})
    assert g.warnings == (f'GET /x/{{id}}: optional query "q", header "a", cookie "b" {OPTIONAL}',)
    assert [str(s) for s in g.skipped] == [f'PUT /x/{{id}}: requires query "q", {REQUIRES}']


def test_path_parameters_never_classify() -> None:
    g = gen(
        {
            "/x/{id}": {
                "get": op("x", parameters=[param("id", "path", True), param("other", "path", True)])
            }
        }
    )
    assert g.warnings == ()
    assert g.skipped == ()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            param("b", "body"),
            'specgen: GET /a declares parameter "b" with unsupported location "body" (want path/query/header/cookie)',
        ),
        (
            {"name": " b "},
            'specgen: GET /a declares parameter "b" with unsupported location "" (want path/query/header/cookie)',
        ),
        (
            param("f", "formData"),
            'specgen: GET /a declares parameter "f" with unsupported location "formData" (want path/query/header/cookie)',
        ),
    ],
)
def test_unsupported_parameter_location(entry: dict[str, Any], message: str) -> None:
    assert refusal({"/a": {"get": op("a", parameters=[entry])}}) == message


def test_unsupported_location_on_head_is_still_an_error() -> None:
    paths = {"/a": {"get": op("a"), "head": op(parameters=[param("b", "body")])}}
    assert refusal(paths) == (
        'specgen: HEAD /a declares parameter "b" with unsupported location "body" (want path/query/header/cookie)'
    )


def test_location_is_trimmed_and_case_folded() -> None:
    g = gen(
        {"/a": {"get": op("a", parameters=[param("q", " Query ", True)])}, "/b": {"get": op("b")}}
    )
    assert [s.reason for s in g.skipped] == [f'requires query "q", {REQUIRES}']


def test_required_must_be_a_real_true() -> None:
    # only `true` makes a parameter required; anything else is optional (with a warning)
    g = gen({"/a": {"get": op("a", parameters=[param("q", "query", required=False)])}})
    assert len(g.warnings) == 1


# -- operation names, and the derived name for a missing operationId ---------------------


@pytest.mark.parametrize(
    ("op_id", "name"),
    [
        ("do-it", "do_it"),
        ("do.it", "do_it"),
        ("2fa", "_2fa"),
        ("café", "caf_"),
        ("a b", "a_b"),
        ("$x_Y9", "$x_Y9"),
        ("a\u00e9\U0001f600b", "a__b"),
        ("delete", "delete"),  # reserved words are fine as (quoted) method names
        ("Get", "Get"),  # the client-method check is case-sensitive
    ],
)
def test_method_names_are_js_ident_of_the_operation_id(op_id: str, name: str) -> None:
    g = gen({"/a": {"get": op(op_id)}})
    assert names(g) == [name]
    assert f"h[{json.dumps(name)}] = () => h.get(" in artifacts(g)["preamble.js"]


@pytest.mark.parametrize(
    "op_id",
    [
        "__proto__",
        "constructor",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    ],
)
def test_object_prototype_names_are_refused(op_id: str) -> None:
    assert refusal({"/a": {"get": op(op_id)}}) == (
        f'specgen: operationId "{op_id}" yields method name "{op_id}", a name every object '
        "inherits from Object.prototype; rename the operation"
    )


@pytest.mark.parametrize("op_id", ["call", "del", "get", "patch", "post", "put"])
def test_client_method_names_are_refused(op_id: str) -> None:
    assert refusal({"/a": {"get": op(op_id)}}) == (
        f'specgen: operationId "{op_id}" yields method name "{op_id}", which is one of the '
        "injected client's own methods (call, del, get, patch, post, put); rename the operation"
    )


def test_reference_client_method_case_on_delete() -> None:
    assert "injected client's own methods" in refusal({"/a": {"delete": op("del")}})


def test_colliding_method_names_are_refused() -> None:
    assert refusal({"/a": {"get": op("do-it")}, "/b": {"get": op("do.it")}}) == (
        'specgen: operationId "do.it" collides with another method name "do_it"'
    )
    assert "collides" in refusal({"/a": {"get": op("x"), "put": op("x")}})


def test_a_skipped_operation_needs_no_operation_id_and_takes_no_name() -> None:
    g = gen({"/a": {"get": op("dup"), "head": op("dup"), "options": op()}})
    assert names(g) == ["dup"]
    assert g.warnings == ()


def test_missing_operation_id_gets_a_derived_name_and_a_warning() -> None:
    paths = {
        "/": {"get": op()},
        "/lights/{id}/state": {"get": op(), "put": op(operationId="")},
        "/item-list": {"delete": op()},
    }
    g = gen(paths, prefix="/api")
    # "/api" + "/" is "/api/", a trailing slash the broker refuses: skipped, not named
    assert [str(s) for s in g.skipped] == [
        'GET /api/: maps to route "/api/", which a grant cannot hold: '
        'path must not contain empty, dot, traversal, or ";" segments'
    ]
    assert names(gen({"/": {"get": op()}})) == ["get_root"]
    assert names(g) == ["delete_item_list", "get_lights_by_id_state", "put_lights_by_id_state"]
    assert g.warnings == tuple(
        f'{m} {p} has no operationId, so its method is named "{n}" after its verb and path; '
        "give it an operationId for a name that survives path changes"
        for m, p, n in [
            ("DELETE", "/api/item-list", "delete_item_list"),
            ("GET", "/api/lights/{id}/state", "get_lights_by_id_state"),
            ("PUT", "/api/lights/{id}/state", "put_lights_by_id_state"),
        ]
    )


def test_derived_names_avoid_taken_names() -> None:
    g = gen({"/a": {"get": op("get_b")}, "/b": {"get": op()}})
    assert names(g) == ["get_b", "get_b_"]
    assert '"get_b_"' in g.warnings[0]


def test_derived_names_yield_to_later_explicit_operation_ids() -> None:
    # "/a" comes first and has no operationId; "/b" is explicitly named get_a. The made-up
    # name must step aside instead of turning the real one into a collision.
    g = gen({"/a": {"get": op()}, "/b": {"get": op("get_a")}})
    assert names(g) == ["get_a_", "get_a"]
    assert '"get_a_"' in g.warnings[0]


def test_derived_names_do_not_depend_on_the_server_prefix() -> None:
    paths = {"/lights/{id}": {"get": op()}}
    assert names(gen(paths)) == names(gen(paths, prefix="/v2")) == ["get_lights_by_id"]


# -- arguments and bodies -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "verb", "body", "arg_list"),
    [
        ("/things/{h}", "get", False, ("h_",)),
        ("/items/{item-id}", "get", False, ("item_id",)),
        ("/nodes/{default}", "delete", False, ("default_",)),
        ("/pairs/{a-b}/{a.b}", "get", False, ("a_b", "a_b_")),
        ("/docs/{body}", "put", True, ("body_", "body")),
        ("/docs/{body}", "get", False, ("body",)),
        ("/x/{h}/{h_}", "get", False, ("h_", "h__")),
        ("/x/{class}/{2}", "post", True, ("class_", "_2", "body")),
        ("/x/{}y", "get", False, None),
    ],
)
def test_argument_names(
    template: str, verb: str, body: bool, arg_list: tuple[str, ...] | None
) -> None:
    extra = {"requestBody": {"content": {}}} if body else {}
    g = gen({template: {verb: op("x", **extra)}, "/ok": {"get": op("ok")}})
    got = {o.name: o.arg_list for o in g.operations}.get("x")
    assert got == arg_list


@pytest.mark.parametrize(
    ("verb", "client", "has_body"),
    [
        ("get", "get", False),
        ("put", "put", True),
        ("post", "post", True),
        ("delete", "del", False),
        ("patch", "patch", True),
    ],
)
def test_a_body_is_sent_only_by_put_post_and_patch(verb: str, client: str, has_body: bool) -> None:
    g = gen({"/x": {verb: op("x", requestBody={"content": {}})}})
    o = g.operations[0]
    assert (o.has_body, o.client_method) == (has_body, client)
    expected = f'h["x"] = ({"body" if has_body else ""}) => h.{client}("/x"{", body" if has_body else ""});'
    assert expected in artifacts(g)["preamble.js"]


def test_no_request_body_means_no_body_argument() -> None:
    g = gen({"/events": {"post": op("trigger")}})
    assert g.operations[0].arg_list == ()
    assert 'h["trigger"] = () => h.post("/events");' in artifacts(g)["preamble.js"]
    assert "  host.trigger()  ->  POST /events\n" in artifacts(g)["description.txt"]


def test_null_request_body_counts_as_present() -> None:
    # the reference decodes `"requestBody": null` as present (raw bytes "null")
    assert gen({"/a": {"post": op("a", requestBody=None)}}).operations[0].has_body


# -- summaries -------------------------------------------------------------------------------


def test_summary_folding_reference_case() -> None:
    assert one_line("Get x.\n  host.deleteAll()  ->  DELETE /everything") == (
        "Get x. host.deleteAll() -> DELETE /everything"
    )


@pytest.mark.parametrize(
    ("raw", "folded"),
    [
        ("  a\tb\r\nc\v\fd  ", "a b c d"),
        ("a\u0085b\u00a0c\u1680d", "a b c d"),
        ("a\u2000\u200ab\u2028c\u2029d", "a b c d"),
        ("a\u202fb\u205fc\u3000d", "a b c d"),
        ("a\x00b\x07c\x1bd\x7fe\x9ff", "a b c d e f"),
        ("", ""),
        ("\n\n", ""),
    ],
)
def test_summary_folding(raw: str, folded: str) -> None:
    assert one_line(raw) == folded
    g = gen({"/a": {"get": op("a", summary=raw)}})
    assert g.operations[0].summary == folded


def test_summary_line_only_when_non_empty() -> None:
    g = gen({"/a": {"get": op("a", summary=" \n ")}, "/b": {"get": op("b", summary="B.")}})
    description = artifacts(g)["description.txt"]
    assert description.endswith("  host.a()  ->  GET /a\n  host.b()  ->  GET /b\n      B.\n")


# -- health check ----------------------------------------------------------------------------


def test_health_note_text() -> None:
    assert HEALTH_NOTE == (
        "no operation is marked x-plimsoll-health-check, so the profile gets no health_check: "
        "after an upstream 503 the per-run breaker waits out its full cooldown instead of "
        "probing for recovery. Mark the one concrete GET that reports whether the API can take "
        "traffic again"
    )


@pytest.mark.parametrize(
    "paths",
    [
        {"/status": {"get": op("status")}},
        {"/livez": {"get": op("l")}, "/readyz": {"get": op("r")}},
        {"/v1/healthz": {"get": op("h")}},
        {"/capacity": {"get": op("c")}},
        {"/lights": {"get": op("l", **{"x-plimsoll-health-check": False})}},
    ],
)
def test_no_marker_no_health_check_whatever_the_names(paths: dict[str, Any]) -> None:
    g = gen(paths)
    assert (g.health_check, g.health_note) == ("", HEALTH_NOTE)
    assert "health_check.txt" not in artifacts(g)


def test_marked_probe_is_the_health_check() -> None:
    g = gen({"/probe": {"get": op("probe", **{"x-plimsoll-health-check": True})}})
    assert (g.health_check, g.health_note) == ("GET /probe", "")
    assert artifacts(g)["health_check.txt"] == "GET /probe\n"
    assert allow(g) == ["GET /probe"]
    assert names(g) == ["probe"]


def test_marked_beat_beside_unmarked_capacity() -> None:
    paths = {
        "/beat": {"get": op("beat", **{"x-plimsoll-health-check": True})},
        "/capacity": {"get": op("cap")},
    }
    assert gen(paths).health_check == "GET /beat"


def test_health_check_carries_the_server_prefix() -> None:
    g = gen({"/status": {"get": op("s", **{"x-plimsoll-health-check": True})}}, prefix="/client/v4")
    assert g.health_check == "GET /client/v4/status"


MARK = {"x-plimsoll-health-check": True}


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (
            {"/x": {"get": op("a"), "post": op("x", **MARK)}},
            "specgen: POST /x is marked x-plimsoll-health-check, but a health_check probe must be GET",
        ),
        (
            {"/x": {"get": op("a"), "head": op(**MARK)}},
            "specgen: HEAD /x is marked x-plimsoll-health-check, but a health_check probe must be GET",
        ),
        (
            {"/x/{id}": {"get": op("x", **MARK)}},
            "specgen: GET /x/{id} is marked x-plimsoll-health-check, but a health_check must be a "
            "concrete path (no path parameters)",
        ),
        (
            {
                "/x": {"get": op("x", parameters=[param("q", "query", True)], **MARK)},
                "/y": {"get": op("y")},
            },
            f'specgen: GET /x is marked x-plimsoll-health-check, but it requires query "q", {REQUIRES}',
        ),
        (
            {"/x/": {"get": op("x", **MARK)}, "/y": {"get": op("y")}},
            'specgen: GET /x/ is marked x-plimsoll-health-check, but it maps to route "/x/", which a '
            'grant cannot hold: path must not contain empty, dot, traversal, or ";" segments',
        ),
        (
            {
                "/b": {"get": op("b", **MARK)},
                "/a": {"get": op("a", **MARK)},
                "/c": {"get": op("c", **MARK)},
            },
            "specgen: 3 operations are marked x-plimsoll-health-check (GET /a, GET /b, GET /c); a run "
            "has a single health probe, so mark exactly one",
        ),
        (
            {"/x": {"get": op("x", **{"x-plimsoll-health-check": "yes"})}},
            "specgen: GET /x: x-plimsoll-health-check must be true or false",
        ),
    ],
)
def test_health_marker_errors(paths: dict[str, Any], message: str) -> None:
    assert refusal(paths) == message


def test_health_note_exactly_when_no_health_check() -> None:
    for paths in ({"/a": {"get": op("a")}}, {"/a": {"get": op("a", **MARK)}}):
        g = gen(paths)
        assert bool(g.health_note) != bool(g.health_check)


# -- ordering -------------------------------------------------------------------------------


def test_operations_follow_paths_allow_follows_routes() -> None:
    g = gen({"/a/{id}": {"get": op("byId")}, "/a/b": {"get": op("b")}})
    assert names(g) == ["b", "byId"]
    assert allow(g) == ["GET /a/*", "GET /a/b"]


def test_allow_method_order_within_a_route() -> None:
    item = {v: op(f"{v}X") for v in ("get", "put", "post", "delete", "patch")}
    assert allow(gen({"/x": item})) == ["DELETE /x", "GET /x", "PATCH /x", "POST /x", "PUT /x"]


def test_skips_and_warnings_keep_processing_order() -> None:
    paths = {
        "/c": {"get": op("c", parameters=[param("q", "query")]), "head": op()},
        "/a": {
            "get": op("a", parameters=[param("q", "query", True)]),
            "put": op("aput", parameters=[param("z", "query")]),
        },
        "/b/": {"get": op("b")},
    }
    g = gen(paths)
    assert [f"{s.method} {s.path}" for s in g.skipped] == ["GET /a", "GET /b/", "HEAD /c"]
    assert [w.split(":")[0] for w in g.warnings] == ["PUT /a", "GET /c"]


def test_smart_home_allow_order() -> None:
    d = json.loads((ROOT / "tests/data/smart-home.openapi.json").read_text())
    g = generate(d, name="smart-home", global_name="home")
    assert allow(g) == [
        "GET /lights",
        "POST /lights",
        "DELETE /lights/*",
        "GET /lights/*",
        "PATCH /lights/*",
        "PUT /lights/*",
        "GET /rooms/*/lights",
        "GET /scenes",
        "GET /status",
    ]
    assert g.skipped == ()
    assert g.health_check == "GET /status"


def test_generation_is_deterministic_and_does_not_touch_the_document() -> None:
    d = json.loads((ROOT / "tests/data/hazards.openapi.json").read_text())
    before = copy.deepcopy(d)
    first = artifacts(generate(d, name="h", global_name="home", prefix="/api/v2"))
    second = artifacts(generate(d, name="h", global_name="home", prefix="/api/v2"))
    assert first == second
    assert d == before


# -- title and version ----------------------------------------------------------------------


def test_title_and_version_are_trimmed() -> None:
    g = generate(
        doc({"/a": {"get": op("a")}}, info={"title": " T\n", "version": "\t1.0 "}), name=NAME
    )
    assert (g.title, g.version) == ("T", "1.0")


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            {"title": "T\nx"},
            'specgen: info.title "T\\nx" contains a control character or line terminator',
        ),
        (
            {"title": "T", "version": "1\n2"},
            'specgen: info.version "1\\n2" contains a control character or line terminator',
        ),
        (
            {"version": "1\u20282"},
            'specgen: info.version "1\\u20282" contains a control character or line terminator',
        ),
        (
            {"title": "a\u2029b"},
            'specgen: info.title "a\\u2029b" contains a control character or line terminator',
        ),
        (
            {"title": "a\x00b"},
            'specgen: info.title "a\\x00b" contains a control character or line terminator',
        ),
        ({"title": 5}, "specgen: info.title must be a string"),
        ({"version": 1.0}, "specgen: info.version must be a string"),
    ],
)
def test_title_and_version_refusals(info: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as exc:
        generate(doc({"/a": {"get": op("a")}}, info=info), name=NAME)
    assert str(exc.value) == message


def test_title_and_version_are_checked_last() -> None:
    bad = {"title": "T\nx"}
    with pytest.raises(SpecError, match="no paths"):
        generate(doc({}, info=bad), name=NAME)
    with pytest.raises(SpecError, match=r"no supported operations"):
        generate(doc({"/x": {"head": op()}}, info=bad), name=NAME, compat="reference")


def test_missing_title_reads_host_api_and_version_gets_a_literal_v() -> None:
    g = generate(
        doc({"/a": {"get": op("a")}}, info={"version": "v2"}), name=NAME, global_name="api"
    )
    files = artifacts(g)
    assert files["description.txt"].startswith(
        "host API (vv2).\nAgent code reaches it through the brokered `api.*` client."
    )
    assert files["preamble.js"].startswith(
        '// Generated by specgen from "", version "v2". Do not edit by hand.\n'
    )
    g = generate(doc({"/a": {"get": op("a")}}, info={"title": "T"}), name=NAME)
    files = artifacts(g)
    assert files["description.txt"].startswith("T.\n")
    assert files["preamble.js"].startswith(
        '// Generated by specgen from "T". Do not edit by hand.\n'
    )


# -- JS string escaping -----------------------------------------------------------------------


def test_route_literals_and_names_are_escaped_for_js_and_html() -> None:
    g = generate(doc({"/a&b/{id}": {"get": op("a")}}), name=NAME, global_name="</script>\u2028")
    preamble = artifacts(g)["preamble.js"]
    assert '  const h = globalThis["\\u003c/script\\u003e\\u2028"];\n' in preamble
    assert '["a", {method: "GET", route: "/a\\u0026b/*"}, 1, 0],' in preamble
    assert "&" not in preamble.split("\n", 1)[1]


# -- server path ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://api.cloudflare.com/client/v4", "/client/v4"),
        ("https://api.example.com/", ""),
        ("https://api.example.com", ""),
        ("https://api.example.com/v1/", "/v1"),
        ("/api", "/api"),
        ("api/v1", "/api/v1"),
        ("./api", "/api"),
        ("/", ""),
        ("", ""),
        ("https://x.example.com/v1?x=1#f", "/v1"),
    ],
)
def test_server_url_path(url: str, path: str) -> None:
    assert url_path(url) == path


@pytest.mark.parametrize("url", ["http://[::1/v1", "https://[api.example.com/v1"])
def test_a_server_url_urlsplit_rejects_is_a_one_line_refusal(url: str) -> None:
    with pytest.raises(SpecError) as exc:
        server_prefix({"servers": [{"url": url}]})
    assert str(exc.value).startswith(f'specgen: server URL "{url}" is not a URL: ')
    with pytest.raises(SpecError):
        server_prefix({}, url)


def test_server_prefix_rules() -> None:
    assert server_prefix({}) == ""
    assert server_prefix({"servers": []}) == ""
    assert server_prefix({"servers": [{"url": "https://a.example.com/client/v4"}]}) == "/client/v4"
    same = {"servers": [{"url": "https://a.example.com/v1"}, {"url": "https://b.example.com/v1/"}]}
    assert server_prefix(same) == "/v1"
    variables = {
        "servers": [
            {
                "url": "https://{host}.example.com/{base}/{ver}",
                "variables": {
                    "host": {"default": "eu"},
                    "base": {"default": "api"},
                    "ver": {"default": "v2", "enum": ["v1", "v2"]},
                },
            }
        ]
    }
    assert server_prefix(variables) == "/api/v2"


def test_servers_that_disagree_are_an_error_unless_one_is_chosen() -> None:
    d = {
        "servers": [
            {"url": "https://a.example.com/v1"},
            {"url": "https://b.example.com/v2"},
            {"url": "https://c.example.com"},
        ]
    }
    with pytest.raises(SpecError) as exc:
        server_prefix(d)
    assert str(exc.value) == (
        "specgen: the document's servers disagree on the path (/v1, /v2, /); choose one with --server URL"
    )
    assert server_prefix(d, "https://b.example.com/v2") == "/v2"
    assert server_prefix(d, "https://elsewhere.example.com") == ""


def test_server_variable_without_default_is_an_error() -> None:
    with pytest.raises(SpecError) as exc:
        server_prefix({"servers": [{"url": "https://x.example.com/{ver}"}]})
    assert (
        str(exc.value)
        == 'specgen: server URL "https://x.example.com/{ver}" uses variable {ver} without a default'
    )


def test_prefix_reaches_routes_preamble_and_description() -> None:
    g = gen({"/lights/{id}": {"get": op("getLight", summary="One.")}}, prefix="/client/v4")
    files = artifacts(g)
    assert allow(g) == ["GET /client/v4/lights/*"]
    assert 'h["getLight"] = (id) => h.get("/client/v4/lights/" + id);' in files["preamble.js"]
    assert "  host.getLight(id)  ->  GET /client/v4/lights/{id}\n" in files["description.txt"]
