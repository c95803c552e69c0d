"""The allow-entry language: a route, and the query and header parameters it permits.

One module for the generator, `specgen check` and the runtime's grants loader, for the
same reason `specgen.routes` is one module: an entry must mean the same thing when it is
written, checked and enforced. Every rule fails closed: a parameter the entry does not
name may not be sent at all, and anything ambiguous is refused, not guessed.

Two spellings, one meaning:

* the string form, for the common case (a route and query parameters)::

      "GET /repos/*/*/issues"                         no parameters at all
      "GET /repos/*/*/issues?state=open&per_page&page"

  After the first `?` come `&`-separated items, each `name` (the guest may send any
  value) or `name=value` (the parameter is pinned: it is always sent, with exactly this
  value, and the guest may not send another). Names and values are percent-decoded
  (`%20` is a space, `%26` an `&`); `+` is a literal plus. No whitespace, no empty item.

* the object form, which adds header parameters::

      {"route": "GET /repos/*/*/issues",
       "query": ["per_page", "page", "state=open"],
       "headers": ["X-Request-Id", "X-GitHub-Api-Version=2022-11-28"]}

  `route` is a bare route (no `?`); `query` and `headers` are lists of `name` or
  `name=value` items, taken literally (no percent-decoding). Both lists are optional.
  Two more optional keys exist only in this form:

  `"style": {"ids": "form", "filter": "deepObject"}` lets a listed parameter carry an
  array (or, for `deepObject`, an object of scalars), serialised the OpenAPI way:
  `form` (`ids=1&ids=2`), `form,explode=false` (`ids=1,2`), `spaceDelimited`
  (`ids=1%202`), `pipeDelimited` (`ids=1|2`), `deepObject` (`filter[a]=1`); a header
  may be `simple` (`1,2`). A parameter without a style carries one value only, and a
  pinned one never has a style.

  `"body": ["application/json", "multipart/form-data"]` names the media types a body
  may have (`[]`: no body), each a concrete lower-case `type/subtype` without
  parameters (`text/xml`, `application/octet-stream`, `image/png`): the broker sends it
  as the body's Content-Type. Without it an entry permits a JSON body on PUT, POST and
  PATCH and none on any other verb, which is what the string form always means.

  `"encoding": {"metadata": "deepObject", "expand": "deepObject"}` says how a form body
  (`application/x-www-form-urlencoded`, which the entry's `body` must permit) serialises
  a field whose value is an object or an array, as the document's OpenAPI `encoding`
  object does: `deepObject` nests with brackets, Stripe's way (`metadata[plan]=pro`,
  `expand[]=a&expand[]=b`, `items[0][price]=p`), `form,explode=false` joins with commas
  (`ids=1,2`, `color=R,1,G,2`), `form` (the default) repeats the name for each array
  item (`ids=1&ids=2`) and takes no object. See `FORM_STYLES`.

  `"response_headers": ["Link", "ETag", "X-RateLimit-*"]` names the upstream response
  headers agent code may read on this route, besides `Content-Type` and the profile's
  own list (names case-insensitive; a trailing `*` matches a prefix). Never one of
  `FORBIDDEN_RESPONSE_HEADERS`: the broker withholds those whatever a grant says.

`specgen check` compares each listed name with the document (`declaration_problems`);
HTTP's conditional headers (`CONDITIONAL_HEADERS`: `If-None-Match`, `If-Modified-Since`,
`If-Match`, `If-Unmodified-Since`) are HTTP's own and need no declaration.

Rules for both: a name is never empty; no name or pinned value holds a control
character (CR, LF and NUL included); a query name appears once; a header name is an
HTTP token, appears once compared case-insensitively, and is never one the broker owns
(`Authorization`, `Cookie`, `Host`, `Content-Length`, `Transfer-Encoding`, `Connection`,
`Proxy-*`, `Content-*`, the request-rewrite headers such as `X-HTTP-Method-Override`,
... see `FORBIDDEN_HEADERS`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from specgen.media import is_concrete
from specgen.params import Parameter, SchemaSummary
from specgen.quoting import go_quote
from specgen.routes import Route, RouteError, has_control, parse_route_line

#: Request headers the broker sets itself or that steer the connection or the proxy;
#: a grant may never let the guest choose them. Lower-case.
FORBIDDEN_HEADERS: frozenset[str] = frozenset(
    {
        "accept",
        "accept-encoding",
        "authorization",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "cookie",
        "expect",
        "forwarded",
        "host",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "via",
        # Request-rewrite headers: frameworks and proxies read them as the real method
        # or path, so one granted would turn a permitted POST into a DELETE, or a
        # permitted path into another, behind the broker's back.
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
        "x-original-url",
        "x-rewrite-url",
    }
)
#: Prefixes of the same kind: every `Proxy-*`, `X-Forwarded-*` and `Content-*` header
#: (the body's framing is the broker's: it encodes the body the entry permits).
FORBIDDEN_HEADER_PREFIXES: tuple[str, ...] = ("proxy-", "x-forwarded-", "content-")

# RFC 9110 5.6.2 token characters: what a field name may be made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_OBJECT_KEYS = frozenset(
    {"route", "query", "headers", "style", "body", "encoding", "response_headers", "approve"}
)
#: Response headers no grant may let agent code read: they carry or ask for credentials
#: and sessions. Lower-case; the broker drops them whatever a grant lists.
FORBIDDEN_RESPONSE_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "cookie",
        "proxy-authenticate",
        "proxy-authorization",
        "set-cookie",
        "set-cookie2",
        "www-authenticate",
    }
)
#: Request headers a profile's `headers` may set although agent code may not: the broker
#: sends a default for each, which the operator's value replaces.
PROFILE_SETTABLE_HEADERS: frozenset[str] = frozenset({"accept", "user-agent"})
#: HTTP's conditional request headers (RFC 9110 section 13.1), lower-case, and the
#: methods each may be listed on: they belong to HTTP itself, so an entry may list one
#: that the document does not declare. `If-None-Match` on a read gets a 304 for an
#: unchanged ETag, on a write (`*`) refuses to overwrite; `If-Modified-Since` applies
#: only to GET and HEAD (13.1.3); `If-Match` and `If-Unmodified-Since` guard writes
#: against a lost update. No other undeclared header is ever accepted.
CONDITIONAL_HEADERS: dict[str, frozenset[str]] = {
    "if-none-match": frozenset({"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"}),
    "if-modified-since": frozenset({"GET", "HEAD"}),
    "if-match": frozenset({"PUT", "POST", "PATCH", "DELETE"}),
    "if-unmodified-since": frozenset({"PUT", "POST", "PATCH", "DELETE"}),
}
#: Longest profile header value (bytes), as for a guest's header value.
MAX_PROFILE_HEADER_VALUE = 4096
#: The serialisations the broker implements, per location (OpenAPI 3 style values).
QUERY_STYLES: tuple[str, ...] = (
    "form",
    "form,explode=false",
    "spaceDelimited",
    "pipeDelimited",
    "deepObject",
)
HEADER_STYLES: tuple[str, ...] = ("simple",)
#: How a form body's field may serialise an object or array (OpenAPI 3 `encoding`
#: `style` and `explode` for application/x-www-form-urlencoded), as the broker builds it.
FORM_STYLES: tuple[str, ...] = ("form", "form,explode=false", "deepObject")
#: The media type an entry's `encoding` applies to.
FORM_MEDIA = "application/x-www-form-urlencoded"
#: The body media types the broker builds from a JSON object (form, multipart) or a
#: string (text/plain); JSON is forwarded byte for byte. Any other concrete media type
#: (specgen.media) travels as the text or bytes the guest gives.
BODY_TYPES: tuple[str, ...] = (
    "application/json",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
)
#: Verbs that carry a JSON body when an entry does not say otherwise.
_BODY_VERBS = frozenset({"PUT", "POST", "PATCH"})
#: Verbs that never carry a body, whatever an entry says: a GET or HEAD body has no
#: meaning a server agrees on, so it is a smuggling channel, not a feature.
NO_BODY_VERBS = frozenset({"GET", "HEAD", "OPTIONS"})


class AllowError(ValueError):
    """An allow entry the language does not admit; str() is the one-line reason."""


@dataclass(frozen=True)
class Permit:
    """One permitted parameter; `value` is the pinned value, None when the guest picks."""

    name: str
    value: str | None = None
    #: How an array or object value is serialised (see QUERY_STYLES); "" = one value.
    style: str = ""

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


@dataclass(frozen=True)
class AllowEntry:
    """A parsed allow entry: the route, and the parameters it lets through."""

    route: Route
    query: tuple[Permit, ...] = ()
    headers: tuple[Permit, ...] = field(default=())
    #: Media types a body may have; None means the default (JSON on PUT/POST/PATCH).
    body: tuple[str, ...] | None = None
    #: Response header names (lower-case; a trailing `*` is a prefix) agent code may
    #: read on this route, in addition to the profile's and Content-Type.
    response_headers: tuple[str, ...] = ()
    #: (form field, FORM_STYLES value) for the fields of a form body that serialise an
    #: object or array other than by the default `form`, in the document's order.
    encoding: tuple[tuple[str, str], ...] = ()
    #: A call under this entry is sent only after a person approves it (the broker asks).
    approve: bool = False

    def form_style(self, name: str) -> str:
        """How the form field `name` serialises an object or array ("form" by default)."""
        for field_name, style in self.encoding:
            if field_name == name:
                return style
        return "form"

    def header_names(self) -> frozenset[str]:
        """Header names, lower-cased: the form they are compared in."""
        return frozenset(p.name.lower() for p in self.headers)

    def body_types(self) -> tuple[str, ...]:
        """The media types a body of a call under this entry may have (() = none)."""
        if self.route.method.upper() in NO_BODY_VERBS:
            return ()
        if self.body is not None:
            return self.body
        return ("application/json",) if self.route.method.upper() in _BODY_VERBS else ()


def header_forbidden(name: str, reserved: Iterable[str] = ()) -> bool:
    """Is `name` a header the guest may never set (`reserved`: ones the token block sets)?"""
    low = name.lower()
    return (
        low in FORBIDDEN_HEADERS
        or low.startswith(FORBIDDEN_HEADER_PREFIXES)
        or low in {r.lower() for r in reserved}
    )


def _no_control(text: str, what: str, entry: str) -> None:
    if has_control(text):
        raise AllowError(
            f"allow entry {entry}: {what} {go_quote(text)} contains a control character"
        )


def _split_item(item: str) -> tuple[str, str | None]:
    name, eq, value = item.partition("=")
    return name, (value if eq else None)


def _decode(text: str, entry: str) -> str:
    if _PERCENT.search(text):
        raise AllowError(f"allow entry {entry}: {go_quote(text)} has a % that is not %XX")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise AllowError(
            f"allow entry {entry}: {go_quote(text)} decodes to invalid UTF-8"
        ) from None


def _permits(
    items: list[tuple[str, str | None]], *, header: bool, entry: str, reserved: Iterable[str]
) -> tuple[Permit, ...]:
    kind = "header" if header else "query parameter"
    seen: set[str] = set()
    out: list[Permit] = []
    for name, value in items:
        _no_control(name, f"{kind} name", entry)
        if value is not None:
            _no_control(value, f"{kind} {go_quote(name)} value", entry)
        if not name:
            raise AllowError(f"allow entry {entry}: a {kind} name is empty")
        if header:
            if not _TOKEN.match(name):
                raise AllowError(
                    f"allow entry {entry}: header name {go_quote(name)} is not an HTTP field name"
                )
            if header_forbidden(name, reserved):
                raise AllowError(
                    f"allow entry {entry}: header {go_quote(name)} is set by the broker, "
                    "never by agent code"
                )
        key = name.lower() if header else name
        if key in seen:
            raise AllowError(f"allow entry {entry}: {kind} {go_quote(name)} is listed twice")
        seen.add(key)
        out.append(Permit(name, value))
    return tuple(out)


def _route(text: str, entry: str) -> Route:
    try:
        return parse_route_line(text)
    except RouteError as exc:
        raise AllowError(str(exc)) from None


def parse_string(line: str, reserved: Iterable[str] = ()) -> AllowEntry:
    """Parse the string form `"METHOD /path[?name&name=value...]"`."""
    entry = go_quote(line)
    head, question, query = line.partition("?")
    route = _route(head if question else line, "allow entry")
    items: list[tuple[str, str | None]] = []
    if question:
        query = query.rstrip(" \t")
        if not query:
            raise AllowError(f"allow entry {entry}: nothing after ?")
        if any(ch.isspace() for ch in query):
            raise AllowError(f"allow entry {entry}: the query part holds whitespace")
        for raw in query.split("&"):
            if not raw:
                raise AllowError(f"allow entry {entry}: an empty item between & separators")
            name, value = _split_item(raw)
            items.append((_decode(name, entry), None if value is None else _decode(value, entry)))
    return AllowEntry(route, _permits(items, header=False, entry=entry, reserved=reserved))


def _list(value: Any, key: str, entry: str) -> list[tuple[str, str | None]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise AllowError(f"allow entry {entry}: {key} must be a list of strings")
    return [_split_item(x) for x in value]


def parse_object(obj: dict[str, Any], reserved: Iterable[str] = ()) -> AllowEntry:
    """Parse the object form `{"route": ..., "query": [...], "headers": [...]}`."""
    route_text = obj.get("route")
    entry = go_quote(route_text) if isinstance(route_text, str) else "object"
    unknown = sorted(set(obj) - _OBJECT_KEYS)
    if unknown:
        raise AllowError(
            f"allow entry {entry}: unknown key {go_quote(unknown[0])} "
            "(want route, query, headers, style, body, encoding, response_headers, approve)"
        )
    if not isinstance(route_text, str):
        raise AllowError('allow entry object: "route" must be a "METHOD /path" string')
    if "?" in route_text:
        raise AllowError(
            f'allow entry {entry}: in the object form, query parameters go in "query", not after ?'
        )
    route = _route(route_text, "allow entry")
    query = _permits(
        _list(obj.get("query"), "query", entry), header=False, entry=entry, reserved=()
    )
    headers = _permits(
        _list(obj.get("headers"), "headers", entry), header=True, entry=entry, reserved=reserved
    )
    query, headers = _styled(obj.get("style"), query, headers, entry)
    try:
        readable = response_header_patterns(obj.get("response_headers"))
    except AllowError as exc:
        raise AllowError(f"allow entry {entry}: {exc}") from None
    body = _body(obj.get("body"), route, entry)
    made = AllowEntry(route, query, headers, body, readable)
    encoding = _encoding(obj.get("encoding"), made, entry)
    approve = obj.get("approve")
    if approve is not None and not isinstance(approve, bool):
        raise AllowError(f'allow entry {entry}: "approve" must be true or false')
    return AllowEntry(route, query, headers, body, readable, encoding, approve is True)


def _encoding(raw: Any, made: AllowEntry, entry: str) -> tuple[tuple[str, str], ...]:
    """The entry's `encoding`: form field names and how each serialises (FORM_STYLES)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise AllowError(f"allow entry {entry}: encoding must be an object of strings")
    if raw and FORM_MEDIA not in made.body_types():
        raise AllowError(
            f"allow entry {entry}: encoding describes a form body ({FORM_MEDIA}), which the "
            "entry's body does not permit"
        )
    for name, style in raw.items():
        if not name or has_control(name) or "[" in name or "]" in name:
            raise AllowError(
                f"allow entry {entry}: encoding names {go_quote(name)}, which is empty or "
                "holds a control character or a bracket"
            )
        if style not in FORM_STYLES:
            raise AllowError(
                f"allow entry {entry}: encoding {go_quote(style)} of {go_quote(name)} is not "
                f"one of {', '.join(FORM_STYLES)}"
            )
    return tuple(raw.items())


