"""Decode the guest's host-call envelope `{method, path, body?}` (reference section 5.3).

Why a hand-written scanner around the stdlib decoder: the broker must approve and forward
the guest's `body` byte for byte ("approve == wire"), so the body is never parsed and
re-serialised; its exact span in the envelope is found with a real JSON scanner
(`json.JSONDecoder.raw_decode` returns where each value ends) and those bytes are passed
on. The rules mirror Go's `encoding/json` with unknown fields disallowed: keys match
case-insensitively, the last duplicate wins, nothing but whitespace may follow the
object, and `NaN`/`Infinity` (which Python would accept) are refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring

from runtime.contract import HostRequest
from runtime.messages import MSG_ENVELOPE_INVALID, MSG_ENVELOPE_TOO_LARGE

#: 1 MiB + 64 KiB: the largest envelope the host will read.
MAX_ENVELOPE_BYTES = 1_114_112
TEXT_TOO_LARGE = MSG_ENVELOPE_TOO_LARGE + "\n"
TEXT_INVALID = MSG_ENVELOPE_INVALID + "\n"
STATUS_TOO_LARGE, STATUS_INVALID = 413, 400
_KEYS = ("method", "path", "body")
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


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


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
            decoder = _SPAN_DECODER if folded == "body" else _DECODER
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


def decode(raw: bytes) -> HostRequest | EnvelopeRefusal:
    """The envelope, or the refusal (status and exact body text) the guest gets instead."""
    if not raw or len(raw) > MAX_ENVELOPE_BYTES:
        return EnvelopeRefusal(STATUS_TOO_LARGE, TEXT_TOO_LARGE)
    try:
        text = raw.decode("utf-8")
        fields = _scan_object(text)
    except (ValueError, RecursionError):
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
    method = fields.get("method", (0, 0, ""))[2]
    path = fields.get("path", (0, 0, ""))[2]
    if not isinstance(method, str) or not isinstance(path, str):
        return EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
    body = None
    if "body" in fields:
        start, end, _ = fields["body"]
        body = text[start:end].encode("utf-8")
    return HostRequest(method, path, body)
