"""`specgen extract`: a pinned cut of a whole provider document that stands on its own."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate as osv_validate

from specgen.errors import SpecError
from specgen.extract import extract
from specgen.validate import structural_error_line


def whole_document() -> dict[str, Any]:
    """A small provider document: two APIs side by side, sharing some components."""
    ref = "#/components/schemas/"
    return {
        "openapi": "3.0.3",
        "info": {"title": "Provider — all APIs", "version": "4"},
        "servers": [{"url": "https://api.example.com/client/v4"}],
        "security": [{"token": []}],
        "tags": [{"name": "memory"}, {"name": "dns"}],
        "paths": {
            "/accounts/{account_id}/memory/items": {
                "parameters": [{"$ref": "#/components/parameters/AccountId"}],
                "get": {
                    "operationId": "listItems",
                    "tags": ["memory"],
                    "responses": {"200": {"$ref": "#/components/responses/ItemList"}},
                },
                "post": {
                    "operationId": "addItem",
                    "tags": ["memory"],
                    "requestBody": {"$ref": "#/components/requestBodies/NewItem"},
                    "responses": {"201": {"description": "created"}},
                },
            },
            "/zones/{zone_id}/dns_records": {
                "get": {
                    "operationId": "listRecords",
                    "tags": ["dns"],
                    "parameters": [
                        {
                            "name": "zone_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "records",
                            "content": {
                                "application/json": {"schema": {"$ref": ref + "Record%2DList"}}
                            },
                        }
                    },
                }
            },
            "/zones/{zone_id}/settings": {
                "get": {
                    "operationId": "zoneSettings",
                    "tags": ["zones"],
                    "parameters": [
                        {
                            "name": "zone_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
        "components": {
            "schemas": {
                "Unused": {"type": "string"},
                "Item": {
                    "type": "object",
                    "properties": {
                        "id": {"$ref": ref + "Id"},
                        "kind": {"$ref": ref + "Kind"},
                        "tags": {"type": "array", "items": {"$ref": ref + "Tag.Name"}},
                        "a/b": {"$ref": ref + "Fact/properties/src"},
                    },
                },
                "Id": {"type": "string"},
                "Kind": {
                    "oneOf": [{"$ref": ref + "Note"}, {"$ref": ref + "Fact"}],
                    "discriminator": {
                        "propertyName": "t",
                        "mapping": {"note": "Note", "fact": ref + "Fact", "quote": "Quote"},
                    },
                },
                "Note": {"type": "object", "properties": {"t": {"type": "string"}}},
                "Fact": {
                    "type": "object",
                    "properties": {"t": {"type": "string"}, "src": {"$ref": ref + "Id"}},
                },
                "Quote": {"type": "object", "properties": {"t": {"type": "string"}}},
                "Tag.Name": {"type": "string"},
                "Record-List": {"type": "array", "items": {"$ref": ref + "Record"}},
                "Record": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "parameters": {
                "AccountId": {
                    "name": "account_id",
                    "in": "path",
                    "required": True,
                    "schema": {"$ref": ref + "Id"},
                },
                "UnusedParam": {"name": "q", "in": "query", "schema": {"type": "string"}},
            },
            "responses": {
                "ItemList": {
                    "description": "items",
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"$ref": ref + "Item"}}
                        }
                    },
                }
            },
            "requestBodies": {
                "NewItem": {
                    "content": {
                        "application/json": {"schema": {"$ref": ref + "Item/properties/a~1b"}}
                    }
                }
            },
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer"},
                "legacy": {"type": "apiKey", "in": "header", "name": "X-Auth-Key"},
            },
        },
    }


def pinned(doc: dict[str, Any]) -> tuple[bytes, str]:
    raw = json.dumps(doc, indent=1).encode()
    return raw, hashlib.sha256(raw).hexdigest()


def cut(doc: dict[str, Any], prefixes: list[str] = (), tags: list[str] = ()) -> dict[str, Any]:
    raw, pin = pinned(doc)
    out = extract(
        raw, sha256=pin, path_prefixes=list(prefixes), tags=list(tags), source_name="whole.json"
    )
    return orjson.loads(out)


def test_a_prefix_keeps_its_path_items_unchanged_and_every_component_they_need() -> None:
    doc = whole_document()
    result = cut(doc, prefixes=["/accounts/{account_id}/memory"])
    assert list(result) == ["openapi", "info", "servers", "security", "paths", "components"]
    assert result["paths"] == {
        "/accounts/{account_id}/memory/items": doc["paths"]["/accounts/{account_id}/memory/items"]
    }
    comps = result["components"]
    # transitively: ItemList -> Item -> Id, Kind -> Note, Fact -> Id, Tag.Name; and Quote,
    # which only the discriminator's mapping names (by bare schema name)
    assert list(comps["schemas"]) == ["Item", "Id", "Kind", "Note", "Fact", "Quote", "Tag.Name"]
    assert list(comps["parameters"]) == ["AccountId"]
    assert list(comps["responses"]) == ["ItemList"]
    assert list(comps["requestBodies"]) == ["NewItem"]
    # every security scheme, used or not, in source order
    assert list(comps["securitySchemes"]) == ["token", "legacy"]
    for name, value in comps["schemas"].items():
        assert value == doc["components"]["schemas"][name]
    assert "tags" not in result


def test_the_cut_validates_on_its_own() -> None:
    for selection in ({"prefixes": ["/accounts/"]}, {"tags": ["dns"]}, {"prefixes": ["/zones"]}):
        result = cut(whole_document(), **selection)
        osv_validate(result)
        assert structural_error_line("cut.json", result) is None


def test_a_tag_selects_the_path_items_with_an_operation_carrying_it() -> None:
    result = cut(whole_document(), tags=["dns"])
    assert list(result["paths"]) == ["/zones/{zone_id}/dns_records"]
    # a percent-encoded ref (%2D is -) is decoded, and the component it names is carried along
    assert list(result["components"]["schemas"]) == ["Record-List", "Record"]


def test_prefixes_and_tags_combine_as_a_union_in_source_order() -> None:
    result = cut(whole_document(), prefixes=["/zones/{zone_id}/settings"], tags=["memory"])
    assert list(result["paths"]) == [
        "/accounts/{account_id}/memory/items",
        "/zones/{zone_id}/settings",
    ]


def test_a_tag_on_a_referenced_path_item_counts() -> None:
    doc = whole_document()
    doc["openapi"] = "3.1.0"
    doc["components"]["pathItems"] = {"Records": doc["paths"].pop("/zones/{zone_id}/dns_records")}
    doc["paths"]["/zones/{zone_id}/dns_records"] = {"$ref": "#/components/pathItems/Records"}
    result = cut(doc, tags=["dns"])
    assert list(result["paths"]) == ["/zones/{zone_id}/dns_records"]
    assert list(result["components"]["pathItems"]) == ["Records"]
    assert "Record" in result["components"]["schemas"]
    osv_validate(result)


def test_any_other_file_is_refused_with_the_exact_message() -> None:
    raw, pin = pinned(whole_document())
    other = raw + b" "
    actual = hashlib.sha256(other).hexdigest()
    with pytest.raises(SpecError) as info:
        extract(other, sha256=pin, path_prefixes=["/"], tags=[], source_name="cf.json")
    assert str(info.value) == (
        f"specgen: cf.json has SHA-256 {actual}, not the pinned {pin}; refusing to cut from any other file"
    )


def test_the_pin_is_checked_before_anything_is_parsed() -> None:
    with pytest.raises(SpecError, match="not the pinned"):
        extract(b"not json at all", sha256="0" * 64, path_prefixes=[], tags=[], source_name="x")


def test_the_pin_may_be_given_in_upper_case() -> None:
    raw, pin = pinned(whole_document())
    extract(raw, sha256=pin.upper(), path_prefixes=["/zones"], tags=[], source_name="x")


@pytest.mark.parametrize(
    ("mutate", "prefixes", "expected"),
    [
        (None, [], "specgen: extract needs at least one --path-prefix or --tag to select paths"),
        (
            None,
            ["/nowhere"],
            'specgen: whole.json: no path matches --path-prefix "/nowhere"; nothing to cut',
        ),
        (
            lambda d: d["components"]["schemas"].pop("Id"),
            ["/accounts"],
            "does not resolve",
        ),
        (
            lambda d: d["components"]["requestBodies"]["NewItem"]["content"][
                "application/json"
            ].update(schema={"$ref": "#/components/schemas/Item/properties/nope"}),
            ["/accounts"],
            '"#/components/schemas/Item/properties/nope", which does not resolve',
        ),
        (
            lambda d: d["components"]["schemas"]["Item"].update(allOf=[{"$ref": "other.json#/X"}]),
            ["/accounts"],
            '"other.json#/X", outside the document',
        ),
        (
            lambda d: d["components"]["schemas"]["Item"].update(allOf=[{"$ref": "#/paths/x"}]),
            ["/accounts"],
            "not under #/components/",
        ),
        # A discriminator mapping value with a "/" or a "#" is a reference, not a bare
        # schema name (one of the two is enough): refused as such, never looked up as the
        # schema "https:~1~1elsewhere.example~1s.json" or "#Note".
        (
            lambda d: d["components"]["schemas"]["Kind"]["discriminator"]["mapping"].update(
                quote="https://elsewhere.example/s.json"
            ),
            ["/accounts"],
            '"https://elsewhere.example/s.json", outside the document',
        ),
        (
            lambda d: d["components"]["schemas"]["Kind"]["discriminator"]["mapping"].update(
                quote="#Note"
            ),
            ["/accounts"],
            '"#Note", which is not under #/components/',
        ),
    ],
)
def test_refusals_are_one_line(mutate: Any, prefixes: list[str], expected: str) -> None:
    doc = whole_document()
    if mutate:
        mutate(doc)
    raw, pin = pinned(doc)
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=prefixes, tags=[], source_name="whole.json")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("specgen: ")
    assert expected in message


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'{"openapi": "3.0.3"}'])
def test_not_a_document_is_refused(raw: bytes) -> None:
    pin = hashlib.sha256(raw).hexdigest()
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=["/"], tags=[], source_name="w.json")
    assert str(info.value).startswith("specgen: w.json: ")
    assert "\n" not in str(info.value)


def test_the_output_is_deterministic_indented_json_with_a_trailing_newline() -> None:
    raw, pin = pinned(whole_document())
    first = extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=["dns"], source_name="a")
    second = extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=["dns"], source_name="b")
    assert first == second
    assert first.endswith(b"}\n") and not first.endswith(b"\n\n")
    assert first.startswith(b'{\n  "openapi": "3.0.3",\n  "info": {\n    "title": "Provider')
    assert "Provider — all APIs".encode() in first  # non-ASCII written as itself
    assert first == orjson.dumps(orjson.loads(first), option=orjson.OPT_INDENT_2) + b"\n"


def test_integers_wider_than_64_bits_survive_the_cut() -> None:
    doc = whole_document()
    # wider than a double too (orjson would refuse it): the standard library parses it
    doc["components"]["schemas"]["Id"]["maximum"] = 10**400 + 1
    result_bytes, pin = pinned(doc)
    out = extract(result_bytes, sha256=pin, path_prefixes=["/accounts"], tags=[], source_name="x")
    assert json.loads(out)["components"]["schemas"]["Id"]["maximum"] == 10**400 + 1
    # the standard library writes it, in the same layout as every other cut: 2-space
    # indentation, ": " after keys, non-ASCII as itself, one trailing newline
    assert out == (json.dumps(json.loads(out), indent=2, ensure_ascii=False) + "\n").encode()
    assert out.startswith(b'{\n  "openapi": "3.0.3",\n  "info": {\n    "title": "Provider')
    wide = str(10**400 + 1).encode()
    assert b'\n      "Id": {\n        "type": "string",\n        "maximum": ' + wide + b"\n" in out
    assert "Provider — all APIs".encode() in out
    assert out.endswith(b"}\n") and not out.endswith(b"\n\n")


def test_integers_orjson_would_read_as_floats_survive_the_cut() -> None:
    """orjson 3.13 reads 2**70 + 1 as the float 1.1805916207174113e+21 without an error;
    the cut must keep the operator's integer exactly (found by mutation testing)."""
    doc = whole_document()
    doc["components"]["schemas"]["Id"]["maximum"] = 2**70 + 1
    raw, pin = pinned(doc)
    out = extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=[], source_name="x")
    assert json.loads(out)["components"]["schemas"]["Id"]["maximum"] == 2**70 + 1
    assert b'"maximum": ' + str(2**70 + 1).encode() + b"\n" in out


