"""The default build: parameters as data, and nothing valid refused whole.

test_specgen_rules.py and test_specgen_cli.py pin the reference's behaviour, which
`--compat reference` keeps; this file tests where the default build differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from specgen.build import Options, run
from specgen.cli import cli
from specgen.errors import SpecError
from specgen.naming import MAX_NAME
from specgen.operations import SKIP_TRACE, Generated, generate
from specgen.params import ParameterLocation, SchemaSummary
from specgen.render import artifacts

ROOT = Path(__file__).resolve().parents[2]
MEM0 = ROOT / "examples/mem0_grant/mem0.openapi.json"


def doc(paths: Any, **top: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **top}


def gen(paths: Any, **kw: Any) -> Generated:
    return generate(doc(paths), name="doc.json", **kw)


def op(op_id: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"responses": {"200": {"description": "OK"}}, **extra}
    if op_id is not None:
        out["operationId"] = op_id
    return out


def q(name: str, where: str = "query", **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": {"type": "string"}, **extra}


def allow_json(g: Generated) -> list[Any]:
    return json.loads(artifacts(g)["allow.json"])


def cli_run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


# -- parameters as data -------------------------------------------------------------------


def test_parameters_merge_path_item_and_operation_by_name_and_location() -> None:
    paths = {
        "/a/{id}": {
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                q("limit", schema={"type": "string"}),
                q("X-Trace", "header"),
                {"$ref": "#/components/parameters/page"},
            ],
            "get": op(
                "a",
                parameters=[
                    q("limit", required=True, schema={"type": "integer"}),
                    q("x-trace", "header", required=True),
                    q("sid", "cookie"),
                    q("filter", style="deepObject", explode=True, schema={"type": "object"}),
                    q("Authorization", "header"),  # ignored, as OpenAPI says
                    q(
                        "ids",
                        style="pipeDelimited",
                        schema={"type": "array", "items": {"type": "integer"}},
                    ),
                ],
            ),
        }
    }
    comps = {"parameters": {"page": q("page", schema={"type": "integer", "enum": [1, 2]})}}
    g = generate(doc(paths, components=comps), name="d")
    [operation] = g.operations
    p = operation.params
    assert [x.name for x in p.path] == ["id"]
    assert [(x.name, x.required, x.schema.type) for x in p.query] == [
        ("limit", True, "integer"),  # the operation's overrides the path item's
        ("page", False, "integer"),
        ("filter", False, "object"),
        ("ids", False, "array"),
    ]
    assert p.query[1].schema == SchemaSummary("integer", ("1", "2"))
    assert (p.query[0].style, p.query[0].explode) == ("form", True)  # OpenAPI's defaults
    assert p.query[2].deep_object and not p.query[0].deep_object
    assert (p.query[3].style, p.query[3].explode, p.query[3].schema.items) == (
        "pipeDelimited",
        False,
        "integer",
    )
    assert [(x.name, x.required, x.style) for x in p.header] == [("x-trace", True, "simple")]
    assert [x.location for x in p.cookie] == [ParameterLocation.COOKIE]
    assert operation.dropped == ('cookie "sid" (a grant sends no cookies)',)
    assert allow_json(g) == [
        {
            "route": "GET /a/*",
            "query": ["limit", "page", "filter", "ids"],
            "headers": ["x-trace"],
            "style": {"filter": "deepObject", "ids": "pipeDelimited"},
        }
    ]


def test_a_required_query_parameter_no_longer_skips_the_operation() -> None:
    g = gen({"/search": {"get": op("search", parameters=[q("q", required=True)])}})
    assert not g.skipped
    assert allow_json(g) == ["GET /search?q"]
    assert not any("does not send" in w for w in g.warnings)  # it sends them now
    src = artifacts(g)["preamble.js"]
    assert '["search", {method: "GET", route: "/search", query: ["q"]}, 0, 2],' in src
    with pytest.raises(SpecError, match="no supported operations"):
        gen(
            {"/search": {"get": op("search", parameters=[q("q", required=True)])}},
            compat="reference",
        )


@pytest.mark.parametrize(
    "header", ["Cookie", "Host", "Connection", "Proxy-Authorization", "X-Forwarded-For"]
)
def test_a_header_the_broker_owns_is_dropped_with_a_warning(header: str) -> None:
    g = gen({"/a": {"get": op("a", parameters=[q(header, "header"), q("X-Ok", "header")])}})
    assert allow_json(g) == [{"route": "GET /a", "headers": ["X-Ok"]}]
    assert g.operations[0].dropped == (f'header "{header}" (the broker sets it)',)
    assert any(f'header "{header}" (the broker sets it) cannot be sent' in w for w in g.warnings)


# -- routes the reference skipped ---------------------------------------------------------


def test_trailing_slash_routes_are_ordinary_and_distinct() -> None:
    g = gen({"/a/": {"get": op("slash")}, "/a": {"get": op("bare")}})
    assert allow_json(g) == ["GET /a", "GET /a/"]
    assert '["slash", {method: "GET", route: "/a/"}, 0, 0],' in artifacts(g)["preamble.js"]
    ref = gen({"/a/": {"get": op("slash")}, "/a": {"get": op("bare")}}, compat="reference")
    assert [str(r) for r in ref.allow] == ["GET /a"]


def test_head_and_options_are_carried_through_call_and_trace_is_not() -> None:
    g = gen({"/a": {"head": op("peek"), "options": op("pre"), "trace": op("echo"), "get": op("a")}})
    assert allow_json(g) == ["GET /a", "HEAD /a", "OPTIONS /a"]
    src = artifacts(g)["preamble.js"]
    assert '["peek", {method: "HEAD", route: "/a"}, 0, 0],' in src
    assert '["pre", {method: "OPTIONS", route: "/a"}, 0, 0],' in src
    assert [(s.method, s.reason) for s in g.skipped] == [("TRACE", SKIP_TRACE)]


@pytest.mark.parametrize(
    ("path", "route", "call"),
    [
        (
            "/files/{name}.json",
            "GET /files/*.json",
            '{method: "GET", route: "/files/*.json"}, 1, 0]',
        ),
        ("/v{n}/x", "GET /v*/x", '{method: "GET", route: "/v*/x"}, 1, 0]'),
        ("/a/pre{id}post", "GET /a/pre*post", '{method: "GET", route: "/a/pre*post"}, 1, 0]'),
    ],
)
def test_one_parameter_inside_a_segment_is_carried(path: str, route: str, call: str) -> None:
    g = gen({path: {"get": op("f")}})
    assert allow_json(g) == [route]
    assert call in artifacts(g)["preamble.js"]


@pytest.mark.parametrize("seg", ["{a}{b}", "{a}-{b}", "{base}...{head}", "{a", "a}", "{{a}}"])
def test_a_segment_the_broker_cannot_split_is_skipped_with_the_rule(seg: str) -> None:
    g = gen({f"/x/{seg}": {"get": op("f")}, "/ok": {"get": op("ok")}})
    [skip] = g.skipped
    assert skip.reason.startswith("has a segment the broker cannot split safely")
    assert "one parameter, with literal text around it" in skip.reason


def test_a_fragment_in_a_path_becomes_the_parameter_it_stands_for() -> None:
    g = gen(
        {
            "/#X-Amz-Target=Svc.A": {"post": op("A")},
            "/#X-Amz-Target=Svc.B": {"post": op("B")},
            "/tags/{arn}#tagKeys": {"delete": op("Untag")},
        }
    )
    assert allow_json(g) == [
        {"route": "POST /", "headers": ["X-Amz-Target"], "body": []},
        "DELETE /tags/*?tagKeys",
    ]
    declared = {str(r): h for r, _, h in g.declared}
    assert declared["POST /"][0].schema.enum == ("Svc.A", "Svc.B")
    src = artifacts(g)["preamble.js"]
    assert '["A", {method: "POST", route: "/", headers: ["X-Amz-Target"]}, 0, 2],' in src


# -- servers and names ----------------------------------------------------------------------


def test_servers_that_disagree_take_the_first_with_a_warning(tmp_path: Path) -> None:
    d = doc({"/a": {"get": op("a")}}, servers=[{"url": "https://x/v1"}, {"url": "https://y/v2"}])
    spec = tmp_path / "d.json"
    spec.write_text(json.dumps(d))
    result = run(str(spec), Options())
    assert [str(r) for r in result.gen.allow] == ["GET /v1/a"]
    assert result.gen.warnings[0] == (
        "the document's servers disagree on the path (/v1, /v2); routes use the first, /v1, "
        "as OpenAPI clients do; choose another with --server URL"
    )
    chosen = run(str(spec), Options(server="https://y/v2"))
    assert [str(r) for r in chosen.gen.allow] == ["GET /v2/a"]
    assert not any("disagree" in w for w in chosen.gen.warnings)
    with pytest.raises(SpecError, match="disagree"):
        run(str(spec), Options(compat="reference"))


@pytest.mark.parametrize(
    ("op_id", "name"),
    [
        ("get", "get_"),
        ("constructor", "constructor_"),
        ("then", "then_"),
        ("__proto__", "__proto___"),
        ("delete", "delete_"),
    ],
)
def test_an_unsafe_operation_id_is_renamed_with_a_warning(op_id: str, name: str) -> None:
    g = gen({"/a": {"get": op(op_id)}, "/b": {"get": op(name)}})
    # the renamed method steps past the name another operationId claims
    assert [o.name for o in g.operations] == [name + "_", name]
    assert any(f'method name "{op_id}"' in w and f'renamed "{name}_"' in w for w in g.warnings)
    again = gen({"/a": {"get": op(op_id)}, "/b": {"get": op(name)}})
    assert [o.name for o in again.operations] == [o.name for o in g.operations]


def test_every_other_rename_is_counted_not_warned_and_long_names_are_bounded() -> None:
    long_a, long_b = "a" * 5000, "a" * 4999 + "b"
    g = gen(
        {"/x": {"get": op("héllo wörld")}, "/y": {"get": op(long_a)}, "/z": {"get": op(long_b)}}
    )
    names = [o.name for o in g.operations]
    assert names[0] == "h_llo_w_rld"
    assert all(len(n) <= MAX_NAME for n in names)
    assert len(set(names)) == 3
    assert any('"héllo wörld" is not a plain JavaScript identifier' in w for w in g.renamed)
    assert sum("is not a plain JavaScript identifier" in w for w in g.renamed) == 3
    assert not any("plain JavaScript identifier" in w for w in g.warnings)


def test_nothing_to_carry_prints_every_skip_reason_before_the_refusal(tmp_path: Path) -> None:
    spec = tmp_path / "d.json"
    spec.write_text(json.dumps(doc({"/a/{x}{y}": {"get": op("a")}, "/b": {"trace": op("b")}})))
    result = cli_run("build", spec, "-o", tmp_path / "out")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("specgen: skipped GET /a/{x}{y} (has a segment the broker cannot")
    assert lines[1] == f"specgen: skipped TRACE /b ({SKIP_TRACE})"
    assert (
        lines[2]
        == "specgen: spec declares paths but none a grant can carry (2 skipped, each listed above)"
    )
    assert "Traceback" not in result.output


# -- Mem0 and check --grants ----------------------------------------------------------------


def test_mem0_carries_55_of_55_routes_with_their_trailing_slashes() -> None:
    result = run(str(MEM0), Options(global_name="mem0"))
    d = json.loads(MEM0.read_text())
    declared = sum(
        1
        for item in d["paths"].values()
        for v in item
        if v in ("get", "post", "put", "patch", "delete")
    )
    assert declared == 55
    assert len(result.gen.operations) == len(result.gen.allow) == 55
    assert not result.gen.skipped
    assert all(r.path.endswith("/") for r in result.gen.allow)
    assert all(p.endswith("/") for p in d["paths"])


def _grants(tmp_path: Path, allow: list[Any]) -> Path:
    g = generate(json.loads(MEM0.read_text()), name="m", global_name="mem0")
    catalog = json.loads(artifacts(g)["allow.json"])
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"m": {"catalog": catalog, "allow": allow}}}))
    return path


def test_check_grants_accepts_declared_parameters_and_pins(tmp_path: Path) -> None:
    allow = ["GET /v1/memories/?user_id=alice&page&page_size=50", "POST /v3/memories/?page"]
    result = cli_run("check", MEM0, "--grants", _grants(tmp_path, allow), "--profile", "m")
    assert result.exit_code == 0, result.output


def test_check_grants_refuses_a_parameter_the_document_does_not_declare(tmp_path: Path) -> None:
    allow = [
        "GET /v1/memories/?admin",
        {"route": "GET /v1/memories/", "headers": ["X-Debug"]},
        "GET /v1/memories/?page_size=many",
    ]
    result = cli_run("check", MEM0, "--grants", _grants(tmp_path, allow), "--profile", "m")
    assert result.exit_code == 1
    out = result.output
    assert 'names query parameter "admin", which the document does not declare' in out
    assert 'names header "X-Debug", which the document does not declare' in out
    assert 'pins query parameter "page_size" to "many", which is not an integer' in out


def test_check_grants_refuses_a_catalog_with_other_parameters(tmp_path: Path) -> None:
    path = _grants(tmp_path, [])
    data = json.loads(path.read_text())
    data["profiles"]["m"]["catalog"] = [
        e.split("?")[0] if isinstance(e, str) else e for e in data["profiles"]["m"]["catalog"]
    ]
    path.write_text(json.dumps(data))
    result = cli_run("check", MEM0, "--grants", path, "--profile", "m")
    assert result.exit_code == 1
    assert "catalog: names other query or header parameters" in result.output


def _doc_grants(tmp_path: Path, paths: Any, allow: list[Any]) -> tuple[Path, Path]:
    spec = tmp_path / "doc.json"
    spec.write_text(json.dumps(doc(paths)))
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"profiles": {"m": {"allow": allow}}}))
    return spec, grants


PATTERNED = {
    "/items": {
        "get": op(
            "list",
            parameters=[
                q("code", schema={"type": "string", "pattern": "^[A-Z]{3}$"}),
                q("ahead", schema={"type": "string", "pattern": "^(?=a)"}),
                q(
                    "ids",
                    schema={"type": "array", "items": {"type": "string"}},
                    style="form",
                    explode=False,
                ),
                q("one"),
            ],
        )
    }
}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("GET /items?code=ABC", None),
        ("GET /items?code=abc", 'pins query parameter "code" to "abc", which does not match'),
        ("GET /items?code=ABCD", "does not match the declared pattern"),
        # RE2 cannot run a lookahead: not evaluated, so not held against the grant
        ("GET /items?ahead=b", None),
        ({"route": "GET /items", "query": ["ids"], "style": {"ids": "form,explode=false"}}, None),
        (
            {"route": "GET /items", "query": ["ids"], "style": {"ids": "form"}},
            'sends query parameter "ids" in style "form"; the document declares '
            '"form,explode=false"',
        ),
        (
            {"route": "GET /items", "query": ["one"], "style": {"one": "pipeDelimited"}},
            'sends query parameter "one" in style "pipeDelimited"; the document declares one value',
        ),
        ({"route": "GET /items", "query": ["ids"]}, None),  # one value: any style reads it
    ],
)
def test_check_grants_compares_pins_with_a_pattern_and_styles_with_the_document(
    tmp_path: Path, entry: Any, problem: str | None
) -> None:
    spec, grants = _doc_grants(tmp_path, PATTERNED, [entry])
    result = cli_run("check", spec, "--grants", grants, "--profile", "m")
    if problem is None:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 1 and problem in result.output, result.output


def test_a_parameter_two_operations_declare_with_other_patterns_takes_either(
    tmp_path: Path,
) -> None:
    def with_code(op_id: str, pattern: str) -> dict[str, Any]:
        return op(op_id, parameters=[q("code", schema={"type": "string", "pattern": pattern})])

    paths = {
        "/a/{x}": {
            "get": with_code("one", "^[a-z]+$"),
            "parameters": [q("x", "path", required=True)],
        },
        "/a/{y}": {
            "get": with_code("two", "^[0-9]+$"),
            "parameters": [q("y", "path", required=True)],
        },
    }
    for value in ("abc", "123"):
        spec, grants = _doc_grants(tmp_path, paths, [f"GET /a/*?code={value}"])
        result = cli_run("check", spec, "--grants", grants, "--profile", "m")
        assert result.exit_code == 0, result.output


def test_an_array_parameter_whose_items_are_itself_is_summarised() -> None:
    """`A: {type: array, items: {$ref: A}}` recursed until Python's stack ran out (the
    build ended with "internal error: RecursionError"); only the items' own type is read."""
    cyclic = {"type": "array", "items": {"$ref": "#/components/schemas/A"}}
    broken = {"type": "array", "items": {"$ref": "#/components/schemas/Nowhere"}}
    params = [
        q("a", schema={"$ref": "#/components/schemas/A"}),
        q("b", schema={"type": "array", "items": {"$ref": "#/components/schemas/Loop"}}),
        q("c", schema=broken),
    ]
    document = doc(
        {"/x": {"get": op("x", parameters=params)}},
        components={"schemas": {"A": cyclic, "Loop": {"$ref": "#/components/schemas/Loop"}}},
    )
    query = generate(document, name="doc.json").operations[0].params.query
    assert [(p.name, p.schema) for p in query] == [
        ("a", SchemaSummary("array", items="array")),
        ("b", SchemaSummary("array", items="")),  # a circular $ref has no type to read
        ("c", SchemaSummary("array", items="")),  # nor a broken one
    ]


