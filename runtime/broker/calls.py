"""Turning a guest's structured call into wire pieces the broker has checked.

Why the broker, not the client, builds the URL: a path the guest concatenated can only
be compared byte for byte (so `a b`, `é` or `user@example.com` could never be sent),
and a query or header the guest wrote could carry anything. Here each piece is taken
apart and rebuilt from what the allow entry permits:

* each path value becomes exactly one segment, percent-encoded down to RFC 3986's
  unreserved characters (so any Unicode, a space, `@` or `%` travels, and `&`, `=`, `#`,
  `?`, `;` cannot mean anything but themselves); a value that is empty, `.` or `..`, or
  holds `/`, `\\` or a control character is refused outright: some servers decode `%2F`
  or treat `\\` as `/` before routing, and the broker cannot know which;
* a query parameter is sent only if the entry lists it, in the entry's order, with the
  entry's serialisation (`style`): one value unless a style says array or object, so an
  array can never smuggle a second copy of a scalar (HTTP parameter pollution);
* a pinned parameter (`state=open`) is always sent with its pin: the guest may omit it
  (the broker adds it, so the grant confines the call either way) or repeat the pin
  exactly; any other value is refused;
* a header travels only if the entry lists it, never one the broker or a credential
  sets, its value visible ASCII with inner spaces only;
* a body only where the entry (and so the document) gives one, as the media type the
  entry permits; the broker sets `Content-Type` to that type, and httpx's own encoders
  build form and multipart bodies (the multipart boundary is random, never the guest's).
  A form field whose value is an object or an array is serialised as the entry's
  `encoding` says (the document's OpenAPI `encoding`): `deepObject` in Stripe's brackets
  (`metadata[plan]=pro`, `expand[]=a`, `items[0][price]=p`), `form,explode=false` joined
  by commas, and by default (`form`) an array repeats the name and an object is refused;
  nesting is bounded (`MAX_FORM_DEPTH`, `MAX_FORM_FIELDS`) and the order is the guest's.
  A JSON body (`application/json`, `text/json`, `+json`) is forwarded byte for byte; a
  text or binary one (any other type: XML, YAML, CSV, octet-stream, images) is the bytes
  the guest handed beside the envelope, or a JSON string (sent as UTF-8) or
  `{"base64": "..."}` (sent decoded) inside it, never a JSON body re-read as bytes.

Every refusal is a `CallRefused` with a reason for tests and logs; the guest sees the
fixed 403 text. Parameter values never leave this module except on the wire.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from urllib.parse import quote

from runtime.contract import ObjectValue, ParamValue
from specgen import media as media_types
from specgen.allow import AllowEntry, Permit, header_forbidden
from specgen.route_index import RouteIndex
from specgen.routes import Route, has_control, partial_segment, pattern_error

#: Longest request target (path and query, bytes on the wire) the broker sends.
MAX_TARGET_BYTES = 8192
#: Longest header value (bytes) a guest may send.
MAX_HEADER_VALUE = 4096
#: Most parameters (query and header, array items included) in one call.
MAX_PARAMS = 256
#: Deepest nesting of a deepObject form field (`a[b][c]` is depth 2); Stripe's deepest
#: documented parameters nest four levels.
MAX_FORM_DEPTH = 8
#: Most fields one form body expands to.
MAX_FORM_FIELDS = 1024

JSON = media_types.JSON
FORM = media_types.FORM
MULTIPART = media_types.MULTIPART
TEXT = media_types.TEXT

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class CallRefused(ValueError):
    """A structured call the broker will not send; str() says why (never a value).

    `rule` is the id in runtime.refusals.RULES the guest's text and the trace take;
    `name` the parameter, header or media type that rule names (never a value).
    """

    def __init__(self, reason: str, rule: str = "call_malformed", name: str = "") -> None:
        super().__init__(reason)
        self.rule = rule
        self.name = name
        #: The allow entry the call matched before it was refused (Policy sets it).
        self.route: Route | None = None


_ALL_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def _encode(text: str) -> str:
    """Percent-encode everything but the unreserved set (upper-case hex, UTF-8); text of
    unreserved characters only, most path values, is already its own encoding."""
    if _ALL_UNRESERVED.fullmatch(text):
        return text
    return quote(text, safe="", encoding="utf-8", errors="strict")


# -- path ------------------------------------------------------------------------------


def path_value_error(value: str) -> str | None:
    """Why `value` cannot stand for one path segment, or None."""
    if value in ("", ".", ".."):
        return "a path value may not be empty, . or .."
    if "/" in value or "\\" in value:
        return "a path value may not hold / or \\ (some servers decode %2F before routing)"
    if has_control(value):
        return "a path value may not hold a control character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "a path value must be valid Unicode"
    return None


def build_path(route: str, values: tuple[str, ...]) -> tuple[str, tuple[bool, ...]]:
    """The wire path for a route pattern and its values, and which segments hold one.

    The pattern follows the grant rules (`*` a whole segment, or one `*` inside
    literal text); each `*` takes the next value, encoded as part of one segment.
    """
    reason = pattern_error(route, trailing_slash=True, partial=True)
    if reason is not None:
        raise CallRefused(f"route pattern: {reason}")
    if route.count("*") != len(values):
        raise CallRefused("the route pattern and the path values do not pair up")
    wire: list[str] = []
    from_value: list[bool] = []
    given = iter(values)
    for seg in route.split("/")[1:]:
        if "*" not in seg:
            wire.append(seg)
            from_value.append(False)
            continue
        value = next(given)
        why = path_value_error(value)
        if why is not None:
            raise CallRefused(why)
        prefix, suffix = ("", "") if seg == "*" else (partial_segment(seg) or ("", ""))
        wire.append(prefix + _encode(value) + suffix)
        from_value.append(True)
    return "/" + "/".join(wire), tuple(from_value)


def _segment_admits(want: str, got: str, is_value: bool) -> bool:
    """Does allow-entry segment `want` admit wire segment `got`?"""
    if want == "*":
        return bool(got) and (is_value or all(ch in _UNRESERVED for ch in got))
    parts = partial_segment(want)
    if parts is None:
        return want == got
    prefix, suffix = parts
    if len(got) <= len(prefix) + len(suffix) or not got.startswith(prefix):
        return False
    if not got.endswith(suffix):
        return False
    middle = got[len(prefix) : len(got) - len(suffix)]
    allowed = _UNRESERVED | {"%"} if is_value else _UNRESERVED
    return all(ch in allowed for ch in middle)


def match_wire(
    index: RouteIndex, method: str, wire: str, from_value: tuple[bool, ...]
) -> Route | None:
    """The first allow route admitting a built path (its values already encoded).

    `method` is compared with each route's verb upper-cased; the index walks only the
    routes whose literal segments are the path's, so the cost does not grow with the
    grant (specgen/route_index.py).
    """

    def admits(want: str, got: str, i: int) -> bool:
        return _segment_admits(want, got, from_value[i])

    got = wire.split("/")[1:]
    if len(got) != len(from_value):
        return None
    return index.route(method, got, admits)


# -- query -----------------------------------------------------------------------------


def _unique(
    pairs: tuple[tuple[str, ParamValue], ...], fold: bool, kind: str
) -> dict[str, ParamValue]:
    out: dict[str, ParamValue] = {}
    for name, value in pairs:
        if has_control(name):
            raise CallRefused(f"a {kind} name holds a control character")
        key = name.lower() if fold else name
        if key in out:
            raise CallRefused(f"a {kind} name is given twice")
        out[key] = value
    return out


def _scalar_ok(text: str, kind: str) -> str:
    if has_control(text):
        raise CallRefused(f"a {kind} value holds a control character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CallRefused(f"a {kind} value must be valid Unicode") from None
    return text


def _pinned(permit: Permit, value: ParamValue | None, kind: str) -> str:
    """A pinned parameter's value: the pin, whether the guest gave it or not."""
    assert permit.value is not None
    if value is not None and value != permit.value:
        raise CallRefused(
            f"{kind} {permit.name!r} is pinned by the grant", "pin_differs", permit.name
        )
    return permit.value