def test_a_cut_without_wide_integers_is_written_by_orjson() -> None:
    """The standard library is only the fallback for integers orjson cannot hold: the two
    write some floats differently (1e-7 against 1e-07), so a cut of an ordinary document
    must come from orjson, byte for byte."""
    doc = whole_document()
    doc["components"]["schemas"]["Id"]["x-step"] = 1e-7
    raw, pin = pinned(doc)
    out = extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=[], source_name="x")
    assert out == orjson.dumps(orjson.loads(out), option=orjson.OPT_INDENT_2) + b"\n"
    assert b'"x-step": 1e-7\n' in out


def test_a_broken_unselected_path_item_does_not_spoil_a_tag_cut() -> None:
    doc = whole_document()
    doc["paths"]["/broken"] = {"$ref": "#/components/pathItems/Missing"}
    doc["paths"]["/remote"] = {"$ref": "https://elsewhere.example/api.json#/paths/x"}
    result = cut(doc, tags=["dns"])
    assert list(result["paths"]) == ["/zones/{zone_id}/dns_records"]


def test_a_selected_path_item_that_is_a_broken_ref_is_refused() -> None:
    doc = whole_document()
    doc["paths"]["/broken"] = {"$ref": "#/components/pathItems/Missing"}
    raw, pin = pinned(doc)
    with pytest.raises(
        SpecError,
        match='path "/broken" refers to "#/components/pathItems/Missing", which does not resolve',
    ):
        extract(raw, sha256=pin, path_prefixes=["/broken"], tags=[], source_name="w.json")


