"""An operation's parameters as data: where each travels, and how it is serialised.

A grant can only confine what it can name. The generator therefore reads every
parameter the document declares for an operation into one record per (location, name),
with the OpenAPI defaults for `style` and `explode` filled in, so that `allow.json`, the
grant checker and (later) the broker all agree on what a route may carry without each
re-reading the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from specgen.errors import SpecError
from specgen.frozen import make
from specgen.quoting import go_quote
from specgen.refs import Refs


class ParameterLocation(StrEnum):
    """OpenAPI's `in`: the four places a parameter can travel."""

    PATH = "path"
    QUERY = "query"
    HEADER = "header"
    COOKIE = "cookie"


#: OpenAPI 3: "If in is header and the name field is Accept, Content-Type or
#: Authorization, the parameter definition SHALL be ignored." Compared case-insensitively.
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})

#: The default `style` per location (OpenAPI 3.0.3 / 3.1, Parameter Object).
DEFAULT_STYLE = {
    ParameterLocation.PATH: "simple",
    ParameterLocation.QUERY: "form",
    ParameterLocation.HEADER: "simple",
    ParameterLocation.COOKIE: "form",
}


# SchemaSummary and Parameters are NamedTuples and Parameter a frozen dataclass, for the
# reasons specgen/frozen.py gives.
class SchemaSummary(NamedTuple):
    """What a pinned value can be checked against without a JSON Schema engine.

    `type` is the declared primitive type ("" when absent or a union), `enum` the
    declared values as JSON texts of strings/numbers/booleans, `items` the item type of
    an array, `pattern` a string's declared `pattern` (run by RE2 when a pin is checked).
    """

    type: str = ""
    enum: tuple[str, ...] | None = None
    items: str = ""
    pattern: str | None = None


@dataclass(frozen=True)
class Parameter:
    """One declared parameter, merged and resolved."""

    name: str
    location: ParameterLocation
    required: bool
    schema: SchemaSummary
    style: str
    explode: bool

    @property
    def deep_object(self) -> bool:
        return self.style == "deepObject"


class Parameters(NamedTuple):
    """An operation's parameters, per location, in declaration order (path item first)."""

    path: tuple[Parameter, ...] = ()
    query: tuple[Parameter, ...] = ()
    header: tuple[Parameter, ...] = ()
    cookie: tuple[Parameter, ...] = ()

    def at(self, location: ParameterLocation) -> tuple[Parameter, ...]:
        return getattr(self, location.value)  # type: ignore[no-any-return]

    def all(self) -> tuple[Parameter, ...]:
        return (*self.path, *self.query, *self.header, *self.cookie)


def _scalar_text(value: Any) -> str | None:
    """An enum member as the text a query string or header would carry, or None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return None


def _declared_type(schema: dict[str, Any]) -> str:
    """A schema's primitive `type`: "" when absent or a union."""
    raw_type = schema.get("type")
    if isinstance(raw_type, list):  # 3.1: ["string", "null"] is a string that may be absent
        kinds = [t for t in raw_type if t != "null"]
        raw_type = kinds[0] if len(kinds) == 1 else ""
    return raw_type if isinstance(raw_type, str) else ""


def summarise(schema: Any, refs: Refs, where: str) -> SchemaSummary:
    """The checkable part of a parameter's schema (type, enum, array item type)."""
    schema = refs.deref(schema, where) if schema is not None else None
    if not isinstance(schema, dict):
        return SchemaSummary()
    kind = _declared_type(schema)
    enum = None
    raw_enum = schema.get("enum")
    if isinstance(raw_enum, list):
        texts = [_scalar_text(v) for v in raw_enum if v is not None]
        if all(t is not None for t in texts):
            enum = tuple(t for t in texts if t is not None)
    items = ""
    if kind == "array" and schema.get("items"):
        # Only the items' own type is kept, so they are not summarised in turn: an array
        # whose items are itself (`A: {type: array, items: {$ref: A}}`) recursed until
        # Python's stack ran out.
        try:
            item = refs.deref(schema["items"], f"{where} items")
        except SpecError:
            item = None
        items = _declared_type(item) if isinstance(item, dict) else ""
    pattern = schema.get("pattern") if kind in ("string", "") else None
    return SchemaSummary(kind, enum, items, pattern if isinstance(pattern, str) else None)


#: ParameterLocation(value) as a lookup: the enum's call is a Python-level lookup about
#: ten times the cost of a dict's, and GitHub's document reads ~600 parameter objects.
_LOCATION_OF: dict[str, ParameterLocation] = {loc.value: loc for loc in ParameterLocation}


