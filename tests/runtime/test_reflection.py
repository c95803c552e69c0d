"""A reply carrying the key back is caught encoded, escaped or in pieces.

Found: only the verbatim key and one JSON spelling were caught; an upstream echoing the
key base64- or hex-encoded, percent-encoded, `\\u`-escaped (Go and .NET escape `+ < > &`),
in UTF-16 or split in halves reached the guest with 200. Each form below is checked on
the unit and, for a sample, through a real broker and loopback API end to end.
"""

from __future__ import annotations

import base64
import json
import re
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Broker, HostRequest
from runtime.broker.reflection import Reflection
from tests.runtime.loopback import FakeAPI, Seen, profile, reply

KEY = "sk+live/<k>&Q9zT4mW2xR7pL0vN8bY3cF6hJ1"  # printable ASCII, has + / < > &


def _go_escape(s: str) -> str:
    return (
        json.dumps(s)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )


def _net_escape(s: str) -> str:
    return _go_escape(s).replace("+", "\\u002B")


def _full_escape(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in s)


def _b64_at(key: bytes, offset: int, alphabet: str, padded: bool) -> bytes:
    blob = b"x" * offset + key + b"tail"[: (offset + 1) % 3]
    encoded = base64.b64encode(blob) if alphabet == "std" else base64.urlsafe_b64encode(blob)
    return encoded if padded else encoded.rstrip(b"=")


FORMS: dict[str, bytes] = {
    "verbatim": KEY.encode(),
    "json": json.dumps({"echo": KEY}).encode(),
    "json-slash": json.dumps(KEY).replace("/", "\\/").encode(),
    "go-escape": _go_escape(KEY).encode(),
    "dotnet-escape": _net_escape(KEY).encode(),
    "fully-escaped": _full_escape(KEY).encode(),
    "fully-escaped-upper": _full_escape(KEY).upper().replace(b"\\U".decode(), "\\u").encode(),
    "percent": quote(KEY, safe="").encode(),
    "percent-lower": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(KEY, safe="")).encode(),
    "percent-every-byte": "".join(f"%{b:02x}" for b in KEY.encode()).encode(),
    "hex": KEY.encode().hex().encode(),
    "HEX": KEY.encode().hex().upper().encode(),
    "utf-16-le": KEY.encode("utf-16-le"),
    "utf-16-be": b"\x00" + KEY.encode("utf-16-be") + b"\x00",
    "first-half": b"a=" + KEY.encode()[: len(KEY) // 2] + b";",
    "second-half": b"b=" + KEY.encode()[len(KEY) // 2 :] + b";",
    "split-halves": b'{"p1":"%s","p2":"%s"}' % (KEY.encode()[:19], KEY.encode()[19:]),
}
for _offset in range(3):
    for _alphabet in ("std", "url"):
        for _padded in (True, False):
            FORMS[f"base64-{_alphabet}-{_offset}-{'pad' if _padded else 'nopad'}"] = _b64_at(
                KEY.encode(), _offset, _alphabet, _padded
            )


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_listed_form_is_caught(form: str) -> None:
    assert Reflection([KEY]).found(b"prefix " + FORMS[form] + b" suffix"), form


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"ok":true}',
        KEY.encode()[:12],  # a short piece of the key is below the window
        b"sk+live/" + b"0" * 64,
        base64.b64encode(b"an unrelated payload of some length"),
        b"%" * 100 + b"\\u0041" * 100,
    ],
)
def test_unrelated_bodies_pass(body: bytes) -> None:
    assert not Reflection([KEY]).found(body)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=24, max_size=80
    ),
    start=st.integers(min_value=0, max_value=80),
    prefix=st.binary(max_size=20),
    suffix=st.binary(max_size=20),
)
def test_any_19_byte_piece_of_a_long_key_is_caught(
    key: str, start: int, prefix: bytes, suffix: bytes
) -> None:
    raw = key.encode()
    start = min(start, len(raw) - 19)
    piece = raw[start : start + 19]
    assert Reflection([key]).found(prefix + piece + suffix)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=80
    ),
    lead=st.binary(max_size=7),
    trail=st.binary(max_size=7),
    urlsafe=st.booleans(),
)
def test_base64_is_caught_at_any_alignment(
    key: str, lead: bytes, trail: bytes, urlsafe: bool
) -> None:
    blob = lead + key.encode() + trail
    encoded = base64.urlsafe_b64encode(blob) if urlsafe else base64.b64encode(blob)
    assert Reflection([key]).found(b'{"v":"' + encoded + b'"}')


