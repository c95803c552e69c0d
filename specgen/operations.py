"""From an OpenAPI document to the operations a grant can carry.

This is where the generator decides, for every operation, whether a brokered client can
call it exactly as the document describes. Anything it cannot represent faithfully is
skipped with a stated reason (or refused under --strict), never silently dropped or
approximated, because a client that calls a different route than the document says
would make the grant mean something the operator did not write.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from operator import attrgetter
from typing import Any, NamedTuple

from specgen import media as media_types
from specgen import naming
from specgen.allow import FORM_MEDIA, AllowEntry, Permit, header_forbidden
from specgen.errors import SpecError
from specgen.frozen import make
from specgen.params import (
    _HEADER,  # a module constant: an enum member read through its class costs ~70 ns
    Parameter,
    ParameterLocation,
    ParameterMemo,
    Parameters,
    SchemaSummary,
    merged,
)
from specgen.quoting import fold_line, go_quote, js_string
from specgen.refs import Refs
from specgen.routes import Route, has_control, pattern_error

#: The order operations of one path are processed and emitted in.
VERBS: tuple[str, ...] = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_GRANTABLE = frozenset({"get", "put", "post", "delete", "patch"})
#: What the default build carries: HEAD and OPTIONS too. TRACE never: it echoes the
#: request back, credential included.
_CARRIED = _GRANTABLE | {"head", "options"}
_WITH_BODY = frozenset({"put", "post", "patch"})
#: The default build carries a documented body on DELETE too; never on GET/HEAD/OPTIONS.
_FULL_WITH_BODY = _WITH_BODY | {"delete"}
_CLIENT_CALL = {"get": "get", "put": "put", "post": "post", "delete": "del", "patch": "patch"}
_LOCATIONS = ("path", "query", "header", "cookie")
HEALTH_MARK = "x-plimsoll-health-check"

SKIP_VERB = "host-API grants enforce only GET/PUT/POST/DELETE/PATCH"
SKIP_TRACE = "TRACE is never carried: the server echoes the request, credential included"
#: The two build modes: the default carries parameters; "reference" writes exactly what
#: the Go reference writes (path-only routes, its skips and warnings).
COMPAT_MODES: tuple[str, ...] = ("reference",)
HEALTH_NOTE = (
    "no operation is marked x-plimsoll-health-check, so the profile gets no health_check: "
    "after an upstream 503 the per-run breaker waits out its full cooldown instead of "
    "probing for recovery. Mark the one concrete GET that reports whether the API can take "
    "traffic again"
)
_PARAM = re.compile(r"\{([^{}]*)\}")
# A segment with one parameter inside literal text: `{name}.json`, `v{n}`, `a{b}c`.
_PARTIAL = re.compile(r"([^{}]*)\{([^{}]*)\}([^{}]*)")
#: A template whose every `{name}` (name not empty) is a whole segment, and no other
#: brace: the common case, whose route is the template with each `{name}` made `*`.
_WHOLE_SEGMENT_PARAMS = re.compile(r"(?:/(?:\{[^{}/]+\}|[^{}/]*))*")
#: An HTTP field name (RFC 9110 token): what a header parameter must be to be carried.
_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


# Piece, Skip and Generated are NamedTuples and Operation a frozen dataclass, for the
# reasons specgen/frozen.py gives.
class Piece(NamedTuple):
    """One piece of a generated path expression: a literal, or an argument name."""

    text: str
    param: bool


@dataclass(frozen=True)
class Operation:
    """One generated client method and the route it calls."""

    method: str
    template: str
    route: str
    name: str
    args: tuple[str, ...]
    has_body: bool
    summary: str
    params: Parameters = field(default_factory=Parameters)
    #: Labels of declared parameters a grant cannot carry (cookies, broker-owned headers).
    dropped: tuple[str, ...] = ()
    #: The default build's structured call: the names the method sends as query and
    #: header parameters (from its `options` argument) and its body's media type.
    structured: bool = False
    query_names: tuple[str, ...] = ()
    header_names: tuple[str, ...] = ()
    body_type: str = ""
    body_types: tuple[str, ...] = ()
    #: Request body media types the document declares that no grant can carry (a key
    #: that names no media type), as written.
    lost_bodies: tuple[str, ...] = ()
    #: How its form body's fields serialise objects and arrays (the document's
    #: `encoding`, see specgen.allow.FORM_STYLES); only fields other than `form`.
    form_encoding: tuple[tuple[str, str], ...] = ()

    @property
    def arg_list(self) -> tuple[str, ...]:
        args = (*self.args, "body") if self.has_body else self.args
        return (*args, "options") if self.has_options else args

    @property
    def pieces(self) -> tuple[Piece, ...]:
        """The path expression of a method that concatenates its path (the reference
        build's preamble): literals, and each path argument in its parameter's place.
        Made from the template when asked for, as only that template does: the default
        build never reads it."""
        arg_of = iter(self.args)
        parts = _PARAM.split(self.template)  # literal, name, literal, ..., literal
        return tuple(
            Piece(next(arg_of), True) if i % 2 else Piece(part, False)
            for i, part in enumerate(parts)
            if part
        )

    @property
    def arg_text(self) -> str:
        """The argument list as the preamble and the description write it."""
        return ", ".join(self.arg_list)

    @property
    def row(self) -> str:
        """The method's row in the default build's preamble table: its name, what it
        hands `h.call` (`call_spec`), how many path arguments it takes, and its shape:
        1 when a body follows them, plus 2 when an `options` object comes last."""
        shape = (1 if self.has_body else 0) + (2 if self.has_options else 0)
        return f"[{js_string(self.name)}, {self.call_spec}, {len(self.args)}, {shape}]"

    @property
    def has_options(self) -> bool:
        """Does the method take an `options` object (its query and header parameters)?"""
        return self.structured and bool(self.query_names or self.header_names)

    @property
    def options_note(self) -> str:
        """The description's line naming what `options` may hold."""
        parts = []
        if self.query_names:
            parts.append("query " + ", ".join(self.query_names))
        if self.header_names:
            parts.append("headers " + ", ".join(self.header_names))
        return "; ".join(parts)

    @property
    def call_spec(self) -> str:
        """What the generated method hands `h.call`: the route pattern, not a path, the
        names of its query and header parameters and its body's media type, as a JS
        object literal whose every string is a JSON literal."""
        method = _QUOTED_METHODS.get(self.method) or js_string(self.method)
        parts = [f"method: {method}", f"route: {js_string(self.route)}"]
        if self.query_names:
            parts.append(f"query: {_js_array(self.query_names)}")
        if self.header_names:
            parts.append(f"headers: {_js_array(self.header_names)}")
        if self.has_body and self.body_type != "application/json":
            parts.append(f"type: {js_string(self.body_type)}")
        return "{" + ", ".join(parts) + "}"

    @property
    def client_method(self) -> str:
        return _CLIENT_CALL.get(self.method.lower(), "call")

    @property
    def verb_arg(self) -> str:
        """The verb `h.call` takes first, for verbs the client has no method of its own for."""
        return "" if self.method.lower() in _CLIENT_CALL else f'"{self.method}", '


#: The verbs a structured call names, as JSON strings (js_string's answer for each).
_QUOTED_METHODS = {m.upper(): f'"{m.upper()}"' for m in _CARRIED}


@lru_cache(maxsize=1024)
def _js_array(names: tuple[str, ...]) -> str:
    """`names` as a JS array of JSON string literals. Remembered: GitHub's operations
    send 113 distinct lists in 334 calls (`per_page, page` among the most), and quoting
    each name again was a third of writing the preamble's calls."""
    return "[" + ", ".join(map(js_string, names)) + "]"


class Skip(NamedTuple):
    """An operation left out of the outputs, with the reason a user can act on."""

    method: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}: {self.reason}"


