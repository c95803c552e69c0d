"""Validation of OpenAPI documents: a fast structural gate and a slow full report.

`build`, `emit` and `check` must refuse a malformed document without making the user
wait: on GitHub's 13 MB REST document jsonschema-rs checks the structure in about 10 ms,
while the pure-Python jsonschema needs seconds and openapi-spec-validator's full
validation half a minute. So the generator calls `structural_errors` (or the ready-made
`structural_error_line`), and only `specgen validate` pays for `full_report`.

The JSON Schemas are the ones openapi-spec-validator ships (located through its package,
never copied), so the fast gate and the full report judge structure by the same rules.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import jiter
import jsonschema_rs

from specgen.quoting import go_quote, visible
from specgen.refs import MISSING, resolve_pointer

# The document's `openapi` value selects the schema; anything else is the caller's refusal.
_VERSION_FAMILIES = (
    (re.compile(r"3\.0\.\d+"), "3.0"),
    (re.compile(r"3\.1\.\d+"), "3.1"),
)

SUPPORTED_VERSIONS_TEXT = "3.0.x or 3.1.x"

# Messages are printed on one line; a jsonschema-rs message embeds the offending
# instance, which for a oneOf failure can be a whole path item.
_MESSAGE_LIMIT = 200
# compiled on first use (re's cache): only a document with errors has messages to fold
_LINE_BREAKS = r"[\r\n\u2028\u2029\x85\x0b\x0c]+"


class StructuralError(NamedTuple):
    """One thing the OpenAPI schema refuses, and where.

    The records here are NamedTuples, for the reason specgen/frozen.py gives."""

    message: str
    pointer: str  # RFC 6901 JSON pointer into the document ("" is the whole document)


class StructuralResult(NamedTuple):
    """Outcome of the fast gate.

    `family` is "3.0" or "3.1", or None when the document's `openapi` value names no
    version this validator knows (then `errors` is empty and the caller must refuse
    the document with its own version message).
    """

    version: Any  # the document's own `openapi` value, as found
    family: str | None
    errors: tuple[StructuralError, ...] = ()

    @property
    def supported(self) -> bool:
        return self.family is not None

    @property
    def ok(self) -> bool:
        return self.family is not None and not self.errors


def version_family(doc: Any) -> str | None:
    """Return "3.0" or "3.1" for a document whose `openapi` names that version, else None."""
    if not isinstance(doc, dict):
        return None
    version = doc.get("openapi")
    if not isinstance(version, str):
        return None
    for pattern, family in _VERSION_FAMILIES:
        if pattern.match(version):
            return family
    return None


def _schema_bytes(family: str) -> bytes:
    """The meta-schema file openapi-spec-validator ships, read without importing it.

    Importing openapi_spec_validator (which `importlib.resources.files` would do) pulls
    in jsonschema, referencing and their friends: about 150 ms, ten times the
    validation itself, on every build.
    """
    spec = importlib.util.find_spec("openapi_spec_validator")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / "resources" / "schemas" / f"v{family}" / "schema.json"
        if path.is_file():
            return path.read_bytes()
    raise RuntimeError(f"openapi-spec-validator ships no OpenAPI {family} schema here")


@cache
def _structural_validator(family: str) -> Any:
    """Compile the OpenAPI meta-schema once per process; compiling costs more than validating.

    jiter reads the 36 KB schema (in about 0.1 ms, faster than `json`), and a build of a
    JSON document has it loaded already."""
    return jsonschema_rs.validator_for(jiter.from_json(_schema_bytes(family)))


def json_pointer(parts: Any) -> str:
    """RFC 6901 pointer from a sequence of keys and indices."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def one_line(message: str, limit: int = _MESSAGE_LIMIT) -> str:
    """Fold a message onto one line and elide its middle when it is long.

    The middle goes because both ends carry the meaning: the start names the instance,
    the end says which rule it broke.
    """
    text = re.sub(_LINE_BREAKS, " ", message).strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head - 5
    return f"{text[:head]} ... {text[-tail:]}"


_REF_REQUIRED = '"$ref" is a required property'