def _one(param: dict[str, Any], refs: Refs, where: str) -> Parameter:
    name = str(param.get("name") or "").strip()
    raw_in = param.get("in")
    location = _LOCATION_OF.get(str(raw_in or "").strip().lower())
    if location is None:
        raise SpecError(
            f"specgen: {where} declares parameter {go_quote(name)} with unsupported location "
            f"{go_quote(str(raw_in or ''))} (want path/query/header/cookie)"
        )
    style = param.get("style")
    style = style if isinstance(style, str) and style else DEFAULT_STYLE[location]
    explode = param.get("explode")
    explode = explode if isinstance(explode, bool) else style == "form"
    schema = param.get("schema")
    if schema is None and isinstance(param.get("content"), dict):
        # `content` instead of `schema`: the value is a serialised document, a string
        schema = {"type": "string"}
    return make(
        Parameter,
        {
            "name": name,
            "location": location,
            "required": param.get("required") is True or location is _PATH,
            "schema": summarise(schema, refs, f"{where} parameter {go_quote(name)} schema"),
            "style": style,
            "explode": explode,
        },
    )


#: A `$ref` string, or a parameter object's id (the object kept alive beside its
#: reading) -> the parameter object, its Parameter and the key it is merged under (its
#: location and name, a header's name lower-cased).
ParameterMemo = dict[int | str, tuple[dict[str, Any], Parameter, tuple["ParameterLocation", str]]]


def _read(
    param: Any, i: int, refs: Refs, where: str, memo: ParameterMemo | None
) -> tuple[Parameter, tuple[ParameterLocation, str]]:
    """One parameter object's Parameter and merge key, read once per object."""
    if not isinstance(param, dict):
        raise SpecError(f"specgen: {where}: parameter {i} is not an object")
    hit = memo.get(id(param)) if memo is not None else None
    if hit is not None and hit[0] is param:
        return hit[1], hit[2]
    p = _one(param, refs, where)
    key = (p.location, p.name.lower() if p.location is _HEADER else p.name)
    if memo is not None:
        memo[id(param)] = (param, p, key)
    return p, key


_PATH, _QUERY, _HEADER, _COOKIE = (
    ParameterLocation.PATH,
    ParameterLocation.QUERY,
    ParameterLocation.HEADER,
    ParameterLocation.COOKIE,
)
#: What an operation without parameters gets (most of GitHub's have some; many don't).
_NONE = Parameters()


def merged(
    path_item: dict[str, Any],
    op: dict[str, Any],
    refs: Refs,
    where: str,
    memo: ParameterMemo | None = None,
) -> Parameters:
    """The operation's parameters: the path item's, overridden by the operation's.

    OpenAPI: a parameter is identified by its name and location; one the operation
    declares replaces the path item's of the same (name, in). Header names compare
    case-insensitively (they are HTTP field names); Accept, Content-Type and
    Authorization header parameters are dropped, as the specification says.

    `memo` (one per document) reads a parameter object shared through `$ref` once:
    GitHub's operations share a few dozen (`owner`, `repo`, `per_page`) about 2,300
    times. What a parameter reads as does not depend on where it is used (`where` only
    words a refusal, and a refusal ends the build). This runs once per operation (1,222
    on GitHub's document), so a `$ref` read before is found by its string in one
    lookup, without following it again or wording a refusal it cannot meet.
    """
    by_key: dict[tuple[ParameterLocation, str], Parameter] = {}
    for owner in (path_item, op):
        raw = owner.get("parameters") or []
        if not isinstance(raw, list):
            raise SpecError(f"specgen: {where}: parameters must be a list")
        for i, entry in enumerate(raw):
            if isinstance(entry, dict) and "$ref" in entry:
                ref = entry["$ref"]
                hit = memo.get(ref) if memo is not None and isinstance(ref, str) else None
                if hit is None:
                    param = refs.deref(entry, f"{where} parameter {i}")
                    p, key = _read(param, i, refs, where, memo)
                    if memo is not None:
                        memo[ref] = (param, p, key)
                else:
                    p, key = hit[1], hit[2]
            else:
                p, key = _read(entry, i, refs, where, memo)
            by_key[key] = p
    if not by_key:
        return _NONE
    path: list[Parameter] = []
    query: list[Parameter] = []
    header: list[Parameter] = []
    cookie: list[Parameter] = []
    for (loc, key_name), p in by_key.items():
        if loc is _QUERY:
            query.append(p)
        elif loc is _PATH:
            path.append(p)
        elif loc is _HEADER:
            if key_name not in IGNORED_HEADERS:
                header.append(p)
        else:
            cookie.append(p)
    return Parameters(tuple(path), tuple(query), tuple(header), tuple(cookie))