def test_the_extract_command_writes_the_cut_or_refuses_in_one_line(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from specgen.cli import cli

    raw, pin = pinned(whole_document())
    whole = tmp_path / "whole.json"
    whole.write_bytes(raw)
    out = tmp_path / "cut.json"
    args = ["extract", str(whole), "--sha256", pin, "--tag", "dns", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == extract(
        raw, sha256=pin, path_prefixes=[], tags=["dns"], source_name="x"
    )

    out.unlink()
    wrong = "0" * 64
    result = CliRunner().invoke(
        cli, ["extract", str(whole), "--sha256", wrong, "--tag", "dns", "-o", str(out)]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"specgen: {whole} has SHA-256 {pin}, not the pinned {wrong}; refusing to cut from any other file"
    ]
    assert not out.exists()


# -- the pin: the exact hash, in either letter case, and nothing else -------------------------


def _not_the_pin(pin: str) -> list[str]:
    flipped = ("1" if pin[0] == "0" else "0") + pin[1:]
    return [
        "",
        " ",
        pin[:1],
        pin[:8],
        pin[:63],  # every prefix, down to one character, is a different pin
        pin[1:],
        pin + "0",
        pin + pin,
        flipped,
        pin[::-1],
        "sha256:" + pin,
        "sha256-" + pin,
        hashlib.sha256(b"another file").hexdigest(),
        "0" * 64,
    ]


def test_every_pin_but_the_exact_hash_is_refused() -> None:
    raw, pin = pinned(whole_document())
    for wrong in _not_the_pin(pin) + [pin[:n] for n in range(64)]:
        with pytest.raises(SpecError, match="not the pinned") as info:
            extract(raw, sha256=wrong, path_prefixes=["/zones"], tags=[], source_name="x")
        assert "\n" not in str(info.value), wrong


@settings(max_examples=300, deadline=None)
@given(candidate=st.one_of(st.text(alphabet="0123456789abcdefABCDEF", max_size=66), st.text()))
def test_any_other_string_is_refused_as_a_pin(candidate: str) -> None:
    raw, pin = pinned(whole_document())
    assume(candidate.strip().lower() != pin)
    with pytest.raises(SpecError, match="not the pinned"):
        extract(raw, sha256=candidate, path_prefixes=["/zones"], tags=[], source_name="x")


@pytest.mark.parametrize("case", [str.lower, str.upper, lambda p: p[:32].upper() + p[32:]])
def test_the_exact_hash_is_accepted_in_either_letter_case(case: Any) -> None:
    raw, pin = pinned(whole_document())
    assert extract(raw, sha256=case(pin), path_prefixes=["/zones"], tags=[], source_name="x")


def test_the_command_refuses_an_empty_or_shortened_pin_in_one_line(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from specgen.cli import cli

    raw, pin = pinned(whole_document())
    whole = tmp_path / "whole.json"
    whole.write_bytes(raw)
    out = tmp_path / "cut.json"
    for wrong in ("", pin[:12], pin[:-1]):
        result = CliRunner().invoke(
            cli, ["extract", str(whole), "--sha256", wrong, "--tag", "dns", "-o", str(out)]
        )
        assert result.exit_code != 0, wrong
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
        assert not out.exists()


# -- found by mutation testing (tests/mutation): each test names the mutant it kills ----------


@pytest.mark.parametrize(
    "ref",
    [
        # one level below a component: no "deep enough to check" threshold lets it through
        # (kills `ref.count("/") > 3` -> `> 4`)
        "#/components/schemas/Item/nope",
        # a percent-encoded slash is a separator once decoded (RFC 6901, section 6), so this
        # points inside Item too, and nowhere; counting "/" in the raw text accepted it
        "#/components/schemas/Item%2Fnope",
        "#/components/schemas/Item%2Fproperties%2Fnope",
    ],
)
def test_a_reference_inside_a_component_that_lands_nowhere_is_refused(ref: str) -> None:
    doc = whole_document()
    body = doc["components"]["requestBodies"]["NewItem"]["content"]["application/json"]
    body["schema"] = {"$ref": ref}
    raw, pin = pinned(doc)
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=[], source_name="w.json")
    assert str(info.value) == (
        f'specgen: w.json: components/requestBodies/NewItem refers to "{ref}", '
        "which does not resolve"
    )


def test_a_percent_encoded_reference_inside_a_component_that_resolves_is_kept() -> None:
    doc = whole_document()
    body = doc["components"]["requestBodies"]["NewItem"]["content"]["application/json"]
    body["schema"] = {"$ref": "#/components/schemas/Fact%2Fproperties%2Fsrc"}
    result = cut(doc, prefixes=["/accounts"])
    assert result["paths"] == {k: v for k, v in doc["paths"].items() if k.startswith("/accounts")}
    assert "Fact" in result["components"]["schemas"]


@pytest.mark.parametrize("ref", ["#/components/schemas", "#/components/", "#/components/schemas/"])
def test_a_reference_that_names_no_component_is_refused_in_one_line(ref: str) -> None:
    """kills `len(parts) < 2` -> `< 1` (a ValueError escaped instead)."""
    doc = whole_document()
    doc["components"]["schemas"]["Item"]["allOf"] = [{"$ref": ref}]
    raw, pin = pinned(doc)
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=["/accounts"], tags=[], source_name="w.json")
    assert "\n" not in str(info.value)
    if ref.endswith("schemas/"):  # names the component "" which does not exist
        assert str(info.value).endswith(f'refers to "{ref}", which does not resolve')
    else:
        assert str(info.value).endswith(f'refers to "{ref}", which names no component')


def test_a_document_without_components_can_be_cut() -> None:
    """kills `components is not None` -> `is None` (and `not components is not None`)."""
    doc = whole_document()
    del doc["components"]
    doc["paths"] = {"/zones/{zone_id}/settings": doc["paths"]["/zones/{zone_id}/settings"]}
    result = cut(doc, prefixes=["/zones"])
    assert list(result) == ["openapi", "info", "servers", "security", "paths"]
    assert result["paths"] == doc["paths"]


@pytest.mark.parametrize("components", [[], ["schemas"], "schemas", 0, True])
def test_components_that_is_not_an_object_is_refused_in_one_line(components: Any) -> None:
    doc = whole_document()
    doc["components"] = components
    raw, pin = pinned(doc)
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=["/zones"], tags=[], source_name="w.json")
    assert str(info.value) == "specgen: w.json: components is not an object"


