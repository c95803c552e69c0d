"""Schemas to TypeScript: the shapes a model is shown, and the caps that keep them bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specgen import build, typescript
from specgen.operations import generate
from specgen.render import artifacts


def _doc(schemas: dict[str, Any], body: Any = None, response: Any = None, params: Any = ()) -> dict:
    op: dict[str, Any] = {"operationId": "op", "responses": {}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if response is not None:
        op["responses"]["200"] = {
            "description": "ok",
            "content": {"application/json": {"schema": response}},
        }
    if params:
        op["parameters"] = list(params)
    return {
        "openapi": "3.0.3",
        "info": {"title": "T", "version": "1"},
        "paths": {"/things/{id}": {"post": op}},
        "components": {"schemas": schemas},
    }


def _types(doc: dict[str, Any]) -> typescript.TypeSet:
    return typescript.generate(doc, generate(doc, name="t.json"))


def _decls(types: typescript.TypeSet) -> dict[str, str]:
    return {d.name: d.ts for d in types.declarations}


def test_body_response_and_path_parameter_types() -> None:
    doc = _doc(
        {},
        body={
            "type": "object",
            "required": ["content"],
            "properties": {"content": {"type": "string"}, "n": {"type": "integer"}},
        },
        response={"type": "array", "items": {"type": "boolean"}},
        params=[{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
    )
    op = _types(doc).operations[0]
    assert op.signature("api") == (
        "api.op(id: number, body: { content: string; n?: number }): Promise<Array<boolean>>"
    )


def test_ref_cycle_becomes_a_name_that_refers_to_itself() -> None:
    node = {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}}
    types = _types(_doc({"Node": node}, response={"$ref": "#/components/schemas/Node"}))
    assert types.operations[0].response == "Node"
    assert _decls(types) == {"Node": "{ next?: Node }"}
    assert types.fallbacks == 0
    assert types.fully_typed(types.operations[0])


def test_compositions_enums_nullable_and_additional_properties() -> None:
    schemas = {
        "A": {"type": "object", "properties": {"a": {"type": "string"}}},
        "B": {"type": "object", "properties": {"b": {"type": "number", "nullable": True}}},
        "Both": {"allOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}]},
        "Either": {"oneOf": [{"$ref": "#/components/schemas/A"}, {"type": "string"}]},
        "Any": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "Colour": {"type": "string", "enum": ["red", "green", 'it\'s "quoted"']},
        "Map": {"type": "object", "additionalProperties": {"type": "integer"}},
        "Open": {
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        "Closed": {"type": "object", "additionalProperties": False},
        "T31": {"type": ["string", "null"]},
    }
    response = {
        "type": "object",
        "properties": {k: {"$ref": f"#/components/schemas/{k}"} for k in schemas},
    }
    decls = _decls(_types(_doc(schemas, response=response)))
    assert decls["Both"] == "A & B"
    assert decls["B"] == "{ b?: number | null }"
    assert decls["Either"] == "A | string"
    assert decls["Any"] == "number | null"
    assert decls["Colour"] == '"red" | "green" | "it\'s \\"quoted\\""'
    # "Map" is TypeScript's own: the declaration takes another name rather than shadow it
    assert "Map" not in decls and decls["Map_2"] == "Record<string, number>"
    assert decls["Open"] == "{ x?: string } & Record<string, string>"
    assert decls["Closed"] == "Record<string, never>"
    assert decls["T31"] == "string | null"


def test_infinity_and_nan_are_numbers_not_literal_types() -> None:
    """YAML's `.inf` and `.nan`, or a JSON number too large for a double, load as
    non-finite floats; `Infinity` is a value in TypeScript, and `1 | Infinity` does not
    compile. Such an enum is typed by its `type` instead, and such a const falls back to
    `unknown` (counted), as a const with an object value does."""
    inf, nan = float("inf"), float("nan")
    schemas = {
        "E": {"type": "number", "enum": [1, inf]},
        "C": {"type": "number", "const": -inf},
        "N": {"type": "number", "enum": [nan]},
        "Big": {"type": "integer", "enum": [10**30, 2.5]},
    }
    response = {
        "type": "object",
        "properties": {k: {"$ref": f"#/components/schemas/{k}"} for k in schemas},
    }
    types = _types(_doc(schemas, response=response))
    decls = _decls(types)
    assert (decls["E"], decls["C"], decls["N"]) == ("number", "unknown", "number")
    assert types.fallbacks == 1
    assert decls["Big"] == "1000000000000000000000000000000 | 2.5"


def test_depth_and_width_caps_fall_back_to_unknown_and_are_counted() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(typescript.MAX_DEPTH + 4):
        deep = {"type": "array", "items": deep}
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(typescript.MAX_PROPERTIES + 1)},
    }
    types = _types(_doc({}, body=deep, response=wide))
    op = types.operations[0]
    assert "unknown" in (op.body or "")
    assert op.response == "Record<string, unknown>"
    assert op.fallbacks == 2
    assert not types.fully_typed(op)


def test_unnamed_cycle_and_broken_refs_fall_back() -> None:
    doc = _doc({}, response={"$ref": "#/components/schemas/Missing"})
    doc["paths"]["/things/{id}"]["post"]["requestBody"] = {
        "content": {"application/json": {"schema": {"$ref": "#/x/loop"}}}
    }
    doc["x"] = {"loop": {"type": "object", "properties": {"again": {"$ref": "#/x/loop"}}}}
    op = _types(doc).operations[0]
    assert op.response == "unknown"
    assert op.body == "{ again?: unknown }"
    assert op.fallbacks == 2


def test_document_text_cannot_escape_a_doc_comment_or_a_member_name() -> None:
    doc = _doc(
        {
            "X": {
                "description": "ends */ here\nnew line",
                "type": "object",
                "properties": {"a-b */": {"type": "string"}},
            }
        },
        response={"$ref": "#/components/schemas/X"},
    )
    doc["paths"]["/things/{id}"]["post"]["summary"] = "sum */ globalThis.x = 1; /*"
    gen = generate(doc, name="t.json")
    text = artifacts(gen, typescript.generate(doc, gen))["types.d.ts"]
    assert "/** ends *\\/ here new line */" in text
    assert '"a-b */"?: string' in text  # a quoted member name, not a comment
    assert "sum *\\/ globalThis.x = 1; /*" in text
    # every comment that opens closes on its own line: no line is outside a comment by accident
    for line in text.splitlines():
        if line.strip().startswith("* "):
            assert "*/" not in line.replace('"a-b */"', "")


def _file(doc: dict[str, Any]) -> str:
    gen = generate(doc, name="t.json")
    return artifacts(gen, typescript.generate(doc, gen))["types.d.ts"]


def _api(paths: dict[str, Any], **components: Any) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "T", "version": "1"},
        "paths": paths,
        "components": components,
    }


def test_a_response_keyed_by_the_integer_200_is_typed() -> None:
    # a library caller's dict, or YAML before it is converted to JSON, keys by the number
    doc = _doc({}, response={"type": "array", "items": {"type": "boolean"}})
    responses = doc["paths"]["/things/{id}"]["post"]["responses"]
    responses[200] = responses.pop("200")
    responses[201] = {"content": {"application/json": {"schema": {"type": "string"}}}}
    assert "op(id: string): Promise<Array<boolean> | string>;" in _file(doc)


def test_options_are_required_when_any_parameter_is_required() -> None:
    params = [
        {"name": "a", "in": "query", "required": True, "schema": {"type": "string"}},
        {"name": "b", "in": "query", "schema": {"type": "integer"}},
    ]
    text = _file(_doc({}, params=params))
    assert "op(id: string, options: { a: string; b?: number }): Promise<unknown>;" in text
    text = _file(_doc({}, params=params[::-1]))  # the required one last
    assert "op(id: string, options: { b?: number; a: string }): Promise<unknown>;" in text
    del params[0]["required"]  # none required: options may be left out
    text = _file(_doc({}, params=params))
    assert "op(id: string, options?: { a?: string; b?: number }): Promise<unknown>;" in text


def test_a_description_that_repeats_the_summary_is_written_once() -> None:
    doc = _doc({})
    op = doc["paths"]["/things/{id}"]["post"]
    op["summary"] = op["description"] = "Make a thing."
    assert _file(doc).count("Make a thing.") == 1
    op["description"] = "Make a thing, carefully."
    text = _file(doc)
    assert "   * Make a thing.\n   * Make a thing, carefully.\n" in text


def test_same_named_parameters_each_get_their_own_line() -> None:
    # one name in two locations, and one name with two types in two operations
    def get(op_id: str, kind: str) -> dict[str, Any]:
        return {
            "operationId": op_id,
            "parameters": [
                {"name": "x", "in": "query", "schema": {"type": kind}, "description": "q " + kind},
                {"name": "x", "in": "header", "schema": {"type": "boolean"}, "description": "h"},
            ],
            "responses": {"200": {"description": "ok"}},
        }

    text = _file(
        _api({"/a": {"get": get("first", "string")}, "/b": {"get": get("second", "integer")}})
    )
    first, second = text.split("second(")[0], text.split("first(")[1]
    assert '* query parameter "x"?: string (in options): q string' in first
    assert '* header parameter "x"?: boolean (in options): h' in first
    assert '* query parameter "x"?: number (in options): q integer' in second
    assert '* header parameter "x"?: boolean (in options): h' in second


def test_shared_parameter_references_keep_their_own_location_and_name() -> None:
    # `#/paths/.../parameters/0` in two path items: references that end alike but name
    # parameters in other locations (documents converted from other formats do this)
    limit = {"name": "limit", "in": "query", "schema": {"type": "integer"}, "description": "max"}
    trace = {"name": "X-Trace", "in": "header", "schema": {"type": "boolean"}}
    paths = {
        "/a": {"parameters": [limit], "get": {"operationId": "a", "responses": {}}},
        "/b": {"parameters": [trace], "get": {"operationId": "b", "responses": {}}},
        "/c": {
            "get": {
                "operationId": "c",
                "parameters": [
                    {"$ref": "#/paths/~1a/parameters/0"},
                    {"$ref": "#/paths/~1b/parameters/0"},
                    {"$ref": "#/components/parameters/limit"},
                ],
                "responses": {},
            }
        },
        "/d/{limit}": {
            "get": {
                "operationId": "d",
                "parameters": [{"$ref": "#/components/parameters/limit"}],
                "responses": {},
            }
        },
    }
    shared = {
        "limit": {"name": "limit", "in": "path", "required": True, "schema": {"type": "number"}}
    }
    types = {t.op.name: t for t in _types(_api(paths, parameters=shared)).operations}
    assert types["c"].arguments == 'options?: { limit?: number; "X-Trace"?: boolean }'
    assert [(p.name, p.location, p.ts) for p in types["c"].params] == [
        ("limit", "query", "number"),
        ("X-Trace", "header", "boolean"),
    ]
    assert types["d"].arguments == "limit: number"
    assert [(p.name, p.location) for p in types["d"].params] == [("limit", "path")]


def test_operation_tags_are_carried_to_its_types() -> None:
    doc = _doc({})
    doc["paths"]["/things/{id}"]["post"]["tags"] = ["memory", 3, "Long Term"]
    assert _types(doc).operations[0].tags == ("memory", "Long Term")


def test_a_shared_path_parameter_takes_each_method_s_argument_name() -> None:
    # `body` is the argument name of a method's body, so its path parameter is renamed there
    item = {
        "parameters": [{"$ref": "#/components/parameters/body"}],
        "get": {"operationId": "read", "responses": {}},
        "put": {
            "operationId": "write",
            "requestBody": {"content": {"application/json": {"schema": {"type": "boolean"}}}},
            "responses": {},
        },
    }
    shared = {
        "body": {"name": "body", "in": "path", "required": True, "schema": {"type": "integer"}}
    }
    types = {
        t.op.name: t for t in _types(_api({"/notes/{body}": item}, parameters=shared)).operations
    }
    assert types["read"].arguments == "body: number"
    assert types["write"].arguments == "body_: number, body?: boolean"


def test_a_parameter_location_in_another_case_keeps_its_type() -> None:
    """`in` in any case and spacing, and a name with spaces around it, are read as
    specgen.params reads them, so the parameter keeps its schema and description (real
    documents write `"name": "group "`)."""
    params = [
        {"name": "limit", "in": "Query", "schema": {"type": "integer"}, "description": "max"},
        {"name": "X-N", "in": " Header ", "schema": {"type": "integer"}},
        {"name": "group ", "in": "query", "schema": {"type": "integer"}, "description": "g"},
    ]
    text = _file(_api({"/a": {"get": {"operationId": "a", "parameters": params, "responses": {}}}}))
    assert 'a(options?: { limit?: number; group?: number; "X-N"?: number })' in text
    assert '* query parameter "limit"?: number (in options): max' in text
    assert '* query parameter "group"?: number (in options): g' in text


def test_a_reference_that_points_nowhere_is_named_where_a_build_warns() -> None:
    """Structural validation does not follow references, so a broken one must be said by
    the types that needed it, once per reference, sorted, and as a build warning."""
    node = {"type": "object", "properties": {"gone": {"$ref": "#/components/schemas/Gone"}}}
    doc = _doc(
        {"Node": node},
        body={"$ref": "#/components/schemas/Missing"},
        response={
            "type": "array",
            "items": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"$ref": "#/nowhere/x"}]},
        },
    )
    types = _types(doc)
    assert types.dangling == (
        "#/components/schemas/Gone",
        "#/components/schemas/Missing",
        "#/nowhere/x",
    )
    assert _types(_doc({"Node": {"type": "string"}}, response=node)).dangling == (
        "#/components/schemas/Gone",
    )
    assert _types(_doc({"Gone": {}}, response=node)).dangling == ()


def test_a_build_warns_of_each_reference_that_points_nowhere(tmp_path: Path) -> None:
    doc = _doc({}, response={"$ref": "#/components/schemas/Missing"})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(doc))
    result = build.run(str(spec), build.Options())
    assert any(
        '$ref "#/components/schemas/Missing" points nowhere' in line for line in result.notes()
    )
    doc["components"]["schemas"]["Missing"] = {"type": "string"}
    spec.write_text(json.dumps(doc))
    assert not any(
        "points nowhere" in line for line in build.run(str(spec), build.Options()).notes()
    )
