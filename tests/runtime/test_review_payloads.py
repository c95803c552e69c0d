"""Hostile bodies beside the envelope: the bytes that leave are exactly the guest's, now.

The host call's second argument is read out of guest memory by the bridge, so every
trick a guest can play with a buffer (detach it, resize it, share it, subclass the view,
hand a view of another type or a Proxy) is tried against a real loopback API, which is
the witness of what was sent. The raw native function is called directly: the client's
own checks are a courtesy, the bridge and the broker are the authority.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from runtime import load_grants as load
from runtime import run_with_grant
from tests.runtime.loopback import FakeAPI, Seen

KEY = "review-payload-key-5f0c2a9d71e8b346"
PREAMBLE = (
    'host.putBlob = (b) => host.call({method: "PUT", route: "/v1/blob",'
    ' type: "application/octet-stream"}, [], b);\n'
)
ENVELOPE = json.dumps({"method": "PUT", "route": "/v1/blob", "type": "application/octet-stream"})


def _length(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = json.dumps({"len": len(seen.body), "hex": seen.body[:64].hex()}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _run(tmp_path: Path, api: FakeAPI, code: str) -> list[list[object]]:
    api.responder = _length
    grant = {
        "base_url": api.url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN"},
        "allow": [
            {"route": "PUT /v1/blob", "body": ["application/octet-stream"]},
            {"route": "PUT /v1/text", "body": ["text/plain"]},
            "GET /v1/items/*",
        ],
        "preamble": PREAMBLE,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": grant}}))
    profile = load(path, environ={"API_TOKEN": KEY}).select("p", "agent")
    prelude = (
        f"const ENV = {json.dumps(ENVELOPE)};\n"
        "const start = globalThis.__coderunner_host_start;\n"
        "const out = [];\n"
        "async function sent(name, payload, env = ENV) {\n"
        "  const r = await start(env, payload);\n"
        "  out.push([name, r.status, r.status === 200 ? JSON.parse(r.body) : null]);\n"
        "}\n"
    )
    result = run_with_grant(
        prelude + code + "\nconsole.log(JSON.stringify(out));", profile, caller="agent"
    ).result
    assert (result.exit_code, result.stderr) == (0, ""), result
    return json.loads(result.stdout)


def test_a_view_of_a_resizable_buffer_sends_its_bytes_as_they_are_now(
    tmp_path: Path, api: FakeAPI
) -> None:
    """A length-tracking view read with JS_GetUint8Array's count kept the length it was
    made with: after a shrink to 10 bytes the host sent 4,096 (freed heap past the
    buffer's end went upstream), after a grow to 100 it sent 8."""
    rows = _run(
        tmp_path,
        api,
        """
        let b = new ArrayBuffer(4096, {maxByteLength: 1 << 20});
        let u = new Uint8Array(b); u.fill(0x41); b.resize(10);
        await sent("shrunk", u);
        b = new ArrayBuffer(8, {maxByteLength: 1 << 20});
        u = new Uint8Array(b); b.resize(100); u.fill(0x42);
        await sent("grown", u);
        b = new ArrayBuffer(64, {maxByteLength: 1 << 20});
        u = new Uint8Array(b, 60); u.fill(0x43); b.resize(62);
        await sent("offset, shrunk", u);
        b = new ArrayBuffer(8, {maxByteLength: 1 << 20});
        u = new Uint8Array(b, 0, 8); b.resize(4);
        await sent("fixed view now out of bounds", u);
        b = new ArrayBuffer(8, {maxByteLength: 1 << 24});
        u = new Uint8Array(b);
        const env = {toString() { b.resize(1 << 24); return ENV; }};
        await sent("grown past the cap while the envelope is read", u, env);
        """,
    )
    assert rows == [
        ["shrunk", 200, {"len": 10, "hex": "41" * 10}],
        ["grown", 200, {"len": 100, "hex": "42" * 64}],
        ["offset, shrunk", 200, {"len": 2, "hex": "4343"}],
        ["fixed view now out of bounds", 400, None],
        ["grown past the cap while the envelope is read", 413, None],
    ]
    assert [len(seen.body) for seen in api.requests] == [10, 100, 2]


def test_other_buffers_and_views_are_refused_or_sent_exactly(tmp_path: Path, api: FakeAPI) -> None:
    rows = _run(
        tmp_path,
        api,
        """
        let b = new ArrayBuffer(8); const d = new Uint8Array(b); b.transfer();
        await sent("detached", d);
        const b2 = new ArrayBuffer(8); const d2 = new Uint8Array(b2);
        await sent("detached while the envelope is read", d2,
                   {toString() { b2.transfer(); return ENV; }});
        const s = new Uint8Array(new SharedArrayBuffer(6)); s.fill(7);
        await sent("shared", s);
        class Liar extends Uint8Array {
          get length() { return 1e9; } get byteLength() { return 1e9; }
          get byteOffset() { return 3; }
        }
        const l = new Liar(5); l.fill(1);
        await sent("subclass with lying getters", l);
        const own = new Uint8Array(3);
        Object.defineProperty(own, "byteLength", {get() { return 1 << 30; }});
        await sent("own byteLength getter", own);
        const proto = Object.getPrototypeOf(Uint8Array.prototype);
        Object.defineProperty(proto, "byteLength", {get() { return 1 << 30; }});
        await sent("byteLength redefined on the prototype", new Uint8Array(4));
        await sent("a Proxy of a Uint8Array", new Proxy(new Uint8Array(4), {}));
        await sent("ArrayBuffer", new ArrayBuffer(4));
        await sent("DataView", new DataView(new ArrayBuffer(4)));
        await sent("Uint16Array", new Uint16Array(4));
        await sent("a number", 5);
        await sent("null", null);
        await sent("a raw call with a payload", new Uint8Array(3),
                   JSON.stringify({method: "PUT", path: "/v1/blob"}));
        await sent("a JSON body and a payload", new Uint8Array(3), JSON.stringify(
          {method: "PUT", route: "/v1/blob", type: "application/octet-stream", body: "x"}));
        await sent("a payload without a type", new Uint8Array(3),
                   JSON.stringify({method: "PUT", route: "/v1/blob"}));
        await sent("a payload on a GET", new Uint8Array(3), JSON.stringify(
          {method: "GET", route: "/v1/items/*", values: ["a"], type: "application/octet-stream"}));
        await sent("one byte over the cap", new Uint8Array((10 << 20) + 1));
        """,
    )
    assert rows == [
        ["detached", 400, None],
        ["detached while the envelope is read", 400, None],
        ["shared", 200, {"len": 6, "hex": "07" * 6}],
        ["subclass with lying getters", 200, {"len": 5, "hex": "01" * 5}],
        ["own byteLength getter", 200, {"len": 3, "hex": "00" * 3}],
        ["byteLength redefined on the prototype", 200, {"len": 4, "hex": "00" * 4}],
        ["a Proxy of a Uint8Array", 400, None],
        ["ArrayBuffer", 400, None],
        ["DataView", 400, None],
        ["Uint16Array", 400, None],
        ["a number", 400, None],
        ["null", 400, None],
        ["a raw call with a payload", 400, None],
        ["a JSON body and a payload", 400, None],
        ["a payload without a type", 403, None],
        ["a payload on a GET", 403, None],
        ["one byte over the cap", 413, None],
    ]
    assert [len(seen.body) for seen in api.requests] == [6, 5, 3, 4]


def test_a_text_payload_always_goes_out_as_utf_8(tmp_path: Path, api: FakeAPI) -> None:
    """A string with a lone surrogate left as its WTF-8 bytes (ED A0 80) and went out
    as `text/plain; charset=utf-8`, which those bytes are not. It now goes out as node's
    fetch and TextEncoder send it, each lone surrogate as U+FFFD (EF BF BD); well-formed
    text goes out as its UTF-8."""
    rows = _run(
        tmp_path,
        api,
        """
        const text = JSON.stringify({method: "PUT", route: "/v1/text", type: "text/plain"});
        await sent("a lone high surrogate", "a\\uD800b", text);
        await sent("a lone low surrogate", "\\uDC00", text);
        await sent("a surrogate pair", "\\uD83D\\uDE00", text);
        await sent("NUL and non-ASCII", "\\u0000\\u00e9", text);
        """,
    )
    assert rows == [
        ["a lone high surrogate", 200, {"len": 5, "hex": "61efbfbd62"}],
        ["a lone low surrogate", 200, {"len": 3, "hex": "efbfbd"}],
        ["a surrogate pair", 200, {"len": 4, "hex": "f09f9880"}],
        ["NUL and non-ASCII", 200, {"len": 3, "hex": "00c3a9"}],
    ]
    assert [seen.body for seen in api.requests] == [
        b"a\xef\xbf\xbdb",
        b"\xef\xbf\xbd",
        b"\xf0\x9f\x98\x80",
        b"\x00\xc3\xa9",
    ]
