"""Decode the guest's host-call envelope: the reference's raw call and the structured call.

Two shapes: the reference's raw call `{method, path, body?}`, and the structured call
the generated client sends, `{method, route, values?, query?, headers?, body?, type?}`:
the route pattern with a `*` per path value, the values, the query and header
parameters as objects, and the body's media type. Either may name `client`, the global
whose client made the call (a run of several profiles routes by it). The sandbox only checks the shape
(scalars, arrays of scalars, objects of scalars); every rule about what may be sent is
the broker's. Inside `query` and `headers` duplicate names are kept, not merged, so the
broker can refuse them.

Why a hand-written scanner around the stdlib decoder: the broker must approve and forward
the guest's `body` byte for byte ("approve == wire"), so the body is never parsed and
re-serialised; its exact span in the envelope is found with a real JSON scanner
(`json.JSONDecoder.raw_decode` returns where each value ends) and those bytes are passed
on. The rules mirror Go's `encoding/json` with unknown fields disallowed: keys match
case-insensitively, the last duplicate wins, nothing but whitespace may follow the
object, and `NaN`/`Infinity` (which Python would accept) are refused. The envelopes the
generated client sends most, with no body, query or headers, are read by orjson instead
when it is certain to give the scanner's answer (`_common`; tests/runtime/
test_envelope_common.py holds it to that), at half the scanner's cost.

A text or binary body does not travel inside the envelope: the host call's second
argument carries it (a string, an ArrayBuffer or a Uint8Array, read by the bridge), so
its bytes are copied once instead of escaped into JSON, scanned and decoded. Only a
structured call without a `body` may have one; it is capped at MAX_REQUEST_BODY_BYTES
(10 MiB), while the envelope keeps the reference's 1 MiB + 64 KiB.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring

import orjson

from runtime.contract import MAX_REQUEST_BODY_BYTES, HostRequest, ObjectValue, ParamValue
from runtime.messages import MSG_ENVELOPE_INVALID, MSG_ENVELOPE_TOO_LARGE, MSG_TOO_LARGE

#: 1 MiB + 64 KiB: the largest envelope the host will read.
MAX_ENVELOPE_BYTES = 1_114_112
TEXT_TOO_LARGE = MSG_ENVELOPE_TOO_LARGE + "\n"
TEXT_INVALID = MSG_ENVELOPE_INVALID + "\n"
TEXT_BODY_TOO_LARGE = MSG_TOO_LARGE + "\n"
STATUS_TOO_LARGE, STATUS_INVALID = 413, 400
_KEYS = ("method", "path", "body", "route", "values", "query", "headers", "type", "client")
_STRUCTURED = ("route", "values", "query", "headers", "type")
_WS = " \t\n\r"


@dataclass(frozen=True, slots=True)
class EnvelopeRefusal:
    status: int
    text: str


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
# The body is only scanned for its span, never used as a value: numbers are not converted,
# so a long integer (over Python's 4300-digit int limit) is forwarded, not refused.
_SPAN_DECODER = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_int=lambda _: 0, parse_float=lambda _: 0.0
)


class _Pairs(list[tuple[str, object]]):
    """A JSON object inside `query`/`headers`, as its pairs (duplicates kept)."""


# Parameters: numbers keep the text the guest wrote (JSON.stringify's canonical form),
# objects keep every pair, so nothing is folded before the broker sees it.
_PARAM_DECODER = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_int=str, parse_float=str, object_pairs_hook=_Pairs
)


_WS_RUN = re.compile(f"[{_WS}]*")


def _skip_ws(s: str, i: int) -> int:
    """The index of the first non-whitespace character at or after `i` (one regex
    match instead of a Python step per character: this runs ten times per call)."""
    return _WS_RUN.match(s, i).end()  # type: ignore[union-attr]  # `*` always matches


def _scan_object(s: str) -> dict[str, tuple[int, int, object]]:
    """Top-level object -> {lower-case key: (start, end, value)}; ValueError if invalid."""
    i = _skip_ws(s, 0)
    if i >= len(s) or s[i] != "{":
        raise ValueError("not an object")
    fields: dict[str, tuple[int, int, object]] = {}
    i = _skip_ws(s, i + 1)
    if i < len(s) and s[i] == "}":
        i += 1
    else:
        while True:
            if i >= len(s) or s[i] != '"':
                raise ValueError("expected a key")
            key, i = scanstring(s, i + 1, True)
            folded = key.lower() if key.isascii() else key
            if folded not in _KEYS:
                raise ValueError("unknown key")
            i = _skip_ws(s, i)
            if i >= len(s) or s[i] != ":":
                raise ValueError("expected ':'")
            start = _skip_ws(s, i + 1)
            decoder = (
                _SPAN_DECODER
                if folded == "body"
                else _PARAM_DECODER
                if folded in ("values", "query", "headers")
                else _DECODER
            )
            value, end = decoder.raw_decode(s, start)
            fields[folded] = (start, end, value)
            i = _skip_ws(s, end)
            if i < len(s) and s[i] == ",":
                i = _skip_ws(s, i + 1)
                continue
            if i < len(s) and s[i] == "}":
                i += 1
                break
            raise ValueError("expected ',' or '}'")
    if _skip_ws(s, i) != len(s):
        raise ValueError("trailing data")
    return fields


def decode(raw: bytes, payload: bytes | None = None) -> HostRequest | EnvelopeRefusal:
    """The envelope, or the refusal (status and exact body text) the guest gets instead.

    `payload` is the body the host call's second argument carried, if any.
    """
    if not raw or len(raw) > MAX_ENVELOPE_BYTES:
        return EnvelopeRefusal(STATUS_TOO_LARGE, TEXT_TOO_LARGE)
    if payload is not None and len(payload) > MAX_REQUEST_BODY_BYTES:
        return EnvelopeRefusal(STATUS_TOO_LARGE, TEXT_BODY_TOO_LARGE)
    common = _common(raw, payload)
    if common is not None:
        return common
    return _scanned(raw, payload)


#: The keys of the envelopes the generated client sends with nothing to keep verbatim:
#: no body (its bytes are forwarded as written) and no query or headers (their
#: duplicate names are kept). Spelled as the client spells them.
_COMMON_KEYS = frozenset(("method", "path", "route", "values", "type", "client"))


def _common(raw: bytes, payload: bytes | None) -> HostRequest | None:
    """The envelope decoded by orjson when that is certain to give what the scanner
    would, else None (the scanner then decides, refusals included).

    Certain only for an object of `_COMMON_KEYS`, each spelled in lower case, whose
    values are strings (null for `client` and `type`) and whose path values are strings
    or integers: an integer's text is then its JSON text, unless the envelope holds a
    `-0`, which orjson reads as 0. Anything else, orjson's refusals included (a lone
    surrogate's escape, an integer past 64 bits), goes to the scanner.
    """
    if raw[:1] != b"{" or b"-0" in raw:
        return None
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(fields, dict) or not fields.keys() <= _COMMON_KEYS:
        return None
    method, client = fields.get("method", ""), fields.get("client")
    if not isinstance(method, str) or not (client is None or isinstance(client, str)):
        return None
    route = fields.get("route")
    if route is None:
        path = fields.get("path", "")
        if "route" in fields or len(fields.keys() & _STRUCTURED) or not isinstance(path, str):
            return None
        return HostRequest(method, path, None, client=client) if payload is None else None
    media_type, values = fields.get("type"), fields.get("values", [])
    if "path" in fields or not isinstance(route, str) or not isinstance(values, list):
        return None
    if not (media_type is None or isinstance(media_type, str)):
        return None
    texts = []
    for value in values:
        if isinstance(value, str):
            texts.append(value)
        elif type(value) is int:
            texts.append(str(value))
        else:
            return None
    return HostRequest(
        method,
        "",
        None,
        route=route,
        values=tuple(texts),
        media_type=media_type,
        payload=payload,
        client=client,
    )


def _scanned(raw: bytes, payload: bytes | None) -> HostRequest | EnvelopeRefusal:
    """The envelope as the scanner reads it (the module docstring's rules)."""
    try:
        text = raw.decode("utf-8")
        fields = _scan_object(text)
    except (ValueError, RecursionError):
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
    method = fields.get("method", (0, 0, ""))[2]
    body = None
    if "body" in fields:
        start, end, _ = fields["body"]
        body = text[start:end].encode("utf-8")
    client = fields.get("client", (0, 0, None))[2]
    if not isinstance(method, str) or not (client is None or isinstance(client, str)):
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
    if "route" not in fields:
        path = fields.get("path", (0, 0, ""))[2]
        if not isinstance(path, str) or any(k in fields for k in _STRUCTURED):
            return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
        if payload is not None:  # the reference's raw call carries JSON only
            return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
        return HostRequest(method, path, body, client=client)
    if payload is not None and body is not None:
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
    try:
        return _structured(method, fields, body, payload, client)
    except ValueError:
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)


