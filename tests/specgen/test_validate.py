"""The fast structural gate and the full `specgen validate` report."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from specgen import validate
from specgen.validate import (
    full_report,
    structural_error_line,
    structural_errors,
    version_family,
)


def minimal(version: str = "3.0.3") -> dict[str, Any]:
    return {
        "openapi": version,
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/pets/{id}": {
                "get": {
                    "operationId": "getPet",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                            },
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Pet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                }
            }
        },
    }


@pytest.mark.parametrize("version", ["3.0.0", "3.0.3", "3.1.0", "3.1.1"])
def test_a_valid_document_has_no_structural_errors(version: str) -> None:
    result = structural_errors(minimal(version))
    assert result.supported and result.ok
    assert result.family == version[:3]
    assert structural_error_line("spec.json", minimal(version)) is None


@pytest.mark.parametrize("version", ["3.0.3", "3.1.0"])
def test_the_refusal_names_the_first_error_its_pointer_and_counts_the_rest(version: str) -> None:
    doc = minimal(version)
    del doc["info"]["version"]
    doc["paths"]["/pets/{id}"]["get"]["responses"]["200"]["description"] = 7
    doc["paths"]["bad"] = {}
    result = structural_errors(doc)
    pointers = {e.pointer for e in result.errors}
    assert "/info" in pointers
    assert "/paths" in pointers
    line = structural_error_line("api.json", doc)
    assert line is not None
    assert "\n" not in line
    first = result.errors[0]
    more = len(result.errors) - 1
    assert more >= 2
    assert line == (
        f"specgen: api.json: not a valid OpenAPI {version} document: {first.message} "
        f"at {first.pointer} (and {more} more errors)"
    )


def test_one_error_has_no_count_and_says_the_rule() -> None:
    doc = minimal()
    del doc["info"]["version"]
    assert structural_error_line("a.yaml", doc) == (
        'specgen: a.yaml: not a valid OpenAPI 3.0.3 document: "version" is a required '
        "property at /info"
    )


def test_pointers_escape_slash_and_tilde_per_rfc_6901() -> None:
    doc = minimal()
    doc["paths"]["/a~b/{x}"] = {"get": {"responses": {"200": {"description": 1}}}}
    pointers = [e.pointer for e in structural_errors(doc).errors]
    assert any(p.startswith("/paths/~1a~0b~1{x}/get") for p in pointers), pointers


def test_a_missing_top_level_member_points_at_the_document_root() -> None:
    doc = minimal()
    del doc["paths"]
    line = structural_error_line("x.json", doc)
    assert line is not None
    assert line.endswith('"paths" is a required property at / (the document root)')


def test_a_failed_schema_or_reference_alternative_reports_the_real_cause() -> None:
    """The OpenAPI schema wraps schemas in oneOf(Schema, Reference); the line must not
    say "this whole object matches neither" but what inside it is wrong."""
    doc = minimal()
    param = doc["paths"]["/pets/{id}"]["get"]["parameters"][0]
    param["schema"] = {"type": "string", "pattern": "[a-z", "description": "line\nbreak " * 500}
    line = structural_error_line("x.json", doc)
    assert line == (
        'specgen: x.json: not a valid OpenAPI 3.0.3 document: "[a-z" is not a "regex" '
        "at /paths/~1pets~1{id}/get/parameters/0/schema/pattern"
    )


def test_a_deep_error_in_a_component_schema_is_located() -> None:
    doc = minimal()
    doc["components"]["schemas"]["Pet"]["properties"]["age"] = {
        "type": "integer",
        "minimum": "zero",
    }
    result = structural_errors(doc)
    assert result.errors[0].pointer == "/components/schemas/Pet/properties/age/minimum"
    assert '"zero" is not of type "number"' in result.errors[0].message


def test_openapi_31_schema_objects_are_left_to_the_full_report() -> None:
    """The 3.1 meta-schema describes documents "without schema validation": a bad
    Schema Object passes the fast gate (build does not need it) but `validate` finds it."""
    doc = minimal("3.1.0")
    doc["components"]["schemas"]["Pet"]["properties"]["age"] = {
        "type": "integer",
        "minimum": "zero",
    }
    assert structural_errors(doc).ok
    assert full_report(doc, "x.json") == ["specgen: x.json: 'zero' is not of type 'number'"]


def test_long_messages_are_folded_and_elided_in_the_middle() -> None:
    message = "HEAD " + "x\ny" * 300 + " TAIL is not valid"
    short = validate.one_line(message)
    assert "\n" not in short
    assert len(short) <= 200
    assert short.startswith("HEAD x y") and short.endswith(" TAIL is not valid")
    assert " ... " in short
    assert validate.one_line("a\u2028b\r\nc") == "a b c"


@pytest.mark.parametrize(
    "doc",
    [
        {"openapi": "2.0", "info": {}, "paths": {}},
        {"openapi": "3.2.0", "info": {}, "paths": {}},
        {"openapi": 3.0, "info": {}, "paths": {}},
        {"swagger": "2.0"},
    ],
)
def test_an_unsupported_version_is_reported_not_validated(doc: dict[str, Any]) -> None:
    result = structural_errors(doc)
    assert not result.supported and not result.ok and result.errors == ()
    line = structural_error_line("old.json", doc)
    assert line is not None
    assert line.startswith("specgen: old.json: unsupported openapi version ")
    assert line.endswith("(need 3.0.x or 3.1.x)")


def test_version_family() -> None:
    assert version_family({"openapi": "3.0.1"}) == "3.0"
    assert version_family({"openapi": "3.1.0"}) == "3.1"
    assert version_family({"openapi": "3.10.0"}) is None
    assert version_family([]) is None


def test_the_compiled_schema_is_cached_per_process() -> None:
    structural_errors(minimal("3.0.3"))
    structural_errors(minimal("3.1.0"))
    before = validate._structural_validator.cache_info()
    for _ in range(5):
        structural_errors(minimal("3.0.3"))
        structural_errors(minimal("3.1.0"))
    after = validate._structural_validator.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 10


def test_validation_does_not_modify_the_document() -> None:
    doc = minimal()
    doc["components"]["schemas"]["Pet"]["example"] = {"name": 3}
    snapshot = copy.deepcopy(doc)
    structural_errors(doc)
    full_report(doc, "x")
    assert doc == snapshot


# ---- full report --------------------------------------------------------------------


def test_a_clean_document_has_an_empty_report() -> None:
    assert full_report(minimal(), "clean.json") == []
    assert full_report(minimal("3.1.0"), "clean.json") == []


def test_the_report_lists_every_problem_not_only_the_first() -> None:
    doc = minimal()
    del doc["info"]["version"]
    doc["paths"]["/pets/{id}"]["get"]["parameters"].append(
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    )
    doc["paths"]["/other/{thing}"] = {
        "get": {"operationId": "getPet", "responses": {"200": {"description": "ok"}}}
    }
    lines = full_report(doc, "many.json")
    text = "\n".join(lines)
    assert 'specgen: many.json: "version" is a required property at /info' in lines
    assert "Duplicate parameter 'id'" in text
    assert "Operation ID 'getPet'" in text
    assert "'thing'" in text  # the undeclared path parameter
    assert all(line.startswith("specgen: many.json: ") and "\n" not in line for line in lines)


def test_contradicting_examples_and_defaults_are_nits_with_pointers() -> None:
    doc = minimal()
    get = doc["paths"]["/pets/{id}"]["get"]
    get["parameters"].append(
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "default": "ten", "maximum": 50},
            "example": 99,
        }
    )
    media = get["responses"]["200"]["content"]["application/json"]
    media["examples"] = {
        "good": {"value": {"name": "Rex"}},
        "bad": {"value": {"age": 3}},
        "shared": {"$ref": "#/components/examples/Shared"},
    }
    doc["components"]["examples"] = {"Shared": {"value": {"name": 5}}}
    pet = doc["components"]["schemas"]["Pet"]
    pet["properties"]["age"]["example"] = "old"
    # A property literally called "example" is a schema, not an example value.
    pet["properties"]["example"] = {"type": "string", "default": "fine"}
    lines = full_report(doc, "nits.json")
    assert len(lines) == 5, lines
    base = "/paths/~1pets~1{id}/get"
    media_ptr = f"{base}/responses/200/content/application~1json"
    expected_starts = [
        f"specgen: nits.json: nit: default at {base}/parameters/1/schema/default contradicts "
        f"the schema at {base}/parameters/1/schema: 'ten' is not of type 'integer'",
        f"specgen: nits.json: nit: example at {base}/parameters/1/example contradicts the "
        f"schema at {base}/parameters/1/schema: 99 is greater than the maximum of 50",
        f"specgen: nits.json: nit: example at {media_ptr}/examples/bad/value contradicts the "
        f"schema at {media_ptr}/schema: 'name' is a required property",
        "specgen: nits.json: nit: example at /components/examples/Shared/value contradicts "
        f"the schema at {media_ptr}/schema: 5 is not of type 'string' (at /name inside the value)",
        "specgen: nits.json: nit: example at /components/schemas/Pet/properties/age/example "
        "contradicts the schema at /components/schemas/Pet/properties/age: 'old' is not of "
        "type 'integer'",
    ]
    assert lines == expected_starts


def test_nullable_and_formats_follow_the_openapi_30_dialect() -> None:
    doc = minimal()
    props = doc["components"]["schemas"]["Pet"]["properties"]
    props["nick"] = {"type": "string", "nullable": True, "default": None, "example": None}
    props["born"] = {"type": "string", "format": "date", "example": "2020-02-30x"}
    props["seen"] = {"type": "string", "format": "date-time", "example": "2020-02-03T04:05:06Z"}
    lines = full_report(doc, "f.json")
    assert len(lines) == 1, lines
    assert "/components/schemas/Pet/properties/born/example" in lines[0]


def test_openapi_31_schema_examples_arrays_are_checked() -> None:
    doc = minimal("3.1.0")
    doc["components"]["schemas"]["Pet"]["examples"] = [{"name": "ok"}, {"name": 1}]
    lines = full_report(doc, "f.json")
    assert lines == [
        "specgen: f.json: nit: example at /components/schemas/Pet/examples/1 contradicts the "
        "schema at /components/schemas/Pet: 1 is not of type 'string' (at /name inside the value)"
    ]


def test_the_report_survives_a_document_the_library_cannot_walk() -> None:
    doc = minimal()
    doc["paths"]["/pets/{id}"]["get"]["parameters"] = [{"in": "query"}, "nonsense"]
    lines = full_report(doc, "broken.json")
    assert lines
    assert all(line.startswith("specgen: broken.json: ") and "\n" not in line for line in lines)


def test_the_report_refuses_what_it_cannot_validate_in_one_line() -> None:
    assert full_report({"swagger": "2.0"}, "s.json") == [
        "specgen: s.json: unsupported openapi version (missing) (need 3.0.x or 3.1.x)"
    ]
    assert full_report(["x"], "s.json") == [
        "specgen: s.json: the document's top level is not an object"
    ]


def test_a_json_example_given_as_its_serialised_text_counts_when_the_text_fits() -> None:
    doc = minimal()
    media = doc["paths"]["/pets/{id}"]["get"]["responses"]["200"]["content"]["application/json"]
    media["examples"] = {
        "text": {"value": '{"name": "Rex"}'},
        "wrong": {"value": '{"age": 1}'},
        "prose": {"value": "a pet"},
    }
    lines = full_report(doc, "s.json")
    assert [line.split(" contradicts")[0].rsplit("/examples/", 1)[1] for line in lines] == [
        "wrong/value",
        "prose/value",
    ]
    # Outside JSON media types a string is just a string.
    doc["paths"]["/pets/{id}"]["get"]["responses"]["200"]["content"] = {"text/plain": media}
    assert len(full_report(doc, "s.json")) == 3


YAML_DOC = """
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    get:
      responses:
        200:
          description: ok
          content:
            application/json:
              schema: {type: string, format: date}
              example: 2020-01-01
        404:
          description: 3