class Generated(NamedTuple):
    """Everything the templates render, derived once from the document."""

    title: str
    version: str
    global_name: str
    operations: tuple[Operation, ...]
    allow: tuple[Route, ...]
    skipped: tuple[Skip, ...] = ()
    warnings: tuple[str, ...] = ()
    health_check: str = ""
    health_note: str = ""
    #: operationIds mapped to a JavaScript identifier by the fixed rule (naming.js_ident),
    #: one line each: the generator working as designed, so counted, not warned about.
    renamed: tuple[str, ...] = ()
    #: The allow.json entries: each route with the query and header parameters the
    #: document declares for it (reference mode: the bare routes).
    catalog: tuple[AllowEntry, ...] = ()
    #: Route -> (query, header) parameters declared for it, for `check --grants`.
    declared: tuple[tuple[Route, tuple[Parameter, ...], tuple[Parameter, ...]], ...] = ()


def one_line(text: str) -> str:
    """Fold whitespace and control characters so a summary can never add a line."""
    return fold_line(text)


class _Path:
    """A path template split into what the preamble, the route and the args need.

    A plain class, filled in by `_derive`: a dataclass would compile its methods from
    source at every import for a record no one compares or prints."""

    __slots__ = ("names", "problem", "route", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        self.route = ""
        self.names: list[str] = []
        self.problem = ""


def _derive(template: str, full: bool = False) -> _Path:
    """Turn a (prefixed) path template into a route; `problem` says why it cannot be one.

    `full` (the default build) keeps a trailing `/` and carries a segment with one
    parameter inside literal text (`{name}.json` -> `*.json`); the reference build
    skips both. A template whose parameters each fill a segment (nearly all) is split
    by one regex; `_split_segments` walks the others, segment by segment, and words
    what is wrong (tests/specgen/test_fast_paths_equivalence.py holds both to one answer).
    """
    out = _Path(template)
    if not template.startswith("/"):
        raise SpecError(f"specgen: path {go_quote(template)} must start with /")
    if has_control(template):
        raise SpecError(
            f"specgen: path {go_quote(template)} contains a control character or line terminator"
        )
    parts = _PARAM.split(template)  # literal, name, literal, name, ..., literal
    if _WHOLE_SEGMENT_PARAMS.fullmatch(template) is not None:
        out.names = parts[1::2]
        out.route = "*".join(parts[0::2])
    elif not _split_segments(template, full, out):
        return out
    err = pattern_error(out.route, trailing_slash=full, partial=full)
    if err is not None:
        out.problem = f"maps to route {go_quote(out.route)}, which a grant cannot hold: {err}"
    return out


def _split_segments(template: str, full: bool, out: _Path) -> bool:
    """`_derive`'s general case, segment by segment: sets `out.route` and `out.names`,
    or `out.problem` (then False) for a segment no route can hold."""
    segments: list[str] = []
    for seg in template.split("/")[1:]:
        if "{" in seg or "}" in seg:
            m = _PARAM.fullmatch(seg)
            part = _PARTIAL.fullmatch(seg) if full and m is None else None
            if part is not None and part.group(2):
                out.names.append(part.group(2))
                segments.append(f"{part.group(1)}*{part.group(3)}")
                continue
            if m is None and full:
                out.problem = (
                    f"has a segment the broker cannot split safely ({go_quote(seg)}): a "
                    "segment may hold one parameter, with literal text around it"
                )
                return False
            if m is None:
                out.problem = (
                    f"has a parameter that is only part of a segment ({go_quote(seg)}); "
                    "a grant's * stands for a whole segment"
                )
                return False
            if not m.group(1):
                out.problem = "has an empty {} parameter"
                return False
            out.names.append(m.group(1))
            segments.append("*")
        else:
            segments.append(seg)
    out.route = "/" + "/".join(segments)
    return True


def _auto_name(method: str, path: str) -> str:
    """The method name for an operation without operationId: verb, then path words.

    `GET /lights/{id}/state` becomes `get_lights_by_id_state`; `/` becomes `root`.
    """
    words = [method.lower()]
    for seg in path.split("/")[1:]:
        m = _PARAM.fullmatch(seg)
        words.append(f"by_{m.group(1)}" if m else seg)
    if len(words) == 1 or words[1:] == [""]:
        words = [words[0], "root"]
    return naming.js_ident("_".join(w for w in words if w))


class _Generator:
    def __init__(
        self, doc: dict[str, Any], name: str, global_name: str, prefix: str, full: bool = False
    ) -> None:
        self.full = full
        #: (path, method) -> its Route and the query and header parameters declared for
        #: it (default build only). Keyed by the pair, not the Route: a frozen
        #: dataclass's __hash__ is a Python call, and every operation looks its route up.
        self.declared: dict[
            tuple[str, str], tuple[Route, dict[str, Parameter], dict[str, Parameter]]
        ] = {}
        #: (path, method) -> the body media types its operations declare (default build).
        self.bodies: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (path, method) -> form field -> its allow-entry encoding (default build).
        self.encodings: dict[tuple[str, str], dict[str, str]] = {}
        self.doc = doc
        self.refs = Refs(doc, name)
        self.global_name = global_name or "host"
        self.prefix = prefix
        self.operations: list[Operation] = []
        self.allow: set[Route] = set()
        self.skipped: list[Skip] = []
        self.warnings: list[str] = []
        self.renamed: list[str] = []
        self.health: list[str] = []
        self.names: set[str] = set()
        self.name_counters: dict[str, int] = {}
        self.param_memo: ParameterMemo = {}
        #: (path parameter names, has_body) -> argument names.
        self.arg_memo: dict[tuple[tuple[str, ...], bool], tuple[str, ...]] = {}

    def params(
        self, path_item: dict[str, Any], op: dict[str, Any], method: str, path: str
    ) -> tuple[list[str], list[str]]:
        """(required, optional) labels of the non-path parameters, op overriding item."""
        merged: dict[tuple[str, str], tuple[str, bool]] = {}
        for owner in (path_item, op):
            raw = owner.get("parameters") or []
            if not isinstance(raw, list):
                raise SpecError(f"specgen: {method} {path}: parameters must be a list")
            for i, entry in enumerate(raw):
                param = self.refs.deref(entry, f"{method} {path} parameter {i}")
                if not isinstance(param, dict):
                    raise SpecError(f"specgen: {method} {path}: parameter {i} is not an object")
                pname = str(param.get("name") or "").strip()
                raw_in = param.get("in")
                loc = str(raw_in or "").strip().lower()
                if loc not in _LOCATIONS:
                    raise SpecError(
                        f"specgen: {method} {path} declares parameter {go_quote(pname)} with "
                        f"unsupported location {go_quote(str(raw_in or ''))} (want path/query/header/cookie)"
                    )
                merged[(loc, pname)] = (f"{loc} {go_quote(pname)}", param.get("required") is True)
        required = [label for (loc, _), (label, req) in merged.items() if loc != "path" and req]
        optional = [label for (loc, _), (label, req) in merged.items() if loc != "path" and not req]
        return required, optional

    def run(self) -> None:
        paths = self.doc.get("paths")
        if not isinstance(paths, dict) or not paths:
            raise SpecError("specgen: spec declares no paths")
        for raw_path in sorted(paths):
            if raw_path.startswith("x-"):
                continue  # a specification extension of the Paths object, not a path
            if not raw_path.startswith("/"):
                # checked before the server prefix is added: "/api" + "lights" would
                # otherwise pass as the route "/apilights"
                raise SpecError(f"specgen: path {go_quote(raw_path)} must start with /")
            path_item = paths[raw_path]
            if isinstance(path_item, dict) and "$ref" in path_item:
                path_item = self.refs.deref(path_item, f"path {go_quote(raw_path)}")
            if not isinstance(path_item, dict):
                raise SpecError(f"specgen: path {go_quote(raw_path)} is not an object")
            self.path(self.prefix + raw_path, path_item)
        if not self.operations and self.full:
            raise SpecError(
                f"specgen: spec declares paths but none a grant can carry ({len(self.skipped)} "
                "skipped, each listed above)",
                notes=tuple(
                    f"specgen: skipped {s.method} {s.path} ({s.reason})" for s in self.skipped
                ),
            )
        if not self.operations:
            raise SpecError(
                "specgen: spec declares paths but no supported operations (GET/PUT/POST/DELETE/PATCH)"
            )

    @cached_property
    def explicit(self) -> set[str]:
        """Names that explicit operationIds will take; a derived name never takes one, or
        a later operationId would be refused as a collision with a name we made up.

        Read the first time a name is derived or renamed, not up front: a document
        whose every operationId is a usable name (GitHub's 1,222) never needs it.
        """
        return self.explicit_names(self.doc["paths"])

    def explicit_names(self, paths: dict[str, Any]) -> set[str]:
        """The method names the document's own operationIds claim, wherever they appear."""
        names: set[str] = set()
        verbs = _CARRIED if self.full else _GRANTABLE
        for item in paths.values():
            try:
                path_item = self.refs.deref(item, "")
            except SpecError:
                continue  # reported, in order, by the main pass
            if not isinstance(path_item, dict):
                continue
            for verb in verbs.intersection(path_item):
                op = path_item[verb]
                op_id = op.get("operationId") if isinstance(op, dict) else None
                if isinstance(op_id, str) and op_id:
                    names.add(naming.noted_ident(op_id)[0] if self.full else naming.js_ident(op_id))
        return names

    def path(self, template: str, path_item: dict[str, Any]) -> None:
        if self.full:
            self.full_path(template, path_item)
            return
        derived = _derive(template)
        for verb in VERBS:
            op = path_item.get(verb)
            if op is None:
                continue
            method = verb.upper()
            if not isinstance(op, dict):
                raise SpecError(f"specgen: {method} {template} is not an object")
            required, optional = self.params(path_item, op, method, template)
            skip = derived.problem
            if not skip and required:
                skip = (
                    f"requires {', '.join(required)}, which a brokered call cannot send: a grant "
                    "authorizes a literal path, the broker rejects any query string, and guest "
                    "code sets no headers"
                )
            self.health_mark(op, method, template, derived, skip)
            if verb not in _GRANTABLE:
                self.skipped.append(Skip(method, template, SKIP_VERB))
                continue
            if skip:
                self.skipped.append(Skip(method, template, skip))
                continue
            if optional:
                self.warnings.append(
                    f"{method} {template}: optional {', '.join(optional)} cannot be sent through "
                    "the broker, so the generated method always calls the bare route"
                )
            self.operations.append(self.operation(op, verb, derived))
            self.allow.add(Route(path=derived.route, method=method))

    def full_path(self, template: str, path_item: dict[str, Any]) -> None:
        """The default build: parameters carried as data, HEAD/OPTIONS and `/a/` too."""
        template, fragment = template.partition("#")[::2]
        if fragment and not template.partition("#")[0]:
            template = "/"
        derived = _derive(template, full=True)
        for verb in VERBS:
            op = path_item.get(verb)
            if op is None:
                continue
            method = verb.upper()
            if not isinstance(op, dict):
                raise SpecError(f"specgen: {method} {template} is not an object")
            params = merged(path_item, op, self.refs, f"{method} {template}", self.param_memo)
            if fragment:
                params = self.fragment_params(params, fragment, method, template)
            if HEALTH_MARK in op:
                self.health_mark(op, method, template, derived, derived.problem)
            if verb not in _CARRIED:
                self.skipped.append(Skip(method, template, SKIP_TRACE))
                continue
            if derived.problem:
                self.skipped.append(Skip(method, template, derived.problem))
                continue
            query, headers, dropped = self.carried(params, method, template)
            operation = self.operation(
                op,
                verb,
                derived,
                params,
                dropped,
                carried=(tuple([p.name for p in query]), tuple([p.name for p in headers])),
            )
            self.operations.append(operation)
            key = (derived.route, method)
            found = self.declared.get(key)
            if found is None:
                route = make(Route, {"path": derived.route, "method": method})
                found = self.declared[key] = (route, {}, {})
                self.allow.add(route)
            _, have_q, have_h = found
            if verb in _FULL_WITH_BODY:
                have = self.bodies.get(key, ())
                new = operation.body_types
                self.bodies[key] = (*have, *(t for t in new if t not in have))
                if operation.form_encoding:
                    styles = self.encodings.setdefault(key, {})
                    for field_name, style in operation.form_encoding:
                        styles.setdefault(field_name, style)
            for p in query:
                have_q[p.name] = _union(have_q.get(p.name), p)
            for p in headers:
                low = p.name.lower()
                have_h[low] = _union(have_h.get(low), p)

    def fragment_params(
        self, params: Parameters, fragment: str, method: str, template: str
    ) -> Parameters:
        """A path's `#Name=Value` or `#key`: what it stands for, as a parameter.

        No HTTP client sends a fragment. Documents converted from AWS's models (APIs.guru)
        use it to tell operations on one URL apart: `/#X-Amz-Target=Svc.Op` is `POST /`
        with that header, `/tags/{arn}#tagKeys` is `/tags/{arn}` with the query key
        `tagKeys`. The route is the path before `#`; the header's value is declared as
        its only allowed value, so a grant can pin it and the checker knows it.
        """
        name, eq, value = fragment.partition("=")
        if eq:
            extra = Parameter(
                name,
                ParameterLocation.HEADER,
                True,
                SchemaSummary("string", (value,)),
                "simple",
                False,
            )
            params = params._replace(header=(*params.header, extra))
            what = f"header {go_quote(name)}: {go_quote(value)}"
        else:
            extra = Parameter(name, ParameterLocation.QUERY, True, SchemaSummary(), "form", True)
            params = params._replace(query=(*params.query, extra))
            what = f"query {go_quote(name)}"
        self.warnings.append(
            f"{method} {template}#{fragment}: no client sends a path's fragment; the route is "
            f"{template}, with {what}"
        )
        return params

    def carried(
        self, params: Parameters, method: str, template: str
    ) -> tuple[list[Parameter], list[Parameter], tuple[str, ...]]:
        """The query and header parameters a grant can name, and labels of the rest."""
        query: list[Parameter] = []
        headers: list[Parameter] = []
        dropped: list[str] = []
        for p in params.query:
            if not p.name or has_control(p.name):
                dropped.append(f"query {go_quote(p.name)} (not a name a grant can hold)")
            else:
                query.append(p)
        for p in params.header:
            if _FIELD_NAME.fullmatch(p.name) is None:
                dropped.append(f"header {go_quote(p.name)} (not an HTTP field name)")
            elif header_forbidden(p.name):
                dropped.append(f"header {go_quote(p.name)} (the broker sets it)")
            else:
                headers.append(p)
        dropped += [f"cookie {go_quote(p.name)} (a grant sends no cookies)" for p in params.cookie]
        if dropped:
            self.warnings.append(
                f"{method} {template}: {', '.join(dropped)} cannot be sent through the broker"
            )
        return query, headers, tuple(dropped)

    def health_mark(
        self, op: dict[str, Any], method: str, path: str, derived: _Path, skip: str
    ) -> None:
        mark = op.get(HEALTH_MARK)
        if mark is None or mark is False:
            return
        if mark is not True:
            raise SpecError(f"specgen: {method} {path}: {HEALTH_MARK} must be true or false")
        if method != "GET":
            raise SpecError(
                f"specgen: {method} {path} is marked {HEALTH_MARK}, but a health_check probe must be GET"
            )
        if derived.names:
            raise SpecError(
                f"specgen: GET {path} is marked {HEALTH_MARK}, but a health_check must be a "
                "concrete path (no path parameters)"
            )
        if skip:
            raise SpecError(f"specgen: GET {path} is marked {HEALTH_MARK}, but it {skip}")
        self.health.append(f"GET {path}")

    def operation(
        self,
        op: dict[str, Any],
        verb: str,
        derived: _Path,
        params: Parameters | None = None,
        dropped: tuple[str, ...] = (),
        carried: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
    ) -> Operation:
        """The method for `op`; `carried` (the default build's structured call) names the
        query and header parameters it sends."""
        method, path = verb.upper(), derived.template
        op_id = op.get("operationId")
        if op_id is not None and not isinstance(op_id, str):
            raise SpecError(f"specgen: {method} {path}: operationId must be a string")
        if op_id and self.full:
            name = self.full_name(op_id, method, path)
        elif self.full:
            name = self.auto_name(method, path)
            if len(name) > naming.MAX_NAME:
                name = naming.noted_ident(name)[0]
                while name in self.names or name in self.explicit:
                    name += "_"
            self.warnings.append(
                f"{method} {path} has no operationId, so its method is named {go_quote(name)} "
                "after its verb and path; give it an operationId for a name that survives path changes"
            )
        elif op_id:
            name = naming.js_ident(op_id)
            self.check_name(name, op_id)
        else:
            name = self.auto_name(method, path)
            self.warnings.append(
                f"{method} {path} has no operationId, so its method is named {go_quote(name)} "
                "after its verb and path; give it an operationId for a name that survives path changes"
            )
        self.names.add(name)
        has_body = verb in _WITH_BODY and "requestBody" in op
        body_types: tuple[str, ...] = ()
        lost: tuple[str, ...] = ()
        form_encoding: tuple[tuple[str, str], ...] = ()
        if has_body or (self.full and verb in _FULL_WITH_BODY and "requestBody" in op):
            request_body = self.refs.deref(op["requestBody"], f"{method} {path} requestBody")
            if self.full:
                body_types, lost = self.body_types(request_body, method, path)
                has_body = bool(body_types)
                if FORM_MEDIA in body_types:
                    form_encoding = form_encoding_of(request_body)
        args = self.arguments(derived, has_body)
        summary = op.get("summary")
        return make(
            Operation,
            {
                "method": method,
                "template": path,
                "route": derived.route,
                "name": name,
                "args": args,
                "has_body": has_body,
                "summary": one_line(summary) if isinstance(summary, str) else "",
                "params": params or Parameters(),
                "dropped": dropped,
                "body_types": body_types,
                "body_type": _preferred(body_types),
                "lost_bodies": lost,
                "form_encoding": form_encoding,
                "structured": carried is not None,
                "query_names": carried[0] if carried is not None else (),
                "header_names": carried[1] if carried is not None else (),
            },
        )

    def arguments(self, derived: _Path, has_body: bool) -> tuple[str, ...]:
        """The method's argument names, remembered per (path parameter names, has_body):
        the verbs of one path share them, and many paths share `owner, repo`."""
        key = (tuple(derived.names), has_body)
        args = self.arg_memo.get(key)
        if args is None:
            extra = ("options",) if self.full else ()
            args = self.arg_memo[key] = tuple(naming.arg_names(derived.names, has_body, extra))
        return args

    def body_types(
        self, request_body: Any, method: str, path: str
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The body media types a grant can carry for this operation, in its order, and
        the keys it cannot (as written).

        Each is the Content-Type the broker sends (`specgen.media.concrete`: parameters
        dropped, `*/*` as JSON, `text/*` as text/plain, another wildcard as
        octet-stream); a key that names no media type (`""`, `a b`) is named in a
        warning and not carried.
        """
        content = request_body.get("content") if isinstance(request_body, dict) else None
        if not isinstance(content, dict):
            return (), ()
        found: list[str] = []
        lost: list[str] = []
        for raw in content:
            media = media_types.concrete(str(raw))
            if media is None:
                lost.append(str(raw))
            elif media not in found:
                found.append(media)
        if lost:
            self.warnings.append(
                f"{method} {path}: request body {', '.join(go_quote(m) for m in lost)} cannot be "
                "sent through the broker (not a media type it can send as Content-Type)"
            )
        return tuple(found), tuple(lost)

    def auto_name(self, method: str, path: str) -> str:
        return naming.unique(
            _auto_name(method, path.removeprefix(self.prefix) or "/"),
            self.name_taken,
            self.name_counters,
        )

    def name_taken(self, name: str) -> bool:
        """Whether a derived method name would clash with a name already used or claimed."""
        return (
            name in self.names
            or name in self.explicit
            or name in naming.CLIENT_METHODS
            or name in naming.OBJECT_PROTOTYPE
            or (self.full and naming.unsafe_method_name(name) is not None)
        )

    def full_name(self, op_id: str, method: str, path: str) -> str:
        """The default build's name for an operationId: renamed, with a warning, if unsafe.

        An unsafe name (a client method, a prototype or reserved name, `then`) gets `_`
        appended until it is neither unsafe nor taken, so the rename is deterministic;
        a name that is not a plain identifier, or is too long, is mapped and bounded.
        """
        name, why = naming.noted_ident(op_id)
        if why:
            self.renamed.append(
                f"{method} {path}: operationId {go_quote(op_id)} {why}, so its method is named "
                f"{go_quote(name)}"
            )
        unsafe = naming.unsafe_method_name(name)
        if unsafe:
            renamed = name + "_"
            while (
                renamed in self.names
                or renamed in self.explicit
                or naming.unsafe_method_name(renamed) is not None
            ):
                renamed += "_"
            self.warnings.append(
                f"{method} {path}: method name {go_quote(name)} {unsafe}, so it is renamed "
                f"{go_quote(renamed)}"
            )
            return renamed
        if name in self.names:
            raise SpecError(
                f'specgen: operationId {go_quote(op_id)} collides with another method name "{name}"'
            )
        return name

    def check_name(self, name: str, op_id: str) -> None:
        quoted = go_quote(op_id)
        if name in naming.OBJECT_PROTOTYPE:
            raise SpecError(
                f'specgen: operationId {quoted} yields method name "{name}", a name every object '
                "inherits from Object.prototype; rename the operation"
            )
        if name in naming.CLIENT_METHODS:
            raise SpecError(
                f'specgen: operationId {quoted} yields method name "{name}", which is one of the '
                "injected client's own methods (call, del, get, patch, post, put); rename the operation"
            )
        if name in self.names:
            raise SpecError(
                f'specgen: operationId {quoted} collides with another method name "{name}"'
            )


def form_encoding_of(request_body: Any) -> tuple[tuple[str, str], ...]:
    """The allow-entry `encoding` of a request body's form media type: each field whose
    OpenAPI Encoding Object says `deepObject`, or `form` with `explode: false`, in the
    document's order. `form` exploded is the default and is not written; a style the
    broker does not build for a form (spaceDelimited, pipeDelimited) is left out, so
    such a field carries only what the default does. A field name the allow language
    refuses (empty, a bracket or a control character) is left out the same way."""
    content = request_body.get("content") if isinstance(request_body, dict) else None
    if not isinstance(content, dict):
        return ()
    encoding: Any = None
    for raw, media in content.items():
        if media_types.concrete(str(raw)) == FORM_MEDIA and isinstance(media, dict):
            encoding = media.get("encoding")
            break
    if not isinstance(encoding, dict):
        return ()
    out: list[tuple[str, str]] = []
    for name, spec in encoding.items():
        if not isinstance(spec, dict) or not isinstance(name, str):
            continue
        if not name or has_control(name) or "[" in name or "]" in name:
            continue
        style = spec.get("style", "form")
        explode = spec.get("explode", style == "form")
        if style == "deepObject":
            out.append((name, "deepObject"))
        elif style == "form" and explode is False:
            out.append((name, "form,explode=false"))
    return tuple(out)


def _preferred(types: tuple[str, ...]) -> str:
    """The media type a generated method sends: JSON when the document offers it."""
    if "application/json" in types:
        return "application/json"
    return types[0] if types else ""


def style_of(p: Parameter) -> str:
    """The allow-entry style for a declared parameter ("" = one value), see specgen.allow."""
    if p.location is _HEADER:
        return "simple" if p.schema.type == "array" else ""
    if p.schema.type == "object":
        return "deepObject" if p.deep_object else ""
    if p.schema.type != "array":
        return ""
    if p.style == "form":
        return "form" if p.explode else "form,explode=false"
    if p.style in ("spaceDelimited", "pipeDelimited") and not p.explode:
        return p.style
    return ""


def _permits() -> Callable[[Parameter], Permit]:
    """A parameter's Permit in an allow entry, made once per Parameter: `merged` reads
    a shared parameter once, so GitHub's routes hold a few hundred distinct ones
    (`per_page`, `page`) in about 3,000 places."""
    made: dict[int, tuple[Parameter, Permit]] = {}

    def permit(p: Parameter) -> Permit:
        hit = made.get(id(p))
        if hit is None or hit[0] is not p:
            hit = made[id(p)] = (
                p,
                make(Permit, {"name": p.name, "value": None, "style": style_of(p)}),
            )
        return hit[1]

    return permit


def _body_entry(method: str, types: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """An entry's `body`: None when the default (JSON on PUT/POST/PATCH) says it already."""
    if types is None:
        return None
    if method in ("PUT", "POST", "PATCH") and types == ("application/json",):
        return None
    if method not in ("PUT", "POST", "PATCH") and not types:
        return None
    return types


def _union(have: Parameter | None, new: Parameter) -> Parameter:
    """Two operations on one route declare a parameter: both sets of values are allowed."""
    if have is None:
        return new
    if have.schema.pattern != new.schema.pattern:  # a value either admits is allowed
        have = replace(have, schema=have.schema._replace(pattern=None))
    if have.schema.enum is not None and new.schema.enum is not None:
        values = tuple(dict.fromkeys((*have.schema.enum, *new.schema.enum)))
        return replace(have, schema=have.schema._replace(enum=values))
    return have


def _info_text(doc: dict[str, Any], key: str) -> str:
    info = doc.get("info")
    value = info.get(key) if isinstance(info, dict) else None
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError(f"specgen: info.{key} must be a string")
    value = value.strip()
    if has_control(value):
        raise SpecError(
            f"specgen: info.{key} {go_quote(value)} contains a control character or line terminator"
        )
    return value


def generate(
    doc: dict[str, Any],
    *,
    name: str,
    global_name: str = "host",
    prefix: str = "",
    strict: bool = False,
    compat: str = "",
    warnings: tuple[str, ...] = (),
) -> Generated:
    """Derive operations, routes, skips and warnings from a loaded, validated document.

    `compat="reference"` reproduces the Go reference's output; the default ("") carries
    query and header parameters as data, trailing slashes, HEAD and OPTIONS, and renames
    what the reference refused. `warnings` come first (the server choice, say).
    """
    if compat and compat not in COMPAT_MODES:
        raise SpecError(f"specgen: unknown --compat {go_quote(compat)} (want reference)")
    gen = _Generator(doc, name, global_name, prefix, full=not compat)
    gen.warnings.extend(warnings)
    gen.run()
    if strict and gen.skipped:
        first = gen.skipped[0]
        more = f" (and {len(gen.skipped) - 1} more)" if len(gen.skipped) > 1 else ""
        raise SpecError(
            f"specgen: --strict: cannot generate {first.method} {first.path}: {first.reason}{more}"
        )
    if len(gen.health) > 1:
        marked = ", ".join(sorted(gen.health))
        raise SpecError(
            f"specgen: {len(gen.health)} operations are marked {HEALTH_MARK} ({marked}); a run has a "
            "single health probe, so mark exactly one"
        )
    title = _info_text(doc, "title")
    version = _info_text(doc, "version")
    # Route's own order, (path, method), as a C-level key: the dataclass's __lt__ took
    # about 11,000 Python-level comparisons for GitHub's 1,222 routes.
    allow = tuple(sorted(gen.allow, key=attrgetter("path", "method")))
    # One loop makes each declared route's record and its allow entry (the default
    # build declares every route; the reference build none, and lists bare routes).
    declared_list = []
    entries = []
    permit = _permits()
    for route in allow:
        key = (route.path, route.method)
        found = gen.declared.get(key)
        if found is None:
            continue
        query, headers = tuple(found[1].values()), tuple(found[2].values())
        declared_list.append((route, query, headers))
        entry = {
            "route": route,
            "query": tuple([permit(p) for p in query]),
            "headers": tuple([permit(p) for p in headers]),
            "body": _body_entry(route.method, gen.bodies.get(key, ())),
            "response_headers": (),  # the operator's to list; a document never grants them
            "encoding": tuple(gen.encodings.get(key, {}).items()),
            "approve": False,  # the operator's to decide, in the grant
        }
        entries.append(make(AllowEntry, entry))
    declared = tuple(declared_list)
    catalog = tuple(entries) or tuple(AllowEntry(route) for route in allow)
    return Generated(
        title=title,
        version=version,
        global_name=gen.global_name,
        operations=tuple(gen.operations),
        allow=allow,
        catalog=catalog,
        declared=declared,
        skipped=tuple(gen.skipped),
        warnings=tuple(gen.warnings),
        renamed=tuple(gen.renamed),
        health_check=gen.health[0] if gen.health else "",
        health_note="" if gen.health else HEALTH_NOTE,
    )
