"""An OpenAPI document read the way the far side of the wire reads it: routes, parameter
decoding by `style`, request bodies by media type, and answers checked against their schema.

Why its own reader: the fakes play the real services and must not share the code whose
decisions they are there to observe (`specgen.routes`, the broker's encoders). Routing
is the document's path templates, decoding is OpenAPI's serialisation rules (`form`,
`deepObject`, bracketed form fields as Stripe documents them), validation is
`openapi-schema-validator` over the whole document through `referencing`.

What a fake does with a refusal (its status, its words, its JSON shape) is the fake's:
this module raises `Refusal` and lets each service say it its own way.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson
from jsonschema.exceptions import best_match
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry
from referencing.jsonschema import DRAFT4

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_INTEGER = re.compile(r"-?\d{1,18}\Z")
_NUMBER = re.compile(r"-?(\d{1,18}(\.\d{0,18})?|\.\d{1,18})([eE][-+]?\d{1,3})?\Z")
#: A bracketed form or query name: `metadata[plan]`, `expand[]`, `address[line1]`.
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")


class Refusal(Exception):
    """A request the document does not allow. `kind` says which rule
    ("route", "method", "parameter", "body"); `name` the parameter or field, if any."""

    def __init__(self, status: int, kind: str, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.name = name
        self.allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parameter:
    name: str
    location: str  # "path", "query", "header"
    required: bool
    style: str
    explode: bool
    schema: dict[str, Any]
    pointer: str  # JSON pointer to the schema, for the validator


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    template: str  # the document's path, after the server prefix
    segments: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    #: media type -> pointer to the body schema (`application/json`,
    #: `application/x-www-form-urlencoded`)
    bodies: dict[str, str]
    body_required: bool
    #: status key ("200", "4XX", "default") -> pointer to the JSON schema, or None when
    #: the response has no JSON body
    responses: dict[str, str | None]

    def parameter(self, location: str, name: str) -> Parameter | None:
        for param in self.parameters:
            if param.location == location and param.name == name:
                return param
        return None

    @property
    def literal_segments(self) -> int:
        return sum(1 for s in self.segments if not s.startswith("{"))

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        values: dict[str, str] = {}
        for want, got in zip(self.segments, segments, strict=True):
            if want.startswith("{") and want.endswith("}"):
                if not got:
                    return None
                values[want[1:-1]] = unquote(got)
            elif want != got:
                return None
        return values

    def response_key(self, status: int) -> str | None:
        """The document's response entry for a status: the code, then `4XX`, then default."""
        for key in (str(status), f"{str(status)[0]}XX", "default"):
            if key in self.responses:
                return key
        return None


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