def test_the_scan_stays_linear_on_a_large_body() -> None:
    refl = Reflection([KEY])
    body = (b"%5C\\u00" * 200_000)[: 4 << 20]
    started = time.perf_counter()
    assert not refl.found(body)
    elapsed = time.perf_counter() - started
    # Not a speed goal (those live in tests/benchmarks): a quadratic scan of 4 MiB would
    # take minutes, any linear one well under this bound on any machine.
    assert elapsed < 20, elapsed


@pytest.mark.parametrize(
    "form", ["go-escape", "dotnet-escape", "base64-url-2-nopad", "HEX", "utf-16-le", "split-halves"]
)
def test_the_broker_never_delivers_an_encoded_echo(api: FakeAPI, form: str) -> None:
    api.responder = reply(200, b'{"echo":"' + FORMS[form] + b'"}')
    broker = Broker(profile(api.url, KEY, ("GET /echo",)))
    try:
        answer = broker(HostRequest("GET", "/echo", None))
    finally:
        snapshot = broker.close()
    assert answer.status == 502
    assert KEY.encode()[:19] not in answer.body and b"\\u" not in answer.body
    assert len(api.requests) == 1
    assert [(r.status, r.delivered) for r in snapshot.rows] == [(200, False)]


#: Keys whose JSON spelling differs from their bytes in every way RFC 8259 allows: a
#: quote and a backslash (escaped by every encoder), non-ASCII (`\u00e9` with
#: ensure_ascii), an astral character (a surrogate pair), and a control-free mix.
ESCAPED_KEYS = [
    'sk"live"Q9zT4mW2xR7pL0vN8bY3',
    "sk\\live\\Q9zT4mW2xR7pL0vN8bY3",
    'a"b\\c"d\\e"f\\g"h\\i"j\\k"l\\m"n',
    "clé-secrète-Q9zT4mW2xR7pL0",
    "key-\U0001f511-Q9zT4mW2xR7pL0vN8",
    'mixed/"\\é\U0001f511+<&>',
]


@pytest.mark.parametrize("key", ESCAPED_KEYS)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_key_echoed_through_json_dumps_is_caught(key: str, ensure_ascii: bool) -> None:
    """An echo endpoint returning `json.dumps(request.headers)` escapes the key's quotes
    and backslashes; the check must read the body as JSON would."""
    body = json.dumps({"Authorization": f"Bearer {key}"}, ensure_ascii=ensure_ascii).encode()
    assert key.encode() not in body or '"' not in key  # the echo really is escaped
    assert Reflection([key]).found(body)


def _upper_escape(ch: str) -> str:
    """`\\uXXXX` in upper case, as a surrogate pair past the BMP."""
    units = ch.encode("utf-16-be")
    return "".join(f"\\u{units[i] << 8 | units[i + 1]:04X}" for i in range(0, len(units), 2))


@pytest.mark.parametrize("key", ESCAPED_KEYS)
def test_a_key_in_every_one_letter_escape_is_caught(key: str) -> None:
    """Encoders differ in what they escape beyond `"` and `\\`: escaping every
    character that has a one-letter or `\\uXXXX` form must not hide the key."""
    spelled = "".join(
        {'"': '\\"', "\\": "\\\\", "/": "\\/"}.get(ch, _upper_escape(ch) if ch > "~" else ch)
        for ch in key
    )
    surrogates = json.dumps(key)[1:-1]  # Python escapes astral characters as a pair
    for body in (spelled, surrogates):
        assert Reflection([key]).found(f'{{"echo":"{body}"}}'.encode()), body


def test_escapes_that_decode_to_other_text_pass() -> None:
    key = 'sk"live"Q9zT4m'  # shorter than WINDOWED_FROM: only the whole key is sought
    near = json.dumps(key.replace('"', "'")).encode()
    assert not Reflection([key]).found(near)
    assert not Reflection([key]).found(b'"\\n\\t\\b\\f\\r\\\\\\"\\ud83d\\ude00"')


@pytest.mark.parametrize("key", ESCAPED_KEYS[:3])
def test_the_broker_withholds_a_quoted_key_echoed_as_json(api: FakeAPI, key: str) -> None:
    """End to end: the loopback API echoes the request headers as JSON, the way an
    echo endpoint does, and the guest gets 502, not the key."""

    def echo(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        reply(200, json.dumps(seen.headers).encode())(handler, seen)

    api.responder = echo
    broker = Broker(profile(api.url, key, ("GET /echo",)))
    try:
        answer = broker(HostRequest("GET", "/echo", None))
    finally:
        snapshot = broker.close()
    assert len(api.requests) == 1
    assert answer.status == 502
    assert [(r.status, r.delivered) for r in snapshot.rows] == [(200, False)]
