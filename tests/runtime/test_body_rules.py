"""The rules for a body beside the envelope and for reply bodies by type, one by one.

The end-to-end claims are in test_bodies.py; here each rule of the envelope decoder,
the broker's body builder and the bridge is held on its own, including the refusals a
generated client never provokes (a raw host call with bytes, a payload of the wrong type).
"""

from __future__ import annotations

import pytest

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from runtime.broker.calls import Body, CallRefused, build_body
from runtime.contract import MAX_REQUEST_BODY_BYTES
from runtime.sandbox.envelope import EnvelopeRefusal, decode
from specgen import media
from specgen.allow import parse_entry
from specgen.routes import Route

STRUCTURED = b'{"method":"PUT","route":"/b","type":"application/octet-stream"}'


def test_a_payload_goes_with_a_structured_call_only_and_never_with_a_body() -> None:
    request = decode(STRUCTURED, b"\x00\xff")
    assert isinstance(request, HostRequest) and request.payload == b"\x00\xff"
    assert request.body is None
    assert decode(b'{"method":"PUT","path":"/b"}', b"x") == EnvelopeRefusal(
        400, "invalid host api request envelope\n"
    )
    with_body = b'{"method":"PUT","route":"/b","body":"x"}'
    assert decode(with_body, b"x") == EnvelopeRefusal(400, "invalid host api request envelope\n")


def test_the_payload_cap_is_exact() -> None:
    assert isinstance(decode(STRUCTURED, b"\0" * MAX_REQUEST_BODY_BYTES), HostRequest)
    assert decode(STRUCTURED, b"\0" * (MAX_REQUEST_BODY_BYTES + 1)) == EnvelopeRefusal(
        413, "host api request body too large (over 10 MiB)\n"
    )
    assert MAX_REQUEST_BODY_BYTES == 10 * 1024 * 1024


ENTRY = parse_entry(
    {
        "route": "PUT /b",
        "body": ["application/json", "text/xml", "application/octet-stream", "multipart/form-data"],
    }
)


@pytest.mark.parametrize(
    ("body", "media_type", "payload", "expected"),
    [
        (
            None,
            "application/octet-stream",
            b"\x00\xff",
            Body("application/octet-stream", b"\x00\xff"),
        ),
        (b'"<a>\\u00e9</a>"', "text/xml", None, Body("text/xml", "<a>\u00e9</a>".encode())),
        (
            b'{"base64": "AP8="}',
            "application/octet-stream",
            None,
            Body("application/octet-stream", b"\x00\xff"),
        ),
        (b'{"a": 1}', None, None, Body("application/json", b'{"a": 1}')),
    ],
    ids=["bytes-beside", "text-inside", "base64-inside", "json"],
)
def test_what_the_broker_sends(
    body: bytes | None, media_type: str | None, payload: bytes | None, expected: Body
) -> None:
    assert build_body(ENTRY, body, media_type, payload) == expected


@pytest.mark.parametrize(
    ("body", "media_type", "payload"),
    [
        (None, None, b"\x00"),  # bytes named as JSON
        (None, "multipart/form-data", b"\x00"),  # bytes for a body the broker builds
        (None, "image/png", b"\x00"),  # a type the entry does not list
        (b'"x"', "text/xml", b"x"),  # both inside and beside the envelope
        (b"{}", "application/octet-stream", None),  # an object that is not {base64}
        (b'{"base64": "AP8"}', "application/octet-stream", None),  # unpadded
        (b'{"base64": "AP8=", "x": 1}', "application/octet-stream", None),
        (b'{"base64": 5}', "application/octet-stream", None),
        (b'"\\ud800"', "text/xml", None),  # a lone surrogate is no text
    ],
)
def test_what_the_broker_refuses(
    body: bytes | None, media_type: str | None, payload: bytes | None
) -> None:
    with pytest.raises(CallRefused):
        build_body(ENTRY, body, media_type, payload)


def test_a_multipart_file_may_hold_base64() -> None:
    built = build_body(
        ENTRY,
        b'{"f": {"filename": "a.bin", "content": {"base64": "AP8="}}}',
        "multipart/form-data",
    )
    assert built is not None and built.parts == (("f", ("a.bin", b"\x00\xff", None)),)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("application/json; charset=utf-8", "json"),
        ("application/problem+json", "json"),
        ("text/json", "json"),
        ("text/csv", "text"),
        ("application/xml", "text"),
        ("application/atom+xml", "text"),
        ("application/x-yaml", "text"),
        ("application/octet-stream", "binary"),
        ("image/png", "binary"),
        ("application/pdf", "binary"),
        ("application/zip", "binary"),
    ],
)
def test_media_kinds(raw: str, kind: str) -> None:
    assert media.kind(raw) == kind


def _echo(content_type: str, body: bytes):
    return lambda request: HostReply(200, body, content_type)


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("image/png", b"\x89P\xff", "object 137,80,255"),
        ("", b"\xff\xfe", "object 255,254"),  # no type, not UTF-8: bytes
        ("", b'{"a":1}', 'object {"a":1}'),  # no type, JSON: parsed, as before
        ("", b"plain", "string plain"),
        ("text/plain", b"123", "string 123"),  # text stays text
        ("application/json", b"123", "number 123"),
        ("application/json", b"not json", "string not json"),
        ("text/csv; charset=utf-8", "a,\u00e9".encode(), "string a,\u00e9"),
    ],
)
def test_a_reply_reaches_the_code_by_its_type(
    content_type: str, body: bytes, expected: str
) -> None:
    code = """
    const v = await host.get("/r");
    print(typeof v, v instanceof Uint8Array ? Array.from(v).join(",") :
          typeof v === "object" ? JSON.stringify(v) : String(v));
    """
    result = run(
        code, grant=GuestGrant(allow=(Route("/r", "GET"),)), handler=_echo(content_type, body)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected + "\n"


@pytest.mark.parametrize("payload", ["5", "{}", "[1]", "new Uint16Array(2)", "null", "true"])
def test_a_payload_that_is_not_a_string_or_a_uint8array_is_refused(payload: str) -> None:
    """The bridge reads only a string or a Uint8Array (the client makes every other view
    one); anything else is an invalid envelope, and the handler never sees the call."""
    seen: list[HostRequest] = []

    def handler(request: HostRequest) -> HostReply:
        seen.append(request)
        return HostReply(200, b"{}")

    code = f"""
    const envelope = JSON.stringify({{method: "PUT", route: "/b", type: "application/octet-stream"}});
    const a = globalThis.__coderunner_host_call(envelope, {payload});
    const b = await globalThis.__coderunner_host_start(envelope, {payload});
    print(a.status, b.status, JSON.stringify(b.body));
    """
    result = run(code, handler=handler)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == '400 400 "invalid host api request envelope\\n"\n'
    assert seen == [] and result.refused_calls == 2