def _query_items(permit: Permit, value: ParamValue) -> list[tuple[str, str]]:
    """(encoded name, encoded value) pairs for one permitted parameter."""
    name = _encode(permit.name)
    if permit.style == "deepObject":
        if not isinstance(value, ObjectValue):
            raise CallRefused(f"query {permit.name!r} takes an object (deepObject)")
        seen: set[str] = set()
        out = []
        for key, item in value.pairs:
            if not key or key in seen or has_control(key):
                raise CallRefused(f"query {permit.name!r} has an empty, repeated or bad key")
            seen.add(key)
            out.append((f"{name}%5B{_encode(key)}%5D", _encode(_scalar_ok(item, "query"))))
        return out
    if isinstance(value, ObjectValue):
        raise CallRefused(f"query {permit.name!r} takes no object")
    if not permit.style:
        if not isinstance(value, str):
            raise CallRefused(f"query {permit.name!r} takes one value, not an array")
        return [(name, _encode(_scalar_ok(value, "query")))]
    items = [value] if isinstance(value, str) else list(value)
    texts = [_encode(_scalar_ok(item, "query")) for item in items]
    if not texts:
        return []
    if permit.style == "form":
        return [(name, t) for t in texts]
    joiner = {"form,explode=false": ",", "spaceDelimited": "%20", "pipeDelimited": "%7C"}
    return [(name, joiner[permit.style].join(texts))]