"""


def test_yaml_integer_keys_and_dates_are_validated_as_their_json_reading() -> None:
    """YAML loads `200:` as an int key and `2020-01-01` as a date; jsonschema-rs
    rejects such data outright, which must not escape as a crash."""
    import yaml

    doc = yaml.safe_load(YAML_DOC)
    assert 200 in doc["paths"]["/a"]["get"]["responses"]
    result = structural_errors(doc)
    assert [(e.message, e.pointer) for e in result.errors] == [
        ('3 is not of type "string"', "/paths/~1a/get/responses/404/description")
    ]
    # the date example satisfies `format: date` once read as JSON would read it
    assert full_report(doc, "y.yaml") == [
        'specgen: y.yaml: 3 is not of type "string" at /paths/~1a/get/responses/404/description'
    ]


def test_data_json_cannot_hold_is_one_error_not_a_crash() -> None:
    doc = minimal()
    doc["info"]["title"] = object()
    line = structural_error_line("o.json", doc)
    assert line is not None and "the document holds data JSON cannot represent" in line
    assert full_report(doc, "o.json")[0].startswith("specgen: o.json: the document holds data JSON")


def test_the_validate_command_lists_the_report_and_exits_1(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from specgen.cli import cli

    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(minimal()))
    result = CliRunner().invoke(cli, ["validate", str(clean)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""

    doc = minimal()
    doc["components"]["schemas"]["Pet"]["properties"]["age"]["default"] = "old"
    del doc["info"]["version"]
    dirty = tmp_path / "dirty.json"
    dirty.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["validate", str(dirty)])
    assert result.exit_code == 1
    # the default's nit becomes a warning line; the structural error keeps the exit code 1
    assert result.stdout.splitlines() == [
        line.replace(": nit: ", ": warning: ", 1) for line in full_report(doc, str(dirty))
    ]
    assert len(result.stdout.splitlines()) == 2


@pytest.mark.parametrize("version", ["3.0.3", "3.1.0"])
def test_a_reference_that_cannot_be_followed_is_named_in_a_short_line(version: str) -> None:
    """The resolver's own text for a missing pointer repeats the whole document; the
    report names the reference instead, however large the document is."""
    doc = minimal(version)
    del doc["components"]["schemas"]["Pet"]
    doc["components"]["schemas"]["Filler"] = {"description": "x" * 100_000}
    (line,) = full_report(doc, "x.json")
    assert line == (
        'specgen: x.json: $ref "#/components/schemas/Pet" points nowhere in the document'
        " (validation stopped there)"
    )
    doc["components"]["schemas"]["Pet"] = {"$ref": "other.json#/Pet"}
    (line,) = full_report(doc, "x.json")
    assert '$ref "other.json#/Pet" cannot be followed' in line
    assert len(line) < 200


_ONE_OF = {"oneOf": [{"type": "string"}, {"type": "integer"}]}


@pytest.mark.parametrize(
    ("schema", "example", "said"),
    [
        (_ONE_OF, None, "null is not valid under any of the given schemas"),
        ({"type": "string"}, {"a": True}, "{\"a\": true} is not of type 'string'"),
        ({"type": "string"}, [False], "[false] is not of type 'string'"),
        ({"type": "string"}, 5, "5 is not of type 'string'"),
    ],
)
def test_a_nit_shows_the_value_as_json_not_as_python(
    schema: dict[str, Any], example: Any, said: str
) -> None:
    """jsonschema writes the value with Python's repr: a JSON null read `None`."""
    doc = minimal()
    doc["components"]["schemas"]["Pet"] = {**schema, "example": example}
    (line,) = full_report(doc, "x.json")
    assert line.endswith(f"contradicts the schema at /components/schemas/Pet: {said}")