def _most_specific(err: Any) -> Any:
    """The error inside a failed oneOf/anyOf that says what is actually wrong.

    The OpenAPI schema wraps most objects in "a Schema or a Reference" alternatives, so
    a bad `pattern` deep in a schema surfaces as "<the whole schema> is not valid under
    any of the schemas listed in the 'oneOf' keyword". Like jsonschema's best_match,
    descend into the branch errors, preferring the deepest location and, among equals,
    anything over "it is not a $ref either".
    """
    for _ in range(64):
        context = getattr(err.kind, "context", None)
        if not context:
            return err
        candidates = [sub for branch in context for sub in branch]
        if not candidates:
            return err
        err = max(
            candidates,
            key=lambda e: (len(e.instance_path), e.message != _REF_REQUIRED),
        )
    return err


def structural_errors(doc: Any) -> StructuralResult:
    """Every structural error of `doc` against the OpenAPI JSON Schema of its version.

    The document is handed to jsonschema-rs as loaded: no copy, no re-serialisation.
    """
    version = doc.get("openapi") if isinstance(doc, dict) else None
    family = version_family(doc)
    if family is None:
        return StructuralResult(version=version, family=None)
    validator = _structural_validator(family)
    try:
        raw_errors = list(validator.iter_errors(doc))
    except (ValueError, TypeError, OverflowError):
        # Only a document that is not plain JSON data gets here: YAML gives `200:`
        # integer keys and dates. Validate its JSON reading, as every tool does.
        try:
            raw_errors = list(validator.iter_errors(json_compatible(doc)))
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            message = f"the document holds data JSON cannot represent ({one_line(str(exc))})"
            return StructuralResult(version, family, (StructuralError(message, ""),))
    errors = []
    for err in raw_errors:
        cause = _most_specific(err)
        errors.append(
            StructuralError(
                message=one_line(cause.message), pointer=json_pointer(cause.instance_path)
            )
        )
    return StructuralResult(version=version, family=family, errors=tuple(errors))