def build_query(
    entry: AllowEntry, given: tuple[tuple[str, ParamValue], ...], reserved: tuple[str, ...] = ()
) -> str:
    """The query string (without `?`), in the entry's order; "" when there is none.

    `reserved` names the credential's query parameters (compared case-folded, as some
    servers read query names): the broker appends them after approval, so neither a
    guest's value nor an entry's permit (pinned or not) may put one on the wire.
    """
    values = _unique(given, fold=False, kind="query")
    permits = {p.name: p for p in entry.query}
    taken = {name.lower() for name in reserved}
    for name in values:
        if name not in permits or name.lower() in taken:
            raise CallRefused(
                "a query parameter the grant does not list", "parameter_not_granted", name
            )
    if any(p.name.lower() in taken for p in entry.query):
        raise CallRefused("a query parameter the broker sets")
    pairs: list[tuple[str, str]] = []
    for permit in entry.query:
        value = values.get(permit.name)
        if permit.value is not None:
            pairs.append((_encode(permit.name), _encode(_pinned(permit, value, "query"))))
        elif value is not None:
            pairs += _query_items(permit, value)
    if len(pairs) > MAX_PARAMS:
        raise CallRefused("too many query parameters")
    return "&".join(f"{n}={v}" for n, v in pairs)


# -- headers ---------------------------------------------------------------------------


def _header_value(text: str) -> str:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_HEADER_VALUE:
        raise CallRefused("a header value is too long")
    if text != text.strip(" \t"):
        raise CallRefused("a header value has surrounding whitespace")
    if not all(ch == "\t" or 0x20 <= ord(ch) <= 0x7E for ch in text):
        raise CallRefused("a header value holds a control or non-ASCII character")
    return text


