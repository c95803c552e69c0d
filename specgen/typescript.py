"""TypeScript types for the generated client, from the document's schemas.

A model that writes agent code needs to know what a method takes and what it returns;
`description.txt` alone cannot say that `remember` wants `{content, sessionId}`. This
module turns each generated operation's parameters, request body and 2xx responses into
TypeScript type expressions, and every schema under `#/components/schemas` they reach
into one named declaration (so a `$ref` cycle is just a name that refers to itself).

Type expressions are recursive, so they are assembled here; the layout of the files that
carry them (`types.d.ts`, the per-grant description) lives in the templates. Documents
are untrusted: nesting, object members, union members and the length of one expression
are capped, and whatever is cut falls back to `unknown` and is counted, so a reader
knows which operations are fully typed.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

from specgen import media as media_types
from specgen.naming import ident_chars
from specgen.operations import Generated, Operation
from specgen.quoting import go_quote, js_string, ts_comment
from specgen.refs import MISSING, resolve_pointer

#: Inline nesting a type expression may reach before it becomes `unknown`.
MAX_DEPTH = 8
#: Members of one union or intersection, values of one enum.
MAX_MEMBERS = 80
#: Properties of one object (GitHub's `repository` has about 90).
MAX_PROPERTIES = 250
#: Characters of one type expression.
MAX_EXPR = 8000
#: Characters of one doc comment.
MAX_DOC = 240

_COMPONENT = "#/components/schemas/"
#: Keys that make a schema more than its `type` says (see _Converter.expr).
_NOT_PLAIN = frozenset(["$ref", "allOf", "oneOf", "anyOf", "const", "enum"])
#: The TypeScript of each scalar `type` (the first branches of _Converter.one_type).
_SCALAR = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}
_UNSEEN: Any = object()
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_PARAM = re.compile(r"\{([^{}]*)\}")
_LOCATIONS = ("path", "query", "header")
#: Names a declaration may not take: TypeScript's own types and type keywords.
_TAKEN = frozenset(
    [
        "any",
        "unknown",
        "never",
        "void",
        "null",
        "undefined",
        "object",
        "string",
        "number",
        "boolean",
        "symbol",
        "bigint",
        "Array",
        "Record",
        "Partial",
        "Required",
        "Readonly",
        "Pick",
        "Omit",
        "Promise",
        "Date",
        "Error",
        "Function",
        "Object",
        "String",
        "Number",
        "Boolean",
        "Symbol",
        "Map",
        "Set",
        "JSON",
        "Math",
        "type",
        "interface",
        "declare",
        "namespace",
        # the names types.d.ts.j2 declares itself
        "PlimsollClient",
        "PlimsollResponse",
    ]
)


def doc_text(text: object) -> str:
    """One line of prose that is safe inside a `/** */` comment, at most MAX_DOC long."""
    if not isinstance(text, str):
        return ""
    return _doc_line(text)


#: Heads of a description tried, shortest first, before all of it: the first fills a doc
#: comment unless folding whitespace shrank it by a fifth, which prose rarely does.
_DOC_HEADS = (MAX_DOC * 5 // 4, 4 * MAX_DOC)


# Not memoised: a shared parameter is typed once (`_Builder.param`), so GitHub's 2,275
# calls hold only 213 repeats, and a cache had to hash every description in full (most
# are read only up to a head): 3.7 ms with the cache, 3.0 without.
def _doc_line(text: str) -> str:
    for size in _DOC_HEADS:
        if len(text) <= size:
            break
        # Folding only joins whole words with single spaces, and `*/` is two characters,
        # so the comment text of a prefix is a prefix of the whole text's. A long
        # description (GitHub's run to pages) is cut after its first few hundred
        # characters whenever those already fill the comment: folding is most of the
        # cost of typing a large document, and it is paid per character read.
        head = ts_comment(text[:size])
        if len(head) > MAX_DOC:
            return head[: MAX_DOC - 1].rstrip() + "…"
    line = ts_comment(text)
    return line if len(line) <= MAX_DOC else line[: MAX_DOC - 1].rstrip() + "…"


@lru_cache(maxsize=4096)  # GitHub's schemas name about 8,700 members, most of them often
def member_key(name: str) -> str:
    """A property name as TypeScript needs it: bare when it is an identifier."""
    return name if _IDENT.match(name) else js_string(name)


# The records here are NamedTuples: see specgen/frozen.py.
class Declaration(NamedTuple):
    """`type NAME = TS;` for one component schema."""

    name: str
    ts: str
    doc: str
    refs: tuple[str, ...]
    fallbacks: int = 0


class Param(NamedTuple):
    """One parameter of a method: where it travels, its TypeScript, and whether the
    generated method sends it (from its `options` argument; never for a path one)."""

    name: str
    location: str
    ts: str
    required: bool
    doc: str
    sent: bool = False


class OperationTypes(NamedTuple):
    """The types of one generated method."""

    op: Operation
    doc: str
    path_params: tuple[Param, ...]
    #: Query, header and cookie parameters, each with whether the client sends it.
    extra_params: tuple[Param, ...]
    body: str | None
    body_required: bool
    response: str
    refs: tuple[str, ...]
    fallbacks: int
    tags: tuple[str, ...] = ()

    @property
    def params(self) -> tuple[Param, ...]:
        return self.path_params + self.extra_params

    def options_argument(self) -> tuple[str, bool] | None:
        """(`options`' TypeScript, whether a member is required) in one pass over the
        parameters, or None when the method takes no `options`."""
        if not self.op.has_options:
            return None
        members = []
        required = False
        for p in self.extra_params:
            if p.sent:
                members.append(f"{member_key(p.name)}{'' if p.required else '?'}: {p.ts}")
                required = required or p.required
        return "{ " + "; ".join(members) + " }", required

    @property
    def arguments(self) -> str:
        """The method's parameter list (a property: render.method_rows reads it per
        method for types.d.ts.j2)."""
        args = [f"{p.name}: {p.ts}" for p in self.path_params]
        if self.body is not None:
            args.append(f"body{'' if self.body_required else '?'}: {self.body}")
        found = self.options_argument()
        if found is not None:
            options, required = found
            if self.body is not None and not self.body_required and required:
                args[-1] = args[-1].replace("body?:", "body:", 1)
            args.append(f"options{'' if required else '?'}: {options}")
        return ", ".join(args)

    def signature(self, global_name: str) -> str:
        return f"{global_name}.{self.op.name}({self.arguments}): Promise<{self.response}>"


class TypeSet(NamedTuple):
    """Every operation's types and the declarations they reach."""

    operations: tuple[OperationTypes, ...]
    declarations: tuple[Declaration, ...]
    fallbacks: int
    #: Local `$ref`s the types needed that point nowhere in the document, sorted: each
    #: typed `unknown` where used. The structural validation a build runs does not
    #: follow references, so without these a broken one would build without a word.
    dangling: tuple[str, ...] = ()

    def closure(self, refs: tuple[str, ...], limit: int = 60) -> tuple[list[Declaration], int]:
        """The declarations `refs` reach, breadth first; (shown, how many more were cut)."""
        by_name = {d.name: d for d in self.declarations}
        seen: set[str] = set()
        order: list[Declaration] = []
        queue = deque(refs)
        while queue:
            name = queue.popleft()
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            order.append(by_name[name])
            queue.extend(by_name[name].refs)
        return order[:limit], max(0, len(order) - limit)

    def fully_typed(self, op: OperationTypes) -> bool:
        """No `unknown` was forced anywhere in the operation or the types it reaches."""
        reached, _ = self.closure(op.refs, limit=len(self.declarations))
        return op.fallbacks == 0 and all(d.fallbacks == 0 for d in reached)


