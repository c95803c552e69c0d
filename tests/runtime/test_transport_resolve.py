"""Name resolution ends at the call's deadline (runtime/broker/transport.py).

Found: httpcore resolves inside `socket.create_connection`, whose timeout does not cover
`getaddrinfo`, so a resolver that never answered held the call, and the guest blocked in
it, for as long as the system resolver liked, past the call's deadline. These tests
replace `socket.getaddrinfo` for made-up names (under `.test`, never real) with one that
hangs, fails or answers 127.0.0.1, and assert what the broker does without depending on
how fast the machine is: the hung resolver is released only after the call returned.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runtime import Broker, HostRequest
from runtime.broker import transport
from tests import conftest as prerequisites
from tests.runtime.loopback import FakeAPI, profile

KEY = "key-for-the-resolver-tests-0123456789abcdef"
_REAL_GETADDRINFO = socket.getaddrinfo


class Resolver:
    """socket.getaddrinfo for `*.test` names: `hung.test` waits for `release`,
    `missing.test` fails, `api.test` is 127.0.0.1; anything else is the real one."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.asked: list[str] = []

    def __call__(self, host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not str(host).endswith(".test"):
            return _REAL_GETADDRINFO(host, port, *args, **kwargs)
        self.asked.append(host)
        if host == "hung.test":
            self.entered.set()
            self.release.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if host == "missing.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return _REAL_GETADDRINFO("127.0.0.1", port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resolver]:
    fake = Resolver()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield fake
    fake.release.set()  # let a hung lookup's thread finish


def _call(base_url: str, timeout_s: float = 0.5) -> tuple[Broker, int, bytes]:
    broker = Broker(profile(base_url, KEY, ("GET /v1/*",)), upstream_timeout_s=timeout_s)
    answer = broker(HostRequest("GET", "/v1/x", None))
    return broker, answer.status, answer.body


def test_a_resolver_that_never_answers_ends_at_the_deadline(resolver: Resolver) -> None:
    broker, status, body = _call("http://hung.test:8080")
    # The call is over while the lookup is still blocked: it did not wait for the resolver.
    assert resolver.entered.is_set() and not resolver.release.is_set()
    assert (status, body) == (504, b"host api timed out\n")
    (row,) = broker.close().rows
    assert row.failure == "timeout"


def test_a_name_that_does_not_resolve_is_unreachable(resolver: Resolver) -> None:
    broker, status, body = _call("http://missing.test:8080")
    assert (status, body) == (502, b"host api unreachable\n")
    assert broker.close().rows[0].failure == "unreachable"


def test_a_resolved_name_is_connected_by_address_and_sent_by_name(
    resolver: Resolver, api: FakeAPI
) -> None:
    port = api.url.rsplit(":", 1)[1]
    broker, status, body = _call(f"http://api.test:{port}")
    broker.close()
    assert (status, body) == (200, b'{"ok":true}')
    assert resolver.asked == ["api.test"]
    (seen,) = api.requests
    assert seen.headers.get("host") == f"api.test:{port}"


def test_closing_the_broker_ends_a_call_waiting_on_the_resolver(resolver: Resolver) -> None:
    broker = Broker(profile("http://hung.test:8080", KEY, ("GET /v1/*",)), upstream_timeout_s=30)
    answers: list[int] = []
    caller = threading.Thread(
        target=lambda: answers.append(broker(HostRequest("GET", "/v1/x", None)).status)
    )
    caller.start()
    assert resolver.entered.wait(10)
    broker.close()  # the run ended: the call in flight is abandoned, not waited for
    caller.join(10)
    assert not caller.is_alive() and not resolver.release.is_set()
    assert answers and answers[0] >= 500


def _tls_api(tmp_path: Path, name: str) -> tuple[ThreadingHTTPServer, Path]:
    """An HTTPS server on 127.0.0.1 whose throwaway certificate names only `name`."""
    if shutil.which("openssl") is None:
        prerequisites.missing("openssl (to make a test certificate)", "apt-get install openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}"],
        check=True, capture_output=True,
    )  # fmt: skip

    class Ok(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, cert


@pytest.mark.parametrize(("url_name", "status"), [("api.test", 200), ("other.test", 502)])
def test_tls_checks_the_certificate_against_the_url_name_not_the_address(
    resolver: Resolver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    url_name: str,
    status: int,
) -> None:
    # Both names resolve to 127.0.0.1; the certificate names api.test only. Connecting by
    # address must not turn the check into one against 127.0.0.1, nor skip it (with
    # check_hostname off in the client context, other.test goes green: tried).
    server, cert = _tls_api(tmp_path, "api.test")
    trusted = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(transport, "_tls_context", lambda: trusted)
    try:
        broker, got, _ = _call(f"https://{url_name}:{server.server_address[1]}", timeout_s=10)
        rows = broker.close().rows
    finally:
        server.shutdown()
    assert got == status
    assert rows[0].failure == (None if status == 200 else "tls")