def response_header_patterns(raw: Any) -> tuple[str, ...]:
    """A `response_headers` list (an allow entry's or a profile's), lower-cased.

    Each item is an HTTP field name, or a prefix of one followed by `*`; never a bare
    `*` (which would hand agent code every header the upstream chose to send) and never
    a name in FORBIDDEN_RESPONSE_HEADERS.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise AllowError("response_headers must be a list of header names")
    out: list[str] = []
    for item in raw:
        name = item[:-1] if item.endswith("*") else item
        if not name:
            raise AllowError(
                'response_headers item "*" names every header; list the names, or a prefix '
                'such as "X-RateLimit-*"'
            )
        if not _TOKEN.match(name):
            raise AllowError(
                f"response_headers item {go_quote(item)} is not an HTTP field name "
                "(or a prefix of one followed by *)"
            )
        low = item.lower()
        if low in FORBIDDEN_RESPONSE_HEADERS:
            raise AllowError(
                f"response_headers item {go_quote(item)} is never forwarded to agent code "
                "(it carries credentials or a session)"
            )
        if low in out:
            raise AllowError(f"response_headers item {go_quote(item)} is listed twice")
        out.append(low)
    return tuple(out)


def response_header_readable(name: str, patterns: Iterable[str]) -> bool:
    """May agent code read response header `name` (lower-case) under `patterns`?"""
    if name in FORBIDDEN_RESPONSE_HEADERS:
        return False
    if name == "content-type":
        return True
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def profile_header_error(name: object, value: object, reserved: Iterable[str] = ()) -> str | None:
    """Why a profile's `headers` cannot send `name: value` on every call, or None.

    The same reserved list as a guest's headers (`header_forbidden`), with two exceptions the operator may set and the guest never may:
    `Accept` and `User-Agent` (PROFILE_SETTABLE_HEADERS), which replace the broker's
    defaults. `reserved` adds the token block's header.
    """
    if not isinstance(name, str) or not _TOKEN.match(name):
        shown = go_quote(name) if isinstance(name, str) else repr(name)
        return f"headers name {shown} is not an HTTP field name"
    low = name.lower()
    settable = low in PROFILE_SETTABLE_HEADERS and low not in {r.lower() for r in reserved}
    if not settable and header_forbidden(name, reserved):
        return (
            f"headers {go_quote(name)} is set by the broker or the credential, or frames "
            "the request; a profile cannot set it"
        )
    if not isinstance(value, str):
        return f"headers {go_quote(name)} must be a string"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PROFILE_HEADER_VALUE:
        return f"headers {go_quote(name)} value is longer than {MAX_PROFILE_HEADER_VALUE} bytes"
    if not value or value != value.strip(" \t"):
        return f"headers {go_quote(name)} value is empty or has surrounding whitespace"
    if not all(ch == "\t" or 0x20 <= ord(ch) <= 0x7E for ch in value):
        return (
            f"headers {go_quote(name)} value {go_quote(value)} must be printable ASCII "
            "(no CR, LF, NUL or other control character)"
        )
    return None


def _styled(
    raw: Any, query: tuple[Permit, ...], headers: tuple[Permit, ...], entry: str
) -> tuple[tuple[Permit, ...], tuple[Permit, ...]]:
    """Attach `"style"` to the listed parameters it names; refuse any it cannot."""
    if raw is None:
        return query, headers
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise AllowError(f"allow entry {entry}: style must be an object of strings")
    by_query = {p.name: p for p in query}
    by_header = {p.name.lower(): p for p in headers}
    for name, style in raw.items():
        permit = by_query.get(name)
        allowed = QUERY_STYLES
        if permit is None:
            permit, allowed = by_header.get(name.lower()), HEADER_STYLES
        if permit is None:
            raise AllowError(
                f"allow entry {entry}: style names {go_quote(name)}, which the entry does not list"
            )
        if style not in allowed:
            raise AllowError(
                f"allow entry {entry}: style {go_quote(style)} of {go_quote(name)} is not one "
                f"of {', '.join(allowed)}"
            )
        if permit.value is not None:
            raise AllowError(
                f"allow entry {entry}: {go_quote(name)} is pinned to one value, so it has no style"
            )
    styles = dict(raw)
    header_styles = {k.lower(): v for k, v in raw.items()}
    return (
        tuple(Permit(p.name, p.value, styles.get(p.name, "")) for p in query),
        tuple(Permit(p.name, p.value, header_styles.get(p.name.lower(), "")) for p in headers),
    )


def _body(raw: Any, route: Route, entry: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise AllowError(f"allow entry {entry}: body must be a list of media types")
    for media in raw:
        if not is_concrete(media):
            raise AllowError(
                f"allow entry {entry}: body media type {go_quote(media)} is not a lower-case "
                "type/subtype without parameters or wildcards (application/json, text/xml, ...)"
            )
    if len(set(raw)) != len(raw):
        raise AllowError(f"allow entry {entry}: body lists a media type twice")
    if raw and route.method.upper() in NO_BODY_VERBS:
        raise AllowError(f"allow entry {entry}: a {route.method.upper()} request has no body")
    return tuple(raw)


def parse_entry(raw: Any, reserved: Iterable[str] = ()) -> AllowEntry:
    """Either form; `reserved` adds header names the grant's token block sets."""
    if isinstance(raw, str):
        return parse_string(raw, reserved)
    if isinstance(raw, dict):
        return parse_object(raw, reserved)
    raise AllowError('an allow entry must be a "METHOD /path" string or an object with "route"')