def json_compatible(doc: Any) -> Any:
    """The JSON reading of a loaded document: string keys, dates as ISO 8601 strings.

    YAML loaders turn `200:` into an integer key and `2020-01-01` into a date; JSON
    Schema validators (and the JSON pointers in messages) work on the JSON data model.
    orjson does the conversion in one native pass; the standard library covers the
    integers wider than 64 bits that orjson refuses.
    """
    import orjson

    try:
        return orjson.loads(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        return json.loads(json.dumps(doc, default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def show_pointer(pointer: str) -> str:
    """The pointer as printed; the empty pointer (the whole document) would read as nothing."""
    return pointer if pointer else "/ (the document root)"


def unsupported_version_line(file: str, version: Any) -> str:
    shown = json.dumps(version, ensure_ascii=False) if version is not None else "(missing)"
    return (
        f"specgen: {file}: unsupported openapi version {one_line(shown)} "
        f"(need {SUPPORTED_VERSIONS_TEXT})"
    )


def structural_error_line(file: str, doc: Any) -> str | None:
    """The one-line refusal for a structurally invalid document, or None when it is valid.

    Layout: `specgen: <file>: not a valid OpenAPI <ver> document: <message> at <pointer>`,
    followed by ` (and N more errors)` when there are others. A document whose `openapi`
    value is unsupported gets `unsupported_version_line` instead, so a None from this
    function always means "structurally valid".
    """
    result = structural_errors(doc)
    if not result.supported:
        return unsupported_version_line(file, result.version)
    if not result.errors:
        return None
    first = result.errors[0]
    line = (
        f"specgen: {file}: not a valid OpenAPI {result.version} document: "
        f"{first.message} at {show_pointer(first.pointer)}"
    )
    more = len(result.errors) - 1
    if more:
        line += f" (and {more} more error{'s' if more != 1 else ''})"
    return line


# --------------------------------------------------------------------------------------
# Full report: openapi-spec-validator plus a check of examples and defaults.


def _spec_validator_class(family: str) -> type:
    """openapi-spec-validator for `family`, with its own default check switched off.

    Its default check reports a contradicting default without saying where; the
    example/default walk below reports the same finding with a JSON pointer, so keeping
    both would list every such default twice.
    """
    from functools import partial

    from openapi_schema_validator import oas31_format_checker
    from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator
    from openapi_spec_validator.validation.keywords import (
        OpenAPIV30SchemaValidator,
        OpenAPIV31SchemaValidator,
        ValueValidator,
    )

    from specgen import regex

    class _NoDefaultCheck(ValueValidator):
        def __call__(self, schema: Any, value: Any) -> Iterator[Any]:
            return iter(())

    class _V30Schemas(OpenAPIV30SchemaValidator):
        """Each schema checked against the metaschema without the `regex` format, whose
        check hands the document's pattern to Python's `re` (specgen/regex.py)."""

        def _get_schema_checker(self, schema: Any, schema_value: Any) -> Any:
            cls = self.schema_validator_cls
            return partial(
                cls.check_schema, format_checker=regex.format_checker(cls.FORMAT_CHECKER)
            )

    class _V31Schemas(OpenAPIV31SchemaValidator):
        schema_validator_format_checker = regex.format_checker(oas31_format_checker)

    base = OpenAPIV30SpecValidator if family == "3.0" else OpenAPIV31SpecValidator
    keywords = dict(base.keyword_validators)
    keywords["default"] = _NoDefaultCheck
    keywords["schema"] = _V30Schemas if family == "3.0" else _V31Schemas
    return type(f"Pointered{base.__name__}", (base,), {"keyword_validators": keywords})


def _semantic_lines(doc: dict, source: str, family: str) -> list[str]:
    """openapi-spec-validator's checks beyond the JSON Schema, every one of them.

    Its `iter_errors` first runs the same OpenAPI JSON Schema as `structural_errors`
    (through the same jsonschema-rs engine) and then its own keyword validators; the
    report takes the structural part from `structural_errors`, whose messages are short
    and carry a pointer, and asks the library only for the rest.
    """
    from referencing.exceptions import Unresolvable  # the full report's import, not a build's

    lines: list[str] = []
    validator = _spec_validator_class(family)(doc, base_uri="")
    errors = validator.root_validator(validator.schema_path)
    while True:
        try:
            err = next(errors)
        except StopIteration:
            break
        except RecursionError:
            lines.append(f"specgen: {source}: validation stopped: the document nests too deeply")
            break
        except Unresolvable as exc:
            lines.append(f"specgen: {source}: {_unresolvable_line(exc)} (validation stopped there)")
            break
        except Exception as exc:  # the library trips over some malformed documents
            lines.append(
                f"specgen: {source}: validation stopped: {type(exc).__name__}: {one_line(str(exc))}"
            )
            break
        said = json_worded(err) if hasattr(err, "instance") else str(err)
        lines.append(f"specgen: {source}: {one_line(said or str(err))}")
    return lines


def _unresolvable_line(exc: Any) -> str:
    """What a reference the validator could not follow is, in a line. Not the exception's
    own text: a missing pointer's repeats the whole document (for a large one, megabytes
    of repr to build, then cut)."""
    from referencing.exceptions import PointerToNowhere

    if isinstance(exc, PointerToNowhere):  # its ref is the fragment, as the document wrote it
        return f"$ref {go_quote('#' + exc.ref)} points nowhere in the document"
    return f"$ref {go_quote(exc.ref)} cannot be followed (only references inside the document are)"


_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace", "query")

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_SINGLE = (
    "additionalProperties",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


class _ValueCheck(NamedTuple):
    """An example or default value and the schema it must satisfy."""

    kind: str  # "example", "default", ...
    value_pointer: str
    schema_pointer: str
    value: Any
    # A JSON media type's example may be given as its serialised text (the spec allows
    # strings for values JSON cannot hold, and tools accept it); such a string counts
    # when the JSON it holds satisfies the schema.
    serialised_json_ok: bool = False


class _ExampleWalker:
    """Finds every example and default together with the schema it must satisfy.

    The walk follows the OpenAPI object model (path items, operations, parameters,
    media types, headers, schemas) instead of looking for keys named "example"
    anywhere, because a property may well be called "example" or "default".
    """

    def __init__(self, doc: dict, family: str) -> None:
        self.doc = doc
        self.family = family
        self.checks: list[_ValueCheck] = []
        self._seen_schemas: set[int] = set()

    # local refs -----------------------------------------------------------------
    def deref(self, node: Any, pointer: str, depth: int = 0) -> tuple[Any, str]:
        """Follow a local `$ref` chain; a remote or broken one yields (None, pointer)."""
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and depth < 32:
            ref = node["$ref"]
            if not ref.startswith("#"):
                return None, pointer
            target = resolve_pointer(self.doc, ref[1:])
            if target is MISSING:
                return None, pointer
            node, pointer = target, unquote(ref[1:])
            depth += 1
        return node, pointer

    # object model -------------------------------------------------------------------
    def walk(self) -> list[_ValueCheck]:
        doc = self.doc
        paths = doc.get("paths")
        if isinstance(paths, dict):
            for key, item in paths.items():
                self.path_item(item, f"/paths/{_tok(key)}")
        webhooks = doc.get("webhooks")
        if isinstance(webhooks, dict):
            for key, item in webhooks.items():
                self.path_item(item, f"/webhooks/{_tok(key)}")
        comps = doc.get("components")
        if isinstance(comps, dict):
            base = "/components"
            for name, schema in _items(comps.get("schemas")):
                self.schema(schema, f"{base}/schemas/{_tok(name)}")
            for name, param in _items(comps.get("parameters")):
                self.parameter(param, f"{base}/parameters/{_tok(name)}")
            for name, header in _items(comps.get("headers")):
                self.parameter(header, f"{base}/headers/{_tok(name)}")
            for name, body in _items(comps.get("requestBodies")):
                self.content_holder(body, f"{base}/requestBodies/{_tok(name)}")
            for name, response in _items(comps.get("responses")):
                self.response(response, f"{base}/responses/{_tok(name)}")
            for name, item in _items(comps.get("pathItems")):
                self.path_item(item, f"{base}/pathItems/{_tok(name)}")
            for name, callback in _items(comps.get("callbacks")):
                self.callback(callback, f"{base}/callbacks/{_tok(name)}")
        return self.checks

    def path_item(self, item: Any, ptr: str) -> None:
        if not isinstance(item, dict) or "$ref" in item:
            return  # a referenced path item is checked where it is defined
        for i, param in enumerate(_list(item.get("parameters"))):
            self.parameter(param, f"{ptr}/parameters/{i}")
        for method in _HTTP_METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                self.operation(op, f"{ptr}/{method}")

    def operation(self, op: dict, ptr: str) -> None:
        for i, param in enumerate(_list(op.get("parameters"))):
            self.parameter(param, f"{ptr}/parameters/{i}")
        self.content_holder(op.get("requestBody"), f"{ptr}/requestBody")
        for code, response in _items(op.get("responses")):
            self.response(response, f"{ptr}/responses/{_tok(code)}")
        for name, callback in _items(op.get("callbacks")):
            self.callback(callback, f"{ptr}/callbacks/{_tok(name)}")

    def callback(self, callback: Any, ptr: str) -> None:
        if isinstance(callback, dict) and "$ref" not in callback:
            for expr, item in callback.items():
                self.path_item(item, f"{ptr}/{_tok(expr)}")

    def response(self, response: Any, ptr: str) -> None:
        if not isinstance(response, dict) or "$ref" in response:
            return
        for name, header in _items(response.get("headers")):
            self.parameter(header, f"{ptr}/headers/{_tok(name)}")
        self.content_holder(response, ptr)

    def content_holder(self, holder: Any, ptr: str) -> None:
        if not isinstance(holder, dict) or "$ref" in holder:
            return
        for media, media_type in _items(holder.get("content")):
            self.media_type(media_type, f"{ptr}/content/{_tok(media)}", _is_json_media(media))

    def parameter(self, param: Any, ptr: str) -> None:
        """Parameters and headers: `schema` with `example`/`examples`, or `content`."""
        if not isinstance(param, dict) or "$ref" in param:
            return
        if "content" in param:
            self.content_holder(param, ptr)
        self.media_type(param, ptr)

    def media_type(self, media: Any, ptr: str, json_media: bool = False) -> None:
        if not isinstance(media, dict):
            return
        schema = media.get("schema")
        if schema is None:
            return
        schema_ptr = f"{ptr}/schema"
        self.schema(schema, schema_ptr)
        if "example" in media:
            self.checks.append(
                _ValueCheck("example", f"{ptr}/example", schema_ptr, media["example"], json_media)
            )
        for name, example in _items(media.get("examples")):
            example_ptr = f"{ptr}/examples/{_tok(name)}"
            resolved, resolved_ptr = self.deref(example, example_ptr)
            if isinstance(resolved, dict) and "value" in resolved:
                self.checks.append(
                    _ValueCheck(
                        "example",
                        f"{resolved_ptr}/value",
                        schema_ptr,
                        resolved["value"],
                        json_media,
                    )
                )

    def schema(self, schema: Any, ptr: str, depth: int = 0) -> None:
        if not isinstance(schema, dict) or depth > 64:
            return
        if "$ref" in schema and self.family == "3.0":
            return  # 3.0 ignores a $ref's siblings; the target is checked where defined
        if id(schema) in self._seen_schemas:
            return
        self._seen_schemas.add(id(schema))
        if "default" in schema:
            self.checks.append(_ValueCheck("default", f"{ptr}/default", ptr, schema["default"]))
        if "example" in schema:
            self.checks.append(_ValueCheck("example", f"{ptr}/example", ptr, schema["example"]))
        if self.family != "3.0" and isinstance(schema.get("examples"), list):
            for i, value in enumerate(schema["examples"]):
                self.checks.append(_ValueCheck("example", f"{ptr}/examples/{i}", ptr, value))
        for key in _SUBSCHEMA_MAPS:
            for name, sub in _items(schema.get(key)):
                self.schema(sub, f"{ptr}/{key}/{_tok(name)}", depth + 1)
        for key in _SUBSCHEMA_LISTS:
            for i, sub in enumerate(_list(schema.get(key))):
                self.schema(sub, f"{ptr}/{key}/{i}", depth + 1)
        for key in _SUBSCHEMA_SINGLE:
            self.schema(schema.get(key), f"{ptr}/{key}", depth + 1)
        items = schema.get("items")
        if isinstance(items, list):
            for i, sub in enumerate(items):
                self.schema(sub, f"{ptr}/items/{i}", depth + 1)
        else:
            self.schema(items, f"{ptr}/items", depth + 1)


def _is_json_media(name: Any) -> bool:
    media = str(name).split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


_DOC_URI = "urn:specgen:document"


def _tok(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _value_validators(doc: dict, family: str) -> tuple[Any, Any, Any]:
    """Validator class, format checker and registry that resolve refs into `doc`."""
    from openapi_schema_validator import (
        OAS30Validator,
        OAS31Validator,
        oas30_format_checker,
        oas31_format_checker,
    )
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4, DRAFT202012

    spec = DRAFT4 if family == "3.0" else DRAFT202012
    registry = Registry().with_resource(_DOC_URI, Resource(contents=doc, specification=spec))
    if family == "3.0":
        return OAS30Validator, oas30_format_checker, registry
    return OAS31Validator, oas31_format_checker, registry


def example_nits(doc: dict, source: str) -> list[str]:
    """One line per example or default that its own schema rejects, with a JSON pointer."""
    family = version_family(doc)
    if family is None:
        return []
    checks = _ExampleWalker(doc, family).walk()
    if not checks:
        return []
    cls, format_checker, registry = _value_validators(doc, family)
    unchecked: set[str] = set()  # patterns RE2 cannot run, so no value was tested against them
    cls, format_checker = _linear_regexes(cls, format_checker, unchecked)
    validators: dict[str, Any] = {}
    lines: list[str] = []
    seen: set[str] = set()  # a shared example reached twice through the same schema
    for check in checks:
        validator = validators.get(check.schema_pointer)
        if validator is None:
            ref = f"{_DOC_URI}#{quote(check.schema_pointer, safe='/~')}"
            validator = cls({"$ref": ref}, registry=registry, format_checker=format_checker)
            validators[check.schema_pointer] = validator
        try:
            error = _first_error(validator, check.value)
        except RecursionError:
            continue
        except Exception:
            # The schema itself is broken (an unknown type, a bad pattern, a dangling
            # $ref); the structural and spec checks report that, not this one.
            continue
        if error is not None and check.serialised_json_ok and isinstance(check.value, str):
            try:
                error = _first_error(validator, json.loads(check.value))
            except (ValueError, RecursionError):
                pass
            except Exception:
                continue
        if error is None:
            continue
        where = json_pointer(error.absolute_path)
        detail = one_line(json_worded(error)) + (f" (at {where} inside the value)" if where else "")
        line = (
            f"specgen: {source}: nit: {check.kind} at {check.value_pointer} "
            f"contradicts the schema at {check.schema_pointer}: {detail}"
        )
        if line not in seen:
            seen.add(line)
            lines.append(line)
    lines.extend(_unchecked_line(source, p) for p in sorted(unchecked))
    return lines


def _linear_regexes(cls: Any, format_checker: Any, unchecked: set[str]) -> tuple[Any, Any]:
    """`cls` and `format_checker` with no document regex left to Python's `re`: each
    keyword the dialect has that runs one is RE2's (see specgen/regex.py)."""
    from jsonschema import validators

    from specgen import regex

    keywords = regex.jsonschema_keywords(unchecked)
    if "unevaluatedProperties" not in cls.VALIDATORS:
        del keywords["unevaluatedProperties"]  # a 2020-12 keyword: not OpenAPI 3.0's
    return validators.extend(cls, keywords), regex.format_checker(format_checker)


def _unchecked_line(source: str, pattern: str) -> str:
    from specgen.regex import MAX_PATTERN_CHARS, too_long

    if too_long(pattern):
        # Quoting the pattern itself would make one line of up to megabytes.
        return (
            f"specgen: {source}: nit: a pattern of {len(pattern)} characters starting "
            f"{go_quote(pattern[:40])} was not checked against examples or defaults: it "
            f"is longer than the {MAX_PATTERN_CHARS} characters the linear-time engine is given"
        )
    return (
        f"specgen: {source}: nit: pattern {go_quote(pattern)} was not checked against examples "
        "or defaults: it needs backtracking (backreferences or lookaround), which can take "
        "time exponential in the value, or is too large for the linear-time engine"
    )


def json_worded(error: Any) -> str:
    """jsonschema's message with the value it starts with written as JSON: the library
    writes Python's repr, so a JSON null reads `None is not valid ...` and an object
    `{'a': True}`. Strings and numbers read the same either way and are left as written."""
    message = str(error.message)
    value = error.instance
    if value is None or isinstance(value, bool | dict | list):
        shown = repr(value)
        if message.startswith(shown):
            try:
                as_json = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError):
                return message
            return as_json + message[len(shown) :]
    return message


def _first_error(validator: Any, value: Any) -> Any:
    from jsonschema.exceptions import best_match

    return best_match(validator.iter_errors(value))


def full_report(doc: Any, source: str) -> list[str]:
    """Every problem `specgen validate` should list; empty means the document is clean.

    Errors come first (structural and semantic, from openapi-spec-validator, every one
    of them rather than the first), then the nits: examples and defaults that their
    schemas reject. Nits do not affect generated files, which is why `build` ignores
    them, but a tidy document has none.
    """
    if not isinstance(doc, dict):
        return [f"specgen: {source}: the document's top level is not an object"]
    family = version_family(doc)
    if family is None:
        return [unsupported_version_line(source, doc.get("openapi"))]
    try:
        doc = json_compatible(doc)  # a copy, too: nothing below can touch the caller's
    except (TypeError, ValueError, RecursionError) as exc:
        return [
            f"specgen: {source}: the document holds data JSON cannot represent ({one_line(str(exc))})"
        ]
    structural = structural_errors(doc)
    lines = [
        f"specgen: {source}: {err.message} at {show_pointer(err.pointer)}"
        for err in structural.errors
    ]
    with warnings.catch_warnings():
        # Regexes from the document make `re` warn about odd character sets; the user
        # asked for a report, not for Python warnings on their terminal.
        warnings.simplefilter("ignore")
        lines.extend(_semantic_lines(doc, source, family))
        lines.extend(example_nits(doc, source))
    return [visible(line) for line in lines]  # messages quote document text
