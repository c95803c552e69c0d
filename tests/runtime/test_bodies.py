"""Bodies of every kind, end to end: generated client in the sandbox, broker, a real server.

The client and preamble are generated from tests/data/bodies.openapi.json by specgen
itself, the grant's entries are the ones `build` writes into allow.json, and the API is
a loopback HTTP server that records the bytes and headers it received (an independent
witness: nothing here trusts what the broker says it sent). The claims:

* a text body (XML, YAML, CSV, HTML, `+xml`) given as a string arrives as its exact
  UTF-8 bytes, and a JSON-family body (`text/json`, `+json`) as JSON.stringify wrote it,
  each with the entry's media type as Content-Type, set by the broker;
* a binary body from a Uint8Array, an ArrayBuffer, a view into part of a buffer or
  `{base64}` arrives byte for byte as `application/octet-stream`;
* a binary reply is a Uint8Array holding exactly the bytes sent, invalid UTF-8 included;
  a text reply is a string; a JSON reply is parsed;
* a body over 10 MiB is refused in one line and never sent; a binary body to an entry
  that permits only JSON is refused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from runtime import HostRequest, Profile, Secret, run_with_grant
from runtime.broker import Broker
from runtime.contract import MAX_REQUEST_BODY_BYTES
from specgen import build as pipeline
from specgen.allow import parse_entry
from tests.runtime.loopback import FakeAPI, Seen

DOC = Path(__file__).resolve().parents[1] / "data" / "bodies.openapi.json"
#: Bytes no UTF-8 decoder accepts (a lone continuation byte, 0xFF, a truncated sequence).
NOT_UTF8 = bytes([0x00, 0x80, 0xFF, 0xFE, 0xC3, 0x28, 0x89, 0x50, 0x4E, 0x47])


def _built() -> tuple[str, tuple[str, ...]]:
    result = pipeline.run(str(DOC), pipeline.Options(global_name="api"))
    entries = tuple(json.dumps(e) if isinstance(e, dict) else e for e in _allow(result))
    return result.files["preamble.js"], entries


def _allow(result: pipeline.Result) -> list[object]:
    return json.loads(result.files["allow.json"])


PREAMBLE, ENTRIES = _built()


def grant(base_url: str, entries: tuple[object, ...] | None = None) -> Profile:
    parsed = tuple(
        parse_entry(json.loads(e) if isinstance(e, str) and e.startswith("{") else e)
        for e in (entries if entries is not None else ENTRIES)
    )
    return Profile(
        name="bodies",
        base_url=base_url,
        global_name="api",
        allowed_callers=("*",),
        allow=tuple(e.route for e in parsed),
        entries=parsed,
        preamble=PREAMBLE,
        token=Secret("k-bodies-test"),
    )


def _responder(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """Answers by route: a PNG-ish blob, CSV text, YAML, or JSON naming what arrived."""
    path = seen.path
    if path.startswith("/v1/blobs/") and seen.method == "GET":
        body, kind = NOT_UTF8, "application/octet-stream"
    elif path.endswith("/thumbnail"):
        body, kind = b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "image/png"
    elif path == "/v1/reports" and seen.method == "GET":
        body, kind = "id,name\n1,caf\u00e9\n".encode(), "text/csv; charset=utf-8"
    elif path.startswith("/v1/configs/") and seen.method == "PUT":
        body, kind = b"a: 1\n", "application/x-yaml"
    elif path == "/v1/reports":
        body, kind = b"42", "text/plain"
    else:
        body, kind = json.dumps({"got": len(seen.body)}).encode(), "application/json"
    handler.send_response(200)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI(responder=_responder)
    yield server
    server.close()


def _run(api: FakeAPI, code: str, entries: tuple[object, ...] | None = None) -> str:
    outcome = run_with_grant(code, grant(api.url, entries))
    assert outcome.result.exit_code == 0, outcome.result.stderr
    return outcome.result.stdout


def _only(api: FakeAPI) -> Seen:
    assert len(api.requests) == 1, api.requests
    return api.requests[0]


@pytest.mark.parametrize(
    ("call", "path", "content_type", "wire"),
    [
        (
            'api.import_invoice_xml("<invoice total=\\"1\\">caf\\u00e9 &amp; \\u2603</invoice>")',
            "/v1/invoices",
            "application/xml",
            '<invoice total="1">caf\u00e9 &amp; \u2603</invoice>'.encode(),
        ),
        (
            'api.replace_feed("f 1", "<feed xmlns=\\"http://www.w3.org/2005/Atom\\"/>")',
            "/v1/feeds/f%201",
            "application/atom+xml",
            b'<feed xmlns="http://www.w3.org/2005/Atom"/>',
        ),
        (
            'api.put_config_yaml("app", "a: 1\\nlist:\\n  - x\\n")',
            "/v1/configs/app",
            "application/x-yaml",
            b"a: 1\nlist:\n  - x\n",
        ),
        (
            'api.upload_report_csv("id,name\\r\\n1,\\"a,b\\"\\r\\n")',
            "/v1/reports",
            "text/csv",
            b'id,name\r\n1,"a,b"\r\n',
        ),
        (
            'api.put_page_html("home", "<!doctype html><p>hi</p>")',
            "/v1/pages/home",
            "text/html",
            b"<!doctype html><p>hi</p>",
        ),
        (
            'api.post_legacy_note({text: "caf\\u00e9", n: 1.5})',
            "/v1/legacy/notes",
            "text/json",
            b'{"text":"caf\xc3\xa9","n":1.5}',
        ),
        (
            'api.merge_config("app", {a: null, b: [1, 2]})',
            "/v1/configs/app",
            "application/merge-patch+json",
            b'{"a":null,"b":[1,2]}',
        ),
    ],
    ids=["xml", "atom+xml", "yaml", "csv", "html", "text-json", "merge-patch-json"],
)
def test_a_text_body_arrives_byte_exact_with_the_entrys_content_type(
    api: FakeAPI, call: str, path: str, content_type: str, wire: bytes
) -> None:
    _run(api, f"await {call};")
    seen = _only(api)
    assert seen.path == path
    assert seen.body == wire
    assert seen.headers["content-type"] == content_type
    assert seen.headers["content-length"] == str(len(wire))


def test_a_lone_surrogate_in_a_text_body_arrives_as_one_replacement_character(
    api: FakeAPI,
) -> None:
    """As `fetch` and TextEncoder send a string: the body upstream is UTF-8, never the
    three bytes QuickJS writes for a lone surrogate (ED A0 80), and a pair stays whole."""
    _run(api, 'await api.upload_report_csv("a,\\ud800,\\udfff\\ud83d\\ude00\\n");')
    body = _only(api).body
    assert body == "a,\ufffd,\ufffd\U0001f600\n".encode()
    assert body.decode("utf-8")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        ("new Uint8Array([0, 255, 128, 10, 13, 0])", bytes([0, 255, 128, 10, 13, 0])),
        ("new Uint8Array([1, 2, 3, 250]).buffer", bytes([1, 2, 3, 250])),
        # a view into the middle of a larger buffer: only the view's bytes travel
        ("new Uint8Array([9, 9, 1, 2, 3, 9]).subarray(2, 5)", bytes([1, 2, 3])),
        ("new DataView(new Uint8Array([7, 8, 9]).buffer, 1)", bytes([8, 9])),
        ("new Uint16Array([0x0201, 0xFFFE])", bytes([1, 2, 0xFE, 0xFF])),
        ('{base64: "AP+AIA=="}', bytes([0, 255, 128, 32])),
    ],
    ids=["uint8array", "arraybuffer", "subarray", "dataview", "uint16array", "base64"],
)
def test_a_binary_upload_arrives_byte_for_byte(api: FakeAPI, make: str, expected: bytes) -> None:
    out = _run(api, f'const r = await api.upload_blob("sha256:ab", {make}); print(r.got);')
    seen = _only(api)
    assert (seen.method, seen.path) == ("PUT", "/v1/blobs/sha256%3Aab")
    assert seen.body == expected
    assert seen.headers["content-type"] == "application/octet-stream"
    assert out == f"{len(expected)}\n"


def test_a_large_binary_upload_arrives_whole(api: FakeAPI) -> None:
    """Near the 10 MiB cap, every byte (a pattern, so a shifted or dropped chunk shows)."""
    size = MAX_REQUEST_BODY_BYTES
    code = (
        f"const b = new Uint8Array({size}); for (let i = 0; i < b.length; i++) b[i] = i % 251;"
        "const r = await api.upload_blob('big', b); print(r.got);"
    )
    assert _run(api, code) == f"{size}\n"
    assert _only(api).body == bytes(i % 251 for i in range(251)) * (size // 251) + bytes(
        range(size % 251)
    )


def test_a_multipart_file_part_may_hold_bytes(api: FakeAPI) -> None:
    code = (
        "await api.upload_attachment({note: 'n', file: "
        "{filename: 'a.bin', type: 'application/octet-stream', content: new Uint8Array([0, 255, 1])}});"
    )
    _run(api, code)
    seen = _only(api)
    assert seen.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'filename="a.bin"' in seen.body
    assert b"\r\n\r\n\x00\xff\x01\r\n" in seen.body


def test_a_binary_download_is_a_uint8array_of_exactly_the_bytes(api: FakeAPI) -> None:
    code = """
    const b = await api.download_blob("x");
    const t = await api.get_thumbnail("p1");
    print(b instanceof Uint8Array, b.length, Array.from(b).join(","));
    print(t instanceof Uint8Array, t.length, t[0], t[t.length - 1]);
    """
    lines = _run(api, code).splitlines()
    assert lines[0] == f"true {len(NOT_UTF8)} " + ",".join(map(str, NOT_UTF8))
    assert lines[1] == f"true {8 + 256} 137 255"


def test_a_text_reply_is_a_string_and_a_json_reply_is_parsed(api: FakeAPI) -> None:
    code = """
    const csv = await api.export_reports_csv();
    const yaml = await api.put_config_yaml("c", "a: 1\\n");
    const plain = await api.upload_report_csv("x");
    const json = await api.import_invoice_xml("<a/>");
    print(JSON.stringify([csv, yaml, plain, typeof plain, json]));
    """
    out = json.loads(_run(api, code))
    # "42" as text/plain stays the string "42": only a JSON type is parsed
    assert out == ["id,name\n1,caf\u00e9\n", "a: 1\n", "42", "string", {"got": 4}]


def test_a_body_over_the_cap_is_refused_in_one_line_and_never_sent(api: FakeAPI) -> None:
    over = MAX_REQUEST_BODY_BYTES + 1
    code = f"""
    for (const body of [new Uint8Array({over}), "x".repeat({over})]) {{
      try {{ await api.upload_blob("b", body); print("sent"); }}
      catch (e) {{ print(e.message); }}
    }}
    // past the client's own check (the raw structured call), the bridge refuses it
    const r = await globalThis.__coderunner_host_start(
      JSON.stringify({{method: "PUT", route: "/v1/blobs/*", values: ["b"], type: "application/octet-stream"}}),
      new Uint8Array({over}));
    print(r.status, JSON.stringify(r.body));
    """
    lines = _run(api, code).splitlines()
    assert lines == [
        "host api request body too large (over 10 MiB)",
        "host api request body too large (over 10 MiB)",
        '413 "host api request body too large (over 10 MiB)\\n"',
    ]
    assert api.requests == []


def test_the_broker_refuses_an_over_cap_body_whoever_built_the_request(api: FakeAPI) -> None:
    """The broker is the authority: a HostRequest that never passed the sandbox is held
    to the same cap, and nothing reaches the API."""
    request = HostRequest(
        "PUT",
        "",
        route="/v1/blobs/*",
        values=("b",),
        media_type="application/octet-stream",
        payload=b"\0" * (MAX_REQUEST_BODY_BYTES + 1),
    )
    with Broker(grant(api.url)) as broker:
        reply = broker(request)
        exact = broker(
            HostRequest(
                "PUT",
                "",
                route="/v1/blobs/*",
                values=("b",),
                media_type="application/octet-stream",
                payload=b"\0" * MAX_REQUEST_BODY_BYTES,
            )
        )
    assert (reply.status, reply.body) == (413, b"host api request body too large (over 10 MiB)\n")
    assert exact.status == 200
    assert len(api.requests) == 1 and len(api.requests[0].body) == MAX_REQUEST_BODY_BYTES


def test_a_binary_body_to_an_entry_that_permits_only_json_is_refused(api: FakeAPI) -> None:
    code = """
    // the generated method sends JSON: the client refuses bytes for it
    try { await api.create_document(new Uint8Array([1])); } catch (e) { print(e.message); }
    // asked for as octet-stream, the broker refuses it: the entry lists XML and JSON only
    try {
      await api.call({method: "POST", route: "/v1/documents", type: "application/octet-stream"}, [], new Uint8Array([1]));
    } catch (e) { print(e.message.trim()); }
    // bytes beside an envelope that names JSON: refused by the broker too
    const r = await globalThis.__coderunner_host_start(
      JSON.stringify({method: "POST", route: "/v1/documents"}), new Uint8Array([1]));
    print(r.status);
    """
    lines = _run(api, code).splitlines()
    assert lines == [
        "POST /v1/documents sends application/json, not bytes",
        "host api 403: body type not granted: application/octet-stream",
        "403",
    ]
    assert api.requests == []


def test_the_content_type_is_the_brokers_not_the_guests(api: FakeAPI) -> None:
    """The broker sets Content-Type from the entry; a guest cannot name another type the
    entry does not list, nor send a Content-Type header of its own."""
    entries = (json.dumps({"route": "PUT /v1/blobs/*", "body": ["application/octet-stream"]}),)
    code = """
    const spec = {method: "PUT", route: "/v1/blobs/*", type: "text/html"};
    try { await api.call(spec, ["b"], "<script>"); } catch (e) { print(e.message.trim()); }
    const withHeader = {method: "PUT", route: "/v1/blobs/*", type: "application/octet-stream",
                        headers: ["Content-Type"]};
    try { await api.call(withHeader, ["b"], "x", {"Content-Type": "text/html"}); }
    catch (e) { print(e.message.trim()); }
    await api.upload_blob("b", "plain text as bytes");
    """
    lines = _run(api, code, entries).splitlines()
    assert lines == [
        "host api 403: body type not granted: text/html",
        "host api 403: parameter not granted: content-type",
    ]
    seen = _only(api)
    assert seen.body == b"plain text as bytes"
    assert seen.headers["content-type"] == "application/octet-stream"


def test_base64_that_is_not_base64_is_refused(api: FakeAPI) -> None:
    code = """
    for (const b64 of ["AP+A", "not base64!", "AA="]) {
      try { await api.upload_blob("b", {base64: b64}); print("sent"); }
      catch (e) { print(e.message.split(":")[0]); }
    }
    """
    assert _run(api, code).splitlines() == ["sent", "host api 403", "host api 403"]
    assert [s.body for s in api.requests] == [base64.b64decode("AP+A")]


def test_text_and_binary_bodies_cross_the_worker_tiers_pipe_byte_exact(api: FakeAPI) -> None:
    """On the worker tier the body travels from the engine process to the broker beside
    the call's envelope, as in-process it travels beside it to the broker."""
    from runtime.tiers.boundary import EngineProcess, run_isolated

    code = (
        'await api.upload_report_csv("a,caf\\u00e9\\n");'
        " await api.upload_blob('sha256:ab', new Uint8Array([0, 255, 128, 10]));"
        ' await api.merge_config("app", {a: null});'
    )
    engine = EngineProcess("worker")
    try:
        outcome = run_isolated(engine, code, grant(api.url), caller="tests")
    finally:
        engine.close()
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert [(seen.path, seen.body) for seen in api.requests] == [
        ("/v1/reports", "a,caf\u00e9\n".encode()),
        ("/v1/blobs/sha256%3Aab", bytes([0, 255, 128, 10])),
        ("/v1/configs/app", b'{"a":null}'),
    ]


@pytest.mark.parametrize("view", ["bytearray", "memoryview of words"])
def test_a_body_handed_over_as_a_view_is_sent_as_its_bytes(api: FakeAPI, view: str) -> None:
    """A HostHandler may be handed a bytearray or memoryview; what goes upstream is the
    bytes it holds, framed by their count in bytes. A memoryview of 4-byte items counted
    as items would frame a quarter of the body and leave the rest on the connection, read
    there as a request of its own."""
    smuggled = b"GET /v1/smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    data = b"x" * 64 + smuggled
    data += b"y" * (-len(data) % 4)
    payload = bytearray(data) if view == "bytearray" else memoryview(data).cast("I")
    call = HostRequest(
        "PUT",
        "",
        route="/v1/blobs/*",
        values=("b",),
        media_type="application/octet-stream",
        payload=payload,  # type: ignore[arg-type]  # what a handler may be handed
    )
    with Broker(grant(api.url)) as broker:
        reply = broker(call)
        broker(HostRequest("GET", "/v1/blobs/b"))
    assert reply.status == 200
    assert [(seen.method, seen.path, seen.body) for seen in api.requests] == [
        ("PUT", "/v1/blobs/b", data),
        ("GET", "/v1/blobs/b", b""),
    ]