class Document:
    """Routes and validators of one OpenAPI 3.0 document."""

    def __init__(self, path: Path, uri: str) -> None:
        self.path = path
        self.uri = uri
        self.doc: dict[str, Any] = orjson.loads(path.read_bytes())
        self.registry: Registry[Any] = Registry().with_resource(
            uri, DRAFT4.create_resource(self.doc)
        )
        paths = {urlsplit(s["url"]).path.rstrip("/") for s in self.doc.get("servers", [])}
        if len(paths) > 1:
            raise ValueError(f"{path.name}: servers disagree on the path: {sorted(paths)}")
        self.prefix = paths.pop() if paths else ""
        self.operations = tuple(self._operations())
        self._validators: dict[str, OAS30Validator] = {}
        self._lock = threading.Lock()

    # -- reading the document ---------------------------------------------------

    def deref(self, node: Any) -> Any:
        resolver = self.registry.resolver(self.uri)
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = resolver.lookup(self.uri + node["$ref"]).contents
        return node

    def _parameter(self, raw: Any, pointer: str) -> Parameter:
        while isinstance(raw, dict) and isinstance(raw.get("$ref"), str):
            pointer = raw["$ref"].removeprefix("#")
            raw = self.deref({"$ref": raw["$ref"]})
        location = raw["in"]
        style = raw.get("style") or ("simple" if location in ("path", "header") else "form")
        return Parameter(
            name=raw["name"],
            location=location,
            required=bool(raw.get("required")),
            style=style,
            explode=bool(raw.get("explode", style == "form")),
            schema=self.deref(raw.get("schema", {})),
            pointer=f"{pointer}/schema",
        )

    def _operations(self) -> Iterator[Operation]:
        for template, raw_item in self.doc["paths"].items():
            item = self.deref(raw_item)
            base = f"/paths/{_escape(template)}"
            shared = [
                self._parameter(p, f"{base}/parameters/{i}")
                for i, p in enumerate(item.get("parameters", []))
            ]
            for method, op in item.items():
                if method not in METHODS:
                    continue
                params = {(p.location, p.name): p for p in shared}
                for i, raw in enumerate(op.get("parameters", [])):
                    p = self._parameter(raw, f"{base}/{method}/parameters/{i}")
                    params[(p.location, p.name)] = p
                bodies: dict[str, str] = {}
                required = False
                if "requestBody" in op:
                    body = self.deref(op["requestBody"])
                    required = bool(body.get("required"))
                    for media in body.get("content", {}):
                        bodies[media] = (
                            f"{base}/{method}/requestBody/content/{_escape(media)}/schema"
                        )
                responses: dict[str, str | None] = {}
                for status, raw_response in op.get("responses", {}).items():
                    at = f"{base}/{method}/responses/{_escape(status)}"
                    while isinstance(raw_response, dict) and "$ref" in raw_response:
                        at = raw_response["$ref"].removeprefix("#")
                        raw_response = self.deref({"$ref": raw_response["$ref"]})
                    has_json = "application/json" in raw_response.get("content", {})
                    responses[status] = (
                        f"{at}/content/application~1json/schema" if has_json else None
                    )
                yield Operation(
                    operation_id=op["operationId"],
                    method=method.upper(),
                    template=template,
                    segments=tuple(template.split("/")[1:]),
                    parameters=tuple(params.values()),
                    bodies=bodies,
                    body_required=required,
                    responses=responses,
                )

    def operation(self, operation_id: str) -> Operation:
        for op in self.operations:
            if op.operation_id == operation_id:
                return op
        raise KeyError(operation_id)

    def validator(self, pointer: str) -> OAS30Validator:
        with self._lock:
            if pointer not in self._validators:
                self._validators[pointer] = OAS30Validator(
                    {"$ref": f"{self.uri}#{pointer}"},
                    registry=self.registry,
                    format_checker=oas30_format_checker,
                )
            return self._validators[pointer]

    def schema_at(self, pointer: str) -> Any:
        return self.deref({"$ref": "#" + pointer})

    # -- one request ------------------------------------------------------------

    def route(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        """The operation for a request path (server prefix included), or a 404/405 Refusal."""
        if not path.startswith(self.prefix + "/"):
            raise Refusal(404, "route", "no such route")
        segments = path[len(self.prefix) :].split("/")[1:]
        matched = [(op, v) for op in self.operations if (v := op.match(segments)) is not None]
        if not matched:
            raise Refusal(404, "route", "no such route")
        same = [(op, v) for op, v in matched if op.method == method]
        if not same:
            refusal = Refusal(405, "method", f"{method} is not allowed here")
            refusal.allowed = tuple(sorted({op.method for op, _ in matched}))
            raise refusal
        op, values = max(same, key=lambda pair: pair[0].literal_segments)
        for param in op.parameters:
            if param.location == "path":
                values[param.name] = self.decode(param, values[param.name])
        return op, values

    def query(self, op: Operation, raw: str, *, unknown_ok: bool) -> dict[str, Any]:
        """The query string decoded by each parameter's style and checked against its
        schema; an undeclared name is refused unless `unknown_ok` (GitHub ignores them)."""
        declared = {p.name: p for p in op.parameters if p.location == "query"}
        flat: dict[str, list[str]] = {}
        deep: dict[str, list[tuple[str, str]]] = {}
        for name, value in parse_qsl(raw, keep_blank_values=True):
            head = name.split("[", 1)[0]
            param = declared.get(head)
            if param is not None and param.style == "deepObject" and head != name:
                deep.setdefault(head, []).append((name, value))
            elif name in declared:
                flat.setdefault(name, []).append(value)
            elif not unknown_ok:
                raise Refusal(400, "parameter", f"unknown query parameter {name!r}", name)
        out: dict[str, Any] = {}
        for name, param in declared.items():
            if name in deep:
                value: Any = nest(deep[name]).get(name)
            elif name in flat:
                values = flat[name]
                if param.schema.get("type") == "array":
                    value = values if param.explode else values[-1].split(",")
                elif len(values) > 1:
                    raise Refusal(400, "parameter", f"{name!r} given {len(values)} times", name)
                else:
                    value = values[0]
            else:
                if param.required:
                    raise Refusal(400, "parameter", f"{name!r} is required", name)
                continue
            out[name] = self.decode(param, value)
        return out

    def decode(self, param: Parameter, value: Any) -> Any:
        """`value` (text, or nested text from brackets) as its schema's types, validated."""
        typed = coerce(self, param.schema, value)
        error = best_match(self.validator(param.pointer).iter_errors(typed))
        if error is not None:
            raise Refusal(400, "parameter", f"{param.name!r}: {error.message}", param.name)
        return typed

    def body(self, op: Operation, content_type: str | None, raw: bytes) -> Any:
        """The request body decoded by its media type and checked against its schema."""
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if not raw:
            if op.body_required:
                raise Refusal(400, "body", "a request body is required")
            return None
        if not op.bodies:
            raise Refusal(400, "body", f"{op.method} {op.template} takes no body")
        if media not in op.bodies:
            raise Refusal(
                415, "body", f"this operation takes {' or '.join(sorted(op.bodies))}", media
            )
        pointer = op.bodies[media]
        if media == "application/json":
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise Refusal(400, "body", "the body is not JSON") from None
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise Refusal(400, "body", "the form body is not UTF-8") from None
            value = coerce(self, self.schema_at(pointer), nest(parse_qsl(text, True)))
        error = best_match(self.validator(pointer).iter_errors(value))
        if error is not None:
            field = ".".join(str(p) for p in error.absolute_path) or None
            raise Refusal(400, "body", error.message, field)
        return value

    def response_problem(self, op: Operation, status: int, payload: Any) -> str | None:
        """Why an answer contradicts the document; None when it is valid (or the document
        describes no JSON body for that status)."""
        key = op.response_key(status)
        if key is None:
            return f"{op.operation_id} documents no response for status {status}"
        pointer = op.responses[key]
        if pointer is None:
            return None
        error = best_match(self.validator(pointer).iter_errors(payload))
        return None if error is None else error.message


def nest(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Bracketed names into nested values, as Stripe and Rack read forms:
    `metadata[plan]=pro` -> {"metadata": {"plan": "pro"}}, `expand[]=a&expand[]=b` ->
    {"expand": ["a", "b"]}. A plain name repeated keeps its last value."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        head, _, rest = name.partition("[")
        keys = [head] + (_BRACKETS.findall("[" + rest) if rest else [])
        node: Any = out
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            if isinstance(node, list):
                if key == "" or not node or not isinstance(node[-1], dict) or last:
                    node.append(value if last else {})
                node = node[-1]
                continue
            if last:
                node[key] = value
            else:
                nxt = keys[i + 1]
                if key not in node or not isinstance(node[key], (dict, list)):
                    node[key] = [] if nxt == "" else {}
                node = node[key]
    return out


def coerce(document: Document, schema: Any, value: Any) -> Any:
    """Text from a query string or form as the schema's types: "3" -> 3 for an integer,
    "true" -> True for a boolean, {"0": a, "1": b} -> [a, b] for an array. A value that
    fits no type is left as text, so the validator names what is wrong with it."""
    schema = document.deref(schema)
    if not isinstance(schema, dict):
        return value
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for branch in schema[key]:
                typed = coerce(document, branch, value)
                if typed is not value and _fits(document, branch, typed):
                    return typed
            for branch in schema[key]:
                if _fits(document, branch, value):
                    return value
            return value
    kind = schema.get("type")
    if isinstance(value, str):
        if kind == "integer" and _INTEGER.match(value):
            return int(value)
        if kind == "number" and _NUMBER.match(value):
            return int(value) if _INTEGER.match(value) else float(value)
        if kind == "boolean" and value in ("true", "false"):
            return value == "true"
        if kind == "array":
            return [coerce(document, schema.get("items", {}), value)]
        return value
    if isinstance(value, dict):
        if kind == "array" and all(k.isdigit() for k in value):
            items = [value[k] for k in sorted(value, key=int)]
            return [coerce(document, schema.get("items", {}), v) for v in items]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {
            k: coerce(document, props.get(k, extra if isinstance(extra, dict) else {}), v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [coerce(document, schema.get("items", {}), v) for v in value]
    return value


def _fits(document: Document, schema: Any, value: Any) -> bool:
    """Whether `value` is valid against a schema taken from inside the document (its
    `$ref`s resolve against the document, not against the schema itself)."""
    validator = OAS30Validator(
        schema,
        registry=document.registry,
        format_checker=oas30_format_checker,
        _resolver=document.registry.resolver(base_uri=document.uri),
    )
    return next(iter(validator.iter_errors(value)), None) is None