def test_the_bodies_of_operations_on_one_route_are_merged() -> None:
    def posting(op_id: str, *media: str) -> dict[str, Any]:
        content = {m: {"schema": {"type": "object"}} for m in media}
        return op(op_id, requestBody={"content": content})

    paths = {
        "/a/{x}": {"post": posting("one", "application/json")},
        "/a/{y}": {"post": posting("two", "text/plain", "application/json")},
        "/b/{x}": {"post": posting("three", "text/plain")},
        "/b/{y}": {"post": posting("four", "application/json", "multipart/form-data")},
    }
    entries = {e["route"]: e for e in allow_json(gen(paths)) if isinstance(e, dict)}
    # either operation's media types may be sent, each named once, the first one's first
    assert entries["POST /a/*"]["body"] == ["application/json", "text/plain"]
    assert entries["POST /b/*"]["body"] == ["text/plain", "application/json", "multipart/form-data"]


@pytest.mark.parametrize("query", ["Query", " query", "QUERY"])
@pytest.mark.parametrize("header", ["Header", " Header ", "HEADER"])
def test_a_location_is_read_whatever_its_case_and_spacing(query: str, header: str) -> None:
    params = [q("limit", query), q("X-Trace", header), q("id", " Path ", required=True)]
    [entry] = allow_json(gen({"/a/{id}": {"get": op("a", parameters=params)}}))
    assert entry == {"route": "GET /a/*", "query": ["limit"], "headers": ["X-Trace"]}


