"""Schemas to TypeScript: the shapes a model is shown, and the caps that keep them bounded."""

from __future__ import annotations

from typing import Any

from specgen import typescript
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