def _scalar(value: object) -> str:
    """A scalar as the text it travels as; numbers arrive as their JSON text already."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    raise ValueError("not a scalar")


def _param(value: object) -> ParamValue:
    if isinstance(value, _Pairs):
        return ObjectValue(tuple((k, _scalar(v)) for k, v in value))
    if isinstance(value, list):
        return tuple(_scalar(v) for v in value)
    return _scalar(value)


def _params(
    fields: dict[str, tuple[int, int, object]], key: str
) -> tuple[tuple[str, ParamValue], ...]:
    raw = fields.get(key, (0, 0, None))[2]
    if raw is None:
        return ()
    if not isinstance(raw, _Pairs):
        raise ValueError(f"{key} is not an object")
    # null means "not sent", as JSON.stringify already drops undefined
    return tuple((name, _param(value)) for name, value in raw if value is not None)


def _structured(
    method: str,
    fields: dict[str, tuple[int, int, object]],
    body: bytes | None,
    payload: bytes | None = None,
    client: str | None = None,
) -> HostRequest:
    if "path" in fields:
        raise ValueError("route and path together")
    route = fields["route"][2]
    raw_values = fields.get("values", (0, 0, None))[2]
    media_type = fields.get("type", (0, 0, None))[2]
    if not isinstance(route, str) or not (media_type is None or isinstance(media_type, str)):
        raise ValueError("route and type are strings")
    if raw_values is None:
        raw_values = []
    if not isinstance(raw_values, list):
        raise ValueError("values is a list")
    return HostRequest(
        method,
        "",
        body,
        route=route,
        values=tuple(_scalar(v) for v in raw_values),
        query=_params(fields, "query"),
        headers=_params(fields, "headers"),
        media_type=media_type,
        payload=payload,
        client=client,
    )