def test_check_grants_accepts_profile_headers_and_response_headers(tmp_path: Path) -> None:
    """A header every call needs is the profile's, not a parameter the document must
    declare; response_headers on the profile and on an entry are part of the language."""
    path = _grants(
        tmp_path, [{"route": "GET /v1/memories/", "response_headers": ["Link", "X-RateLimit-*"]}]
    )
    data = json.loads(path.read_text())
    data["profiles"]["m"]["headers"] = {"X-Api-Version": "2024-01-01", "User-Agent": "acme/1"}
    data["profiles"]["m"]["response_headers"] = ["ETag"]
    path.write_text(json.dumps(data))
    result = cli_run("check", MEM0, "--grants", path, "--profile", "m")
    assert result.exit_code == 0, result.output


def test_check_grants_refuses_bad_profile_headers(tmp_path: Path) -> None:
    path = _grants(tmp_path, ["GET /v1/memories/"])
    data = json.loads(path.read_text())
    data["profiles"]["m"]["headers"] = {"Authorization": "Bearer x", "X-A": "a\r\nb"}
    data["profiles"]["m"]["response_headers"] = ["WWW-Authenticate"]
    path.write_text(json.dumps(data))
    result = cli_run("check", MEM0, "--grants", path, "--profile", "m")
    assert result.exit_code == 1
    out = result.output
    assert 'headers "Authorization" is set by the broker or the credential' in out
    assert 'headers "X-A" value "a\\r\\nb" must be printable ASCII' in out
    assert 'response_headers item "WWW-Authenticate" is never forwarded' in out


def test_check_grants_refuses_an_entry_listing_a_forbidden_response_header(
    tmp_path: Path,
) -> None:
    path = _grants(tmp_path, [{"route": "GET /v1/memories/", "response_headers": ["Set-Cookie"]}])
    result = cli_run("check", MEM0, "--grants", path, "--profile", "m")
    assert result.exit_code == 1
    assert result.output == (
        'specgen: profile "m": allow: allow entry "GET /v1/memories/": response_headers item '
        '"Set-Cookie" is never forwarded to agent code (it carries credentials or a session)\n'
    )