def test_a_prefix_keeps_every_path_it_matches_not_only_the_first() -> None:
    """kills the `continue` after a prefix match -> `break`."""
    doc = whole_document()
    result = cut(doc, prefixes=["/zones"])
    assert list(result["paths"]) == ["/zones/{zone_id}/dns_records", "/zones/{zone_id}/settings"]
    result = cut(doc, prefixes=["/accounts"], tags=["dns"])
    assert list(result["paths"]) == [
        "/accounts/{account_id}/memory/items",
        "/zones/{zone_id}/dns_records",
    ]


@pytest.mark.parametrize("item", ["a string", ["get"], 7, None])
def test_a_path_item_that_is_not_an_object_does_not_break_a_tag_cut(item: Any) -> None:
    """kills `wanted_tags and isinstance(item, dict)` -> `or` (an AttributeError escaped)."""
    doc = whole_document()
    doc["paths"]["/odd"] = item
    result = cut(doc, tags=["dns"])
    assert list(result["paths"]) == ["/zones/{zone_id}/dns_records"]
    # a prefix keeps it as it is: the cut copies path items, it does not judge them
    assert cut(doc, prefixes=["/odd"])["paths"] == {"/odd": item}


def test_only_the_documented_top_level_members_are_kept() -> None:
    """kills `key == "components"` -> `key <= "components"`: a member sorting before
    "components" ("$schema", "Tags", "basePath") must not receive the components."""
    doc = whole_document()
    doc = {"$schema": "https://spec.openapis.org/oas/3.0/schema", "Tags": [], **doc}
    doc.update(basePath="/v1", externalDocs={"url": "https://example.com"}, webhooks={})
    doc["x-logo"] = {"url": "https://example.com/logo.png"}
    doc["jsonSchemaDialect"] = "https://spec.openapis.org/oas/3.1/dialect/base"
    result = cut(doc, prefixes=["/accounts"])
    assert list(result) == [
        "openapi",
        "info",
        "servers",
        "security",
        "paths",
        "components",
        "jsonSchemaDialect",
    ]
    assert result["jsonSchemaDialect"] == doc["jsonSchemaDialect"]


def test_a_components_member_that_is_not_an_object_does_not_stop_the_others() -> None:
    """kills the `continue` past a non-object components member -> `break`."""
    doc = whole_document()
    doc["components"] = {"x-note": "vendor text", "examples": [], **doc["components"]}
    result = cut(doc, prefixes=["/accounts"])
    assert list(result["components"]) == [
        "schemas",
        "parameters",
        "responses",
        "requestBodies",
        "securitySchemes",
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"openapi": "3.0.3", "x": 123456789012345678901,',  # truncated, with 21 digits
        b"[" * 100_000 + b"12345678901234567890" + b"]" * 100_000,  # nested too deeply
    ],
)
def test_json_with_a_wide_integer_that_does_not_parse_is_refused_in_one_line(raw: bytes) -> None:
    """kills `except (ValueError, RecursionError)` -> either one never raised, in the branch
    that reads documents holding 20-digit numbers with the standard library."""
    pin = hashlib.sha256(raw).hexdigest()
    with pytest.raises(SpecError) as info:
        extract(raw, sha256=pin, path_prefixes=["/"], tags=[], source_name="w.json")
    assert str(info.value).startswith("specgen: w.json: not JSON: ")
    assert "\n" not in str(info.value)
