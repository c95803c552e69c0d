"""The broker against a real HTTP server on loopback: faults, redirects, sizes, denials.

The server records every request it receives, so "nothing reached the API" and "the key
did not follow the redirect" are checked where the requests would have landed.
"""

from __future__ import annotations

import time
from importlib.metadata import version

import pytest

from runtime import Broker, HostRequest, Profile
from runtime.broker import MAX_RESPONSE_BODY
from tests.runtime.loopback import FakeAPI, chunked, free_port, json_ok, profile, reply, stall
from tests.runtime.targets import ADVERSARIAL, BAD_METHODS, REFERENCE

KEY = "loopback-key-5d1e0b"
ALLOW = ("GET /v1/items/*", "POST /v1/items/x/run")


def grant(base_url: str, max_calls: int = 256) -> Profile:
    return profile(base_url, KEY, ALLOW, max_calls=max_calls)


def test_allowed_call_reaches_the_server_with_the_key(api: FakeAPI) -> None:
    with Broker(grant(api.url)) as b:
        out = b(HostRequest("POST", "/v1/items/x/run", b'{"a":1}'))
    assert (out.status, out.body, out.content_type) == (200, b'{"ok":true}', "application/json")
    (seen,) = api.requests
    assert (seen.method, seen.path, seen.body) == ("POST", "/v1/items/x/run", b'{"a":1}')
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["accept"] == "application/json"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["user-agent"] == "plimsoll-specgen/" + version("plimsoll-specgen")
    assert set(seen.headers) <= {
        "user-agent",
        "host",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "authorization",
        "connection",
    }


def test_every_refusal_leaves_the_server_untouched(api: FakeAPI) -> None:
    b = Broker(grant(api.url, max_calls=100_000))
    for target in REFERENCE + ADVERSARIAL:
        assert b(HostRequest("GET", target, None)).status == 403, target
    for method in BAD_METHODS:
        assert b(HostRequest(method, "/v1/items/x", None)).status == 403, method
    assert b(HostRequest("GET", "/v1/items/x", None)).status == 200
    snap = b.close()
    assert snap.denied == len(REFERENCE) + len(ADVERSARIAL) + len(BAD_METHODS)
    assert [s.path for s in api.requests] == ["/v1/items/x"]


def test_api_down_is_502_and_nothing_crashes() -> None:
    b = Broker(grant(f"http://127.0.0.1:{free_port()}"))
    for _ in range(3):
        out = b(HostRequest("GET", "/v1/items/x", None))
        assert (out.status, out.body) == (502, b"host api unreachable\n")
    rows = b.close().rows
    assert [(r.status, r.delivered, r.failure) for r in rows] == [(0, False, "unreachable")] * 3


def test_slow_api_times_out_and_the_next_call_is_served(api: FakeAPI) -> None:
    api.responder = stall(5)
    b = Broker(grant(api.url), upstream_timeout_s=0.3)
    assert b(HostRequest("GET", "/v1/items/x", None)).status == 504
    api.responder = json_ok
    assert b(HostRequest("GET", "/v1/items/y", None)).status == 200
    rows = b.close().rows
    assert [(r.status, r.delivered, r.failure) for r in rows] == [
        (0, False, "timeout"),
        (200, True, None),
    ]


def test_run_deadline_bounds_a_slow_call(api: FakeAPI) -> None:
    import time

    api.responder = stall(5)
    b = Broker(grant(api.url), deadline=time.monotonic() + 0.3)
    assert b(HostRequest("GET", "/v1/items/x", None)).status == 504
    assert b(HostRequest("GET", "/v1/items/x", None)).body == b"host api grant has ended\n"
    assert len(api.requests) == 1


def test_redirect_to_another_origin_is_not_followed(api: FakeAPI) -> None:
    other = FakeAPI()
    try:
        api.responder = reply(
            302, b"see other", {"Location": other.url + "/steal", "Set-Cookie": "a=b"}
        )
        b = Broker(grant(api.url))
        out = b(HostRequest("GET", "/v1/items/x", None))
        assert (out.status, out.body) == (302, b"see other")
        assert other.requests == []
        assert len(api.requests) == 1
        assert KEY not in repr(out)
    finally:
        other.close()


def test_declared_oversize_is_502(api: FakeAPI) -> None:
    def respond(handler, seen):  # type: ignore[no-untyped-def]
        handler.send_response(200)
        handler.send_header("Content-Length", str(MAX_RESPONSE_BODY + 1))
        handler.end_headers()
        handler.wfile.write(b"private")
        handler.close_connection = True

    api.responder = respond
    b = Broker(grant(api.url))
    assert b(HostRequest("GET", "/v1/items/x", None)).body == (
        b"host api response too large (over 4 MiB)\n"
    )
    (row,) = b.close().rows
    assert (row.status, row.delivered, row.bytes_back) == (200, False, 0)


def test_chunked_oversize_is_502_and_small_chunked_is_delivered(api: FakeAPI) -> None:
    api.responder = chunked(12 * 1024 * 1024)
    b = Broker(grant(api.url))
    assert b(HostRequest("GET", "/v1/items/x", None)).status == 502
    api.responder = chunked(MAX_RESPONSE_BODY)
    out = b(HostRequest("GET", "/v1/items/y", None))
    assert out.status == 200 and len(out.body) == MAX_RESPONSE_BODY
    api.responder = chunked(10, chunk=3)
    assert b(HostRequest("GET", "/v1/items/z", None)).body == b"x" * 10
    rows = b.close().rows
    assert [(r.delivered, r.bytes_back) for r in rows] == [
        (False, 0),
        (True, MAX_RESPONSE_BODY),
        (True, 10),
    ]


def test_proxy_environment_is_ignored(api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    trap = FakeAPI()
    try:
        for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(var, trap.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert Broker(grant(api.url))(HostRequest("GET", "/v1/items/x", None)).status == 200
        assert trap.requests == [] and len(api.requests) == 1
    finally:
        trap.close()


def test_a_client_that_resets_mid_request_prints_nothing(
    api: FakeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loopback API keeps a vanished client's error to itself: socketserver would print
    it to sys.stderr, where a test reading a CLI's captured stderr took it for the CLI's."""
    import socket
    import struct

    host, port = api.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12")
        # linger 0: close() sends RST, so the server's read fails with ConnectionResetError
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 10
    while not api._server.errors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert api._server.errors, "the reset never reached the server"
    assert capsys.readouterr().err == ""