def build_headers(
    entry: AllowEntry, given: tuple[tuple[str, ParamValue], ...], reserved: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """The guest's permitted headers, as the entry spells their names, in its order."""
    values = _unique(given, fold=True, kind="header")
    permits = {p.name.lower(): p for p in entry.headers}
    for name in values:
        if name not in permits or header_forbidden(name, reserved):
            raise CallRefused("a header the grant does not list", "parameter_not_granted", name)
    out: list[tuple[str, str]] = []
    for key, permit in permits.items():
        if header_forbidden(permit.name, reserved):
            raise CallRefused("a header the broker sets")
        value = values.get(key)
        if permit.value is not None:
            out.append((permit.name, _header_value(_pinned(permit, value, "header"))))
        elif isinstance(value, str):
            out.append((permit.name, _header_value(value)))
        elif isinstance(value, tuple) and permit.style == "simple":
            out.append((permit.name, _header_value(",".join(value))))
        elif value is not None:
            raise CallRefused(f"header {permit.name!r} takes one value")
    return out


# -- bodies ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """What the broker hands httpx for a body: exactly one of the three forms."""

    media_type: str
    content: bytes | None = None
    #: form fields (urlencoded) as (name, value) pairs
    fields: tuple[tuple[str, str], ...] = ()
    #: multipart parts as (name, (filename or None, bytes, content type or None))
    parts: tuple[tuple[str, tuple[str | None, bytes, str | None]], ...] = ()


def _strict_json(raw: bytes) -> object:
    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in items:
            if k in out:
                raise CallRefused("a body field is given twice")
            out[k] = v
        return out

    def no_constant(_: str) -> object:
        raise CallRefused("not JSON")

    try:
        return json.loads(raw, object_pairs_hook=pairs, parse_constant=no_constant)
    except (ValueError, RecursionError):
        raise CallRefused("the body is not the object this media type is built from") from None


def _field_text(value: object) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float):
        text = json.dumps(value)
    else:
        raise CallRefused("a form field is not a string, number or boolean")
    return text


def _name(name: str) -> str:
    if not name or has_control(name):
        raise CallRefused("a form field name is empty or holds a control character")
    return name


def build_body(
    entry: AllowEntry, body: bytes | None, media_type: str | None, payload: bytes | None = None
) -> Body | None:
    """The body to send, or None; refused where the entry gives no body or this type.

    `body` is the envelope's JSON text, `payload` the bytes handed beside it (at most
    one of the two).
    """
    if body is not None and payload is not None:
        raise CallRefused("a body both inside and beside the envelope")
    if not body and not payload:  # b"" is no body, as the reference forwarded it
        if media_type is not None and payload is None:
            raise CallRefused("a media type without a body")
        return None
    media = media_type or JSON
    if media not in entry.body_types():
        raise CallRefused(
            f"the grant permits no {media} body on {entry.route}", "body_type_not_granted", media
        )
    built = media in (FORM, MULTIPART)
    as_json = not built and media_types.kind(media) == "json"
    if payload is not None:
        if built or as_json:
            raise CallRefused(f"a text or binary body cannot be sent as {media}")
        return Body(media, content=payload)
    assert body is not None
    if as_json:
        return Body(media, content=body)
    value = _strict_json(body)
    if not built:
        return Body(media, content=_raw_content(value, media))
    if not isinstance(value, dict):
        raise CallRefused("a form body is an object")
    if media == FORM:
        fields: list[tuple[str, str]] = []
        for name, item in value.items():
            fields += _form_fields(_name(name), item, entry.form_style(name))
            if len(fields) > MAX_FORM_FIELDS:
                raise CallRefused("a form body has too many fields")
        return Body(FORM, fields=tuple(fields))
    parts: list[tuple[str, tuple[str | None, bytes, str | None]]] = []
    for name, item in value.items():
        for one in item if isinstance(item, list) else [item]:
            parts.append((_name(name), _part(one)))
    if not parts:
        raise CallRefused("a multipart body needs at least one part")
    return Body(MULTIPART, parts=tuple(parts))


def _container(value: object) -> bool:
    return isinstance(value, dict | list)


def _form_fields(name: str, value: object, style: str) -> list[tuple[str, str]]:
    """One form field as (name, value) pairs, serialised as `style` (FORM_STYLES)."""
    if style == "deepObject":
        out: list[tuple[str, str]] = []
        _deep(name, value, 0, out)
        return out
    if style == "form,explode=false":
        if isinstance(value, dict):
            texts = [t for k, v in value.items() for t in (_key(k), _flat(v))]
            return [(name, ",".join(texts))]
        if isinstance(value, list):
            return [(name, ",".join(_flat(v) for v in value))]
        return [(name, _field_text(value))]
    if isinstance(value, dict):
        raise CallRefused(
            "a form field is an object, and the grant's encoding gives it no deepObject style"
        )
    items = value if isinstance(value, list) else [value]
    return [(name, _flat(v)) for v in items]