def entry_json(entry: AllowEntry) -> str | dict[str, Any]:
    """The entry as allow.json writes it: a string unless it names headers.

    Values are written so that `parse_entry` reads back the same entry.
    """
    styled = [p for p in (*entry.query, *entry.headers) if p.style]
    if (
        entry.headers
        or styled
        or entry.body is not None
        or entry.response_headers
        or entry.encoding
        or entry.approve
    ):
        out: dict[str, Any] = {"route": str(entry.route)}
        if entry.query:
            out["query"] = [str(p) for p in entry.query]
        if entry.headers:
            out["headers"] = [str(p) for p in entry.headers]
        if styled:
            out["style"] = {p.name: p.style for p in styled}
        if entry.body is not None:
            out["body"] = list(entry.body)
        if entry.encoding:
            out["encoding"] = dict(entry.encoding)
        if entry.response_headers:
            out["response_headers"] = list(entry.response_headers)
        if entry.approve:
            out["approve"] = True
        return out
    if not entry.query:
        return str(entry.route)
    items = [
        _encode(p.name) + ("" if p.value is None else "=" + _encode(p.value)) for p in entry.query
    ]
    return f"{entry.route}?{'&'.join(items)}"


@lru_cache(maxsize=1024)  # GitHub's catalog writes 140 distinct names 1,043 times
def _encode(text: str) -> str:
    """Percent-encode what the string form would otherwise read differently: every
    character but printable ASCII other than space and `%&=?#`, as its UTF-8 bytes.

    One regex pass finds those characters (allow.json writes about 1,000 names for
    GitHub's document, nearly all plain); tests/specgen/test_fast_paths_equivalence.py
    compares it with the per-character rule over arbitrary text.
    """
    return _TO_ENCODE.sub(_percent, text)