class _Scope:
    """What one expression being built has used: named types and fallbacks.

    A plain class with slots, not a dataclass: one is made per method, per parameter
    typed and per declaration (about 2,500 for GitHub's document), and the dataclass's
    __init__ resolved its default factory at each."""

    __slots__ = ("fallbacks", "refs")

    def __init__(self) -> None:
        self.refs: list[str] = []
        self.fallbacks = 0


class _Converter:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.names: dict[str, str] = {}  # component pointer -> declaration name
        self.taken: set[str] = set(_TAKEN)
        self.pending: deque[str] = deque()
        self.fallbacks = 0
        # fragment -> where it points: every `$ref` to a shared schema, parameter or
        # response is walked once, not at every use
        self.targets: dict[str, Any] = {}
        self.finals: dict[str, Any] = {}  # `$ref` -> where its chain ends (see `final`)

    def target(self, fragment: str) -> Any:
        """`resolve_pointer(doc, fragment)`, remembered."""
        found = self.targets.get(fragment, _UNSEEN)
        if found is _UNSEEN:
            found = self.targets[fragment] = resolve_pointer(self.doc, fragment)
        return found

    def final(self, node: Any) -> Any:
        """`_deref(self.target, node)`, remembered per `$ref`: where a chain ends depends
        only on its first reference, and GitHub's operations name a few dozen shared
        parameters and responses thousands of times."""
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node
        found = self.finals.get(ref, _UNSEEN)
        if found is _UNSEEN:
            found = self.finals[ref] = _deref(self.target, node)
        return found

    # -- names -------------------------------------------------------------------------

    def declared(self, pointer: str) -> str:
        name = self.names.get(pointer)
        if name is None:
            raw = pointer[len(_COMPONENT) :].replace("~1", "/").replace("~0", "~")
            base = ident_chars(raw) or "_"
            if base[0].isdigit():
                base = "_" + base
            name, n = base, 1
            while name in self.taken:
                n += 1
                name = f"{base}_{n}"
            self.taken.add(name)
            self.names[pointer] = name
            self.pending.append(pointer)
        return name

    # -- expressions -------------------------------------------------------------------

    def fallback(self, scope: _Scope) -> str:
        scope.fallbacks += 1
        return "unknown"

    def expr(
        self, schema: Any, scope: _Scope, depth: int = 0, seen: frozenset[str] = frozenset()
    ) -> str:
        """The TypeScript for `schema`; never longer than MAX_EXPR.

        Two kinds of schema are answered here with what `general` would answer, in one
        call instead of up to five: one plain `type` (no `$ref`, composition, `const` or
        `enum`), and a `$ref` to a component already declared. They are nearly every node
        of a large document (about 10,000 of GitHub's 12,700), and the calls were most of
        the conversion's time. tests/specgen/test_typescript_equivalence.py holds the two
        paths to one answer.
        """
        if type(schema) is dict and depth <= MAX_DEPTH:
            # the frozenset asks about each key: no view object, no generic `in` per key
            if _NOT_PLAIN.isdisjoint(schema):
                kind = schema.get("type")
                if type(kind) is str:
                    text = _SCALAR.get(kind) or self.one_type(kind, schema, scope, depth, seen)
                    if schema.get("nullable") is True and text not in ("null", "unknown"):
                        text += " | null"
                    return text if len(text) <= MAX_EXPR else self.fallback(scope)
            else:
                ref = schema.get("$ref")
                name = self.names.get(ref) if type(ref) is str else None
                if name is not None:  # a component `ref` already declared (see `ref`)
                    scope.refs.append(name)
                    return name if len(name) <= MAX_EXPR else self.fallback(scope)
        return self.general(schema, scope, depth, seen)

    def general(self, schema: Any, scope: _Scope, depth: int, seen: frozenset[str]) -> str:
        """`expr` without its fast path: every schema, the long way."""
        text = self._expr(schema, scope, depth, seen)
        return text if len(text) <= MAX_EXPR else self.fallback(scope)

    def _expr(self, schema: Any, scope: _Scope, depth: int, seen: frozenset[str]) -> str:
        if schema is True or schema == {}:
            return "unknown"
        if schema is False:
            return "never"
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return self.fallback(scope)
        ref = schema.get("$ref")
        if ref is not None:
            return self.ref(ref, scope, depth, seen)
        core = self.core(schema, scope, depth, seen)
        nullable = schema.get("nullable") is True and core not in ("null", "unknown")
        return f"{core} | null" if nullable else core

    def ref(self, ref: Any, scope: _Scope, depth: int, seen: frozenset[str]) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return self.fallback(scope)  # external: load bundled documents only
        if ref.startswith(_COMPONENT) and "/" not in ref[len(_COMPONENT) :]:
            if self.target(ref[1:]) is MISSING:
                return self.fallback(scope)
            name = self.declared(ref)
            scope.refs.append(name)
            return name
        if ref in seen:
            return self.fallback(scope)  # a cycle through schemas that have no name
        target = self.target(ref[1:])
        if target is MISSING:
            return self.fallback(scope)
        return self._expr(target, scope, depth + 1, seen | {ref})

    def members(self, items: Any, scope: _Scope, depth: int, seen: frozenset[str]) -> list[str]:
        if not isinstance(items, list) or not items:
            return [self.fallback(scope)]
        if len(items) > MAX_MEMBERS:
            return [self.fallback(scope)]
        out: list[str] = []
        for item in items:
            text = self.expr(item, scope, depth + 1, seen)
            if text not in out:
                out.append(text)
        return out

    def core(self, schema: dict[str, Any], scope: _Scope, depth: int, seen: frozenset[str]) -> str:
        for key, joiner in (("allOf", " & "), ("oneOf", " | "), ("anyOf", " | ")):
            if key in schema:
                parts = self.members(schema[key], scope, depth, seen)
                rest = {k: v for k, v in schema.items() if k not in (key, "nullable")}
                if rest.keys() & {"type", "properties", "items", "enum", "const"}:
                    # Siblings of a composition constrain the same value.
                    parts = [*parts, self.core(rest, scope, depth, seen)]
                if joiner == " & ":
                    parts = [p for p in parts if p != "unknown"] or ["unknown"]
                return _join(parts, joiner)
        if "const" in schema:
            return _literal(schema["const"]) or self.fallback(scope)
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values or len(values) > MAX_MEMBERS:
                return self.plain(schema, scope, depth, seen)
            literals = [_literal(v) for v in values]
            if None in literals:  # a value with no literal type (an object, a list)
                return self.plain(schema, scope, depth, seen)
            return _join(list(dict.fromkeys(literals)), " | ")
        return self.plain(schema, scope, depth, seen)

    def plain(self, schema: dict[str, Any], scope: _Scope, depth: int, seen: frozenset[str]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):  # OpenAPI 3.1: ["string", "null"]
            kinds = [k for k in kind if isinstance(k, str)]
            return _join([self.one_type(k, schema, scope, depth, seen) for k in kinds], " | ")
        if isinstance(kind, str):
            return self.one_type(kind, schema, scope, depth, seen)
        if "properties" in schema or "additionalProperties" in schema:
            return self.one_type("object", schema, scope, depth, seen)
        if "items" in schema:
            return self.one_type("array", schema, scope, depth, seen)
        return "unknown"

    def one_type(
        self, kind: str, schema: dict[str, Any], scope: _Scope, depth: int, seen: frozenset[str]
    ) -> str:
        if kind == "string":
            return "string"
        if kind in ("integer", "number"):
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "null":
            return "null"
        if kind == "array":
            items = schema.get("items", {})
            return f"Array<{self.expr(items, scope, depth + 1, seen)}>"
        if kind == "object":
            return self.object(schema, scope, depth, seen)
        return self.fallback(scope)

    def object(
        self, schema: dict[str, Any], scope: _Scope, depth: int, seen: frozenset[str]
    ) -> str:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        required = set(required) if isinstance(required, list) else set()
        extra = schema.get("additionalProperties", True)
        if len(props) > MAX_PROPERTIES:
            scope.fallbacks += 1
            return "Record<string, unknown>"
        fields = []
        for key in _sorted_keys(props):
            ts = self.expr(props[key], scope, depth + 1, seen)
            mark = "" if key in required else "?"
            fields.append(f"{member_key(key if type(key) is str else str(key))}{mark}: {ts}")
        rest: str | None = None
        if isinstance(extra, dict) and extra != {}:
            rest = self.expr(extra, scope, depth + 1, seen)
        elif extra is True or extra == {}:
            rest = "unknown" if not fields else None
        if not fields:
            return "Record<string, never>" if rest is None else f"Record<string, {rest}>"
        body = "{ " + "; ".join(fields) + " }"
        return body if rest is None else f"{body} & Record<string, {rest}>"

    # -- declarations ------------------------------------------------------------------

    def drain(self) -> list[Declaration]:
        """Declare every component schema named so far, and those they name in turn."""
        out: list[Declaration] = []
        while self.pending:
            pointer = self.pending.popleft()
            schema = self.target(pointer[1:])
            scope = _Scope()
            ts = self.expr(schema, scope, 0, frozenset({pointer}))
            self.fallbacks += scope.fallbacks
            doc = (
                doc_text(schema.get("description") or schema.get("title"))
                if isinstance(schema, dict)
                else ""
            )
            refs = tuple(dict.fromkeys(scope.refs))
            out.append(Declaration(self.names[pointer], ts, doc, refs, scope.fallbacks))
        return out