def _flat(value: object) -> str:
    """A scalar inside a form value that cannot nest."""
    if _container(value):
        raise CallRefused("a form field nests an object or array its encoding cannot carry")
    return _field_text(value)


def _key(key: str) -> str:
    """An object key inside a form value: brackets would forge structure, so none."""
    if not key or has_control(key) or "[" in key or "]" in key:
        raise CallRefused("a form field key is empty or holds a bracket or a control character")
    return key


def _deep(name: str, value: object, depth: int, out: list[tuple[str, str]]) -> None:
    """deepObject, in Stripe's brackets: objects as `name[key]`, arrays of scalars as
    `name[]` for each item, arrays holding an object or array as `name[0]`, `name[1]`."""
    if not _container(value):
        out.append((name, _field_text(value)))
        if len(out) > MAX_FORM_FIELDS:
            raise CallRefused("a form body has too many fields")
        return
    if depth >= MAX_FORM_DEPTH:
        raise CallRefused("a form field nests too deeply")
    if isinstance(value, dict):
        for key, item in value.items():
            _deep(f"{name}[{_key(key)}]", item, depth + 1, out)
        return
    assert isinstance(value, list)
    indexed = any(_container(item) for item in value)
    for i, item in enumerate(value):
        _deep(f"{name}[{i}]" if indexed else f"{name}[]", item, depth + 1, out)


def _base64(value: object) -> bytes | None:
    """The bytes of a `{"base64": "..."}` value (strict alphabet and padding), or None
    when `value` is not one."""
    if not isinstance(value, dict) or set(value) != {"base64"}:
        return None
    text = value["base64"]
    if not isinstance(text, str) or not text.isascii():
        raise CallRefused("a base64 body is one string of base64")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CallRefused("a base64 body is not valid base64") from None


def _raw_content(value: object, media: str) -> bytes:
    """A text or binary body given inside the envelope: a string, or base64."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8", "strict")
        except UnicodeEncodeError:
            raise CallRefused("a text body must be valid Unicode") from None
    decoded = _base64(value)
    if decoded is None:
        raise CallRefused(f'a {media} body is a string, bytes or {{"base64": "..."}}')
    return decoded


def _part(value: object) -> tuple[str | None, bytes, str | None]:
    """One multipart part: a field (text) or a file `{filename, content, type?}` whose
    content is a string (sent as UTF-8) or `{"base64": "..."}` (sent decoded)."""
    if not isinstance(value, dict):
        return None, _field_text(value).encode("utf-8"), None
    content = value.get("content")
    data = content.encode("utf-8") if isinstance(content, str) else _base64(content)
    if set(value) - {"filename", "content", "type"} or data is None:
        raise CallRefused(
            'a file part is {"filename", "content", "type"?}, its content a string or '
            '{"base64": "..."}'
        )
    filename = value.get("filename")
    kind = value.get("type")
    if not isinstance(filename, str) or not filename or has_control(filename):
        raise CallRefused("a file part's filename is empty or holds a control character")
    if kind is not None and (
        not isinstance(kind, str) or not all(0x21 <= ord(ch) <= 0x7E or ch == " " for ch in kind)
    ):
        raise CallRefused("a file part's type is not a printable media type")
    return filename, data, kind


__all__ = [
    "MAX_FORM_DEPTH",
    "MAX_FORM_FIELDS",
    "MAX_HEADER_VALUE",
    "MAX_PARAMS",
    "MAX_TARGET_BYTES",
    "Body",
    "CallRefused",
    "build_body",
    "build_headers",
    "build_path",
    "build_query",
    "match_wire",
    "path_value_error",
]