#: The characters `_encode` writes as %XX: all but printable ASCII, plus space and `%&=?#`.
_TO_ENCODE = re.compile("[^!-~]|[%&=?#]")


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in match.group().encode())


def pin_error(value: str, schema: SchemaSummary) -> str | None:
    """Why a pinned value cannot be what the parameter's schema declares, or None.

    Checks what can be checked from the serialised text: an enum, integer, number,
    boolean and a string's `pattern` (searched, as JSON Schema does, by RE2; a pattern RE2
    cannot run is not evaluated). Arrays, objects and untyped schemas are accepted as
    written.
    """
    if schema.enum is not None and schema.type != "array" and value not in schema.enum:
        return f"is not one of the declared values ({', '.join(go_quote(v) for v in schema.enum)})"
    if schema.type == "integer" and not re.fullmatch(r"-?[0-9]+", value):
        return "is not an integer"
    if schema.type == "number":
        try:
            number = float(value)
        except ValueError:
            return "is not a number"
        if not math.isfinite(number) or not re.fullmatch(r"-?[0-9.eE+\-]+", value):
            return "is not a number"
    if schema.type == "boolean" and value not in ("true", "false"):
        return "is not true or false"
    if schema.pattern is not None and not _matches(schema.pattern, value):
        return f"does not match the declared pattern {go_quote(schema.pattern)}"
    return None