def _sorted_keys(props: dict[Any, Any]) -> list[Any]:
    """`sorted(props, key=str)`: an object's property names in their text's order.

    A JSON document's names are all strings, which sort as they are; the key function
    made a `str` call per name (GitHub's reached schemas name about 8,700). A YAML
    document may name a property `1` or `true`: then comparing the names raises (a
    string and a number), or the first is not a string, and they are sorted by text.
    A sort compares each pair of neighbours in its result, and a string never compares
    with a non-string without raising, so a sort that succeeds with a string first
    holds strings only. tests/specgen/test_typescript_equivalence.py compares it with
    the key function.
    """
    try:
        names = sorted(props)
    except TypeError:
        return sorted(props, key=str)
    if names and type(names[0]) is not str:
        return sorted(props, key=str)
    return names


def _literal(value: Any) -> str | None:
    """The TypeScript literal type of a `const` or `enum` value, None when it has none.

    Infinity and NaN (YAML's `.inf` and `.nan`; a JSON number too large for a double)
    are values in TypeScript, not types: `1 | Infinity` does not compile."""
    if isinstance(value, str):
        return js_string(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return json.dumps(value)
    if isinstance(value, float):
        return json.dumps(value) if math.isfinite(value) else None
    return None


def _join(parts: list[str], joiner: str) -> str:
    if not parts:
        return "never"
    if len(parts) == 1:
        return parts[0]
    wrap = [f"({p})" if (" | " in p or " & " in p) else p for p in parts]
    return joiner.join(wrap)


def _deref(resolve: Callable[[str], Any], node: Any) -> Any:
    """Follow a `$ref` chain (a parameter, a body, a response), or None on a cycle or miss."""
    seen: set[str] = set()
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if ref in seen or not ref.startswith("#"):
            return None
        seen.add(ref)
        node = resolve(ref[1:])
        if node is MISSING:
            return None
    return node


def _json_schema(final: Callable[[Any], Any], owner: Any) -> tuple[bool, Any]:
    """(has content, the schema of its JSON media type or else its first one);
    `final` follows `owner`'s `$ref` chain (`_Converter.final`)."""
    owner = final(owner)
    content = owner.get("content") if isinstance(owner, dict) else None
    if not isinstance(content, dict) or not content:
        return False, None
    if len(content) == 1:  # nearly always: no order to find
        media = next(iter(content))
    else:
        media = sorted(content, key=lambda m: (not _is_json(str(m)), str(m)))[0]
    entry = content[media] if isinstance(content[media], dict) else {}
    if not _is_json(str(media)):
        kind = _held_as(str(media))
        if kind is not None:
            return True, kind
        if "schema" not in entry:
            return True, {"type": "string"}
    return True, entry.get("schema", {})


#: What the client hands over for a binary reply body, and takes for a binary request
#: body (see templates/client.js.j2).
BINARY_REPLY = "Uint8Array"
BINARY_BODY = "Uint8Array | ArrayBuffer"
_TEXT_SCHEMA: dict[str, Any] = {"type": "string"}
_BINARY_SCHEMA: dict[str, Any] = {"type": "string"}  # told apart from _TEXT_SCHEMA by identity


def _held_as(media: str) -> dict[str, Any] | None:
    """The schema a body of this (non-JSON) media type is held as in JS, whatever the
    document's schema says: text is a string, bytes a Uint8Array; None for form and
    multipart bodies, which are objects."""
    concrete = media_types.concrete(media)
    if concrete is None or concrete in (media_types.FORM, media_types.MULTIPART):
        return None
    kind = media_types.kind(concrete)
    if kind == "json":
        return None
    return _BINARY_SCHEMA if kind == "binary" else _TEXT_SCHEMA


def _merge_key(param: Any) -> tuple[tuple[str, str], dict[str, Any]] | None:
    """A parameter object's (location, name) merge key and the object, or None when
    its location is not one a method's types read.

    Location and name are read as specgen.params reads them (`in` whatever its case and
    spacing, the name stripped), so the parameter a method declares finds its schema and
    description here: compared as written, `in: "Query"` was typed `string`."""
    if not isinstance(param, dict):
        return None
    location = str(param.get("in") or "").strip().lower()
    if location not in _LOCATIONS:
        return None
    return (location, str(param.get("name") or "").strip()), param


@lru_cache(maxsize=256)  # GitHub's document names 11 media types in 1,313 places
def _is_json(media: str) -> bool:
    media = media.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json") or media == "*/*"


class _Builder:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.conv = _Converter(doc)
        # (id(parameter object), name, location, required, sent) -> (the object, its
        # Param, the names and fallbacks its schema added to the operation's scope)
        self.params: dict[tuple[Any, ...], tuple[Any, Param, tuple[str, ...], int]]
        self.params = {}
        #: `$ref` of a parameter entry -> its (location, name) and parameter object, or
        #: None when it is not one the merge keeps (see `parameters`)
        self.entries: dict[str, tuple[tuple[str, str], dict[str, Any]] | None] = {}

    def parameters(
        self, path_item: dict[str, Any], op: dict[str, Any]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The operation's parameter objects by (location, name), op overriding item.

        A `$ref` entry is read once per reference string (where its chain ends depends
        on nothing else, see `_Converter.final`): GitHub's 1,222 operations hold about
        4,500 entries, nearly all references to a few hundred shared parameters, and
        following and keying each one again was a fifth of typing an operation.
        """
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for owner in (path_item, op):
            raw = owner.get("parameters")
            for entry in raw if isinstance(raw, list) else []:
                ref = entry.get("$ref") if type(entry) is dict else None
                if type(ref) is str:
                    found = self.entries.get(ref, _UNSEEN)
                    if found is _UNSEEN:  # None is an answer too: a location not kept
                        found = self.entries[ref] = _merge_key(self.conv.final(entry))
                else:
                    found = _merge_key(self.conv.final(entry))
                if found is not None:
                    merged[found[0]] = found[1]
        return merged

    def param_schema(self, param: dict[str, Any]) -> Any:
        if "schema" in param:
            return param["schema"]
        return _json_schema(self.conv.final, param)[1] or {}

    def param(
        self,
        param: dict[str, Any],
        name: str,
        location: str,
        required: bool,
        sent: bool,
        scope: _Scope,
    ) -> Param:
        """One method parameter from its declaration (`{}` when it has none).

        A parameter object shared through `$ref` is typed once per (name, location,
        required, sent): GitHub's operations use a few dozen (`owner`, `repo`,
        `per_page`) about 2,300 times. What its schema added to a scope (the names it
        reaches, its fallbacks) is added again at every use, so each operation counts
        what it did.
        """
        key = (id(param), name, location, required, sent)
        hit = self.params.get(key)
        if hit is None or hit[0] is not param:  # the object is kept, so its id stays its own
            inner = _Scope()
            ts = self.conv.expr(self.param_schema(param), inner) if param else "string"
            made = Param(name, location, ts, required, doc_text(param.get("description")), sent)
            hit = self.params[key] = (param, made, tuple(inner.refs), inner.fallbacks)
        scope.refs.extend(hit[2])
        scope.fallbacks += hit[3]
        return hit[1]

    def operation(
        self, op: Operation, raw_op: dict[str, Any], path_item: dict[str, Any]
    ) -> OperationTypes:
        scope = _Scope()
        declared = self.parameters(path_item, raw_op)
        path_params: list[Param] = []
        placeholders = _PARAM.findall(op.template)
        for arg, placeholder in zip(op.args, placeholders, strict=False):
            param = declared.get(("path", placeholder), {})
            path_params.append(self.param(param, arg, "path", True, False, scope))
        # Which query and header parameters exist is the generator's decision (the
        # params model: merged, Accept/Content-Type/Authorization ignored, broker-owned
        # headers dropped); only their full schemas are read here. The model groups
        # them by location, so each group's location is spelled out here.
        extra_params: list[Param] = []
        dropped = set(op.dropped)
        for loc, group, names in (
            ("query", op.params.query, op.query_names),
            ("header", op.params.header, op.header_names),
        ):
            for p in group:
                if dropped and (
                    f"{loc} {go_quote(p.name)}" in dropped
                    or any(d.startswith(f"{loc} {go_quote(p.name)} ") for d in dropped)
                ):
                    continue
                param = declared.get((loc, p.name), {})
                sent = p.name in names
                extra_params.append(self.param(param, p.name, loc, p.required, sent, scope))
        body: str | None = None
        body_required = False
        if op.has_body:
            request = self.conv.final(raw_op.get("requestBody"))
            held = _held_as(op.body_type)
            has, schema = (
                (True, held) if held is not None else _json_schema(self.conv.final, request)
            )
            if schema is _BINARY_SCHEMA:
                body = BINARY_BODY
            else:
                body = self.conv.expr(schema, scope) if has else "unknown"
            body_required = isinstance(request, dict) and request.get("required") is True
        response = self.response(raw_op, scope)
        doc = doc_text(raw_op.get("description")) if raw_op.get("description") else ""
        tags = raw_op.get("tags")
        return OperationTypes(
            op,
            doc,
            tuple(path_params),
            tuple(extra_params),
            body,
            body_required,
            response,
            tuple(dict.fromkeys(scope.refs)),
            scope.fallbacks,
            tuple([t for t in tags if isinstance(t, str)]) if isinstance(tags, list) else (),
        )

    def response(self, raw_op: dict[str, Any], scope: _Scope) -> str:
        responses = raw_op.get("responses")
        if not isinstance(responses, dict):
            return "unknown"
        shapes: list[str] = []
        # only 2xx codes, in order (filtering before sorting keeps their order); a YAML
        # document may key a response by the integer 200, found when "200" is not there
        for code in sorted([c for c in map(str, responses) if len(c) == 3 and c[0] == "2"]):
            found = responses.get(code, _UNSEEN)
            if found is _UNSEEN:
                found = responses.get(int(code)) if code.isdigit() else None
            has, schema = _json_schema(self.conv.final, found)
            if has:
                text = BINARY_REPLY if schema is _BINARY_SCHEMA else self.conv.expr(schema, scope)
                if text not in shapes:
                    shapes.append(text)
        return _join(shapes, " | ") if shapes else "unknown"


def generate(doc: dict[str, Any], gen: Generated, prefix: str = "") -> TypeSet:
    """The types of every operation in `gen` (derived from `doc` with `prefix`)."""
    builder = _Builder(doc)
    paths = doc.get("paths") if isinstance(doc.get("paths"), dict) else {}
    ops: list[OperationTypes] = []
    for op in gen.operations:
        raw_path = op.template[len(prefix) :] if op.template.startswith(prefix) else op.template
        path_item = builder.conv.final(paths.get(raw_path))
        raw_op = path_item.get(op.method.lower()) if isinstance(path_item, dict) else None
        if not isinstance(raw_op, dict) or not isinstance(path_item, dict):
            ops.append(OperationTypes(op, "", (), (), None, False, "unknown", (), 1))
            continue
        ops.append(builder.operation(op, raw_op, path_item))
    declarations = builder.conv.drain()
    fallbacks = sum(o.fallbacks for o in ops) + builder.conv.fallbacks
    dangling = sorted("#" + f for f, found in builder.conv.targets.items() if found is MISSING)
    return TypeSet(tuple(ops), tuple(declarations), fallbacks, tuple(dangling))