def _matches(pattern: str, value: str) -> bool:
    """Does `value` match `pattern` somewhere (JSON Schema's rule)? True when RE2 cannot
    run the pattern: a document's regex is never run by a backtracking engine, and what
    cannot be checked is not held against the grant."""
    from specgen.regex import Unsupported, search

    try:
        return search(pattern, value)
    except Unsupported:
        return True


def declaration_problems(
    entry: AllowEntry, query: Iterable[Parameter], headers: Iterable[Parameter]
) -> list[str]:
    """What `entry` names that the document does not declare for its route, or pins wrong.

    `query` and `headers` are the parameters the document declares for the route the
    entry is an instance of. Query names compare exactly, header names case-insensitively.
    HTTP's conditional headers (`CONDITIONAL_HEADERS`) need no declaration on the methods
    HTTP defines them for.
    """
    problems: list[str] = []
    q = {p.name: p for p in query}
    h = {p.name.lower(): p for p in headers}
    for permit, declared, kind in (
        *((pm, q.get(pm.name), "query parameter") for pm in entry.query),
        *((pm, h.get(pm.name.lower()), "header") for pm in entry.headers),
    ):
        if declared is None:
            methods = CONDITIONAL_HEADERS.get(permit.name.lower()) if kind == "header" else None
            method = entry.route.method.upper()
            if methods is not None and method in methods:
                continue  # HTTP's own: the document need not declare it
            problems.append(
                f'allow entry "{entry.route}" names {kind} {go_quote(permit.name)}, which the '
                "document does not declare for that route"
                + (
                    f" (HTTP's conditional header {go_quote(permit.name)} may be listed "
                    f"undeclared only on {', '.join(sorted(methods))})"
                    if methods is not None
                    else ""
                )
            )
        elif permit.value is not None:
            why = pin_error(permit.value, declared.schema)
            if why:
                problems.append(
                    f'allow entry "{entry.route}" pins {kind} {go_quote(permit.name)} to '
                    f"{go_quote(permit.value)}, which {why}"
                )
    return problems
