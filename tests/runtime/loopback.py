"""A real HTTP server on 127.0.0.1 for broker tests: records every request it receives.

Tests that claim "zero requests reached the API" need an API that would have seen them;
respx intercepts inside httpx, so this server is the independent witness.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runtime import Profile, Secret
from specgen.routes import parse_route_line


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: The client's (address, port): one per TCP connection, so tests can count them.
    peer: tuple[str, int] = ("", 0)


Responder = Callable[[BaseHTTPRequestHandler, Seen], None]


def json_ok(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = b'{"ok":true}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Set-Cookie", "session=upstream-secret")
    handler.end_headers()
    handler.wfile.write(body)


class _QuietServer(ThreadingHTTPServer):
    """A client that vanishes mid-connection (a killed worker, a broker that gave up) is
    normal here. socketserver prints such an error's traceback to sys.stderr, which a test
    that captures a CLI's stderr in-process then reads as the CLI's own lines (seen: a
    line of 40 dashes in a batch run's stderr under load). Kept in `errors` instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.errors: list[BaseException | None] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors.append(sys.exc_info()[1])


@dataclass
class FakeAPI:
    responder: Responder = json_ok
    requests: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Buffered, flushed once per response: status, headers and body leave in one
            # write, so Nagle and delayed ACKs do not add ~40 ms to keep-alive requests.
            wbufsize = -1

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                seen = Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    tuple(self.client_address[:2]),
                )
                api.requests.append(seen)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    api.responder(self, seen)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _any

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A stalled responder must not hold up close(): do not join handler threads.
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Responder:
    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        handler.send_response(status)
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def chunked(total: int, chunk: int = 64 * 1024) -> Responder:
    """A chunked body of `total` bytes with no Content-Length."""

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        piece = b"x" * chunk
        try:
            while sent < total:
                part = piece[: min(chunk, total - sent)]
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                sent += len(part)
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    return respond


def stall(seconds: float) -> Responder:
    """Accept the request, then say nothing for `seconds` (a hung API)."""
    done = threading.Event()

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        done.wait(seconds)
        handler.close_connection = True

    return respond


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hang(events: list[str], seconds: float = 10.0) -> Responder:
    """Say nothing; append "client left" if the client hangs up before `seconds` pass.

    Lets a test show that the broker abandoned a hung call without timing anything.
    """

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        handler.connection.settimeout(seconds)
        try:
            left = handler.connection.recv(1) == b""
        except OSError:
            left = False
        events.append("client left" if left else "server gave up")
        handler.close_connection = True

    return respond


def profile(
    base_url: str,
    key: str,
    allow: tuple[str, ...],
    *,
    max_calls: int = 256,
    name: str = "p",
    preamble: str = "",
) -> Profile:
    """A profile built in code for broker tests: any caller, a static key, `allow` lines."""
    return Profile(
        name=name,
        base_url=base_url,
        global_name="host",
        allowed_callers=("*",),
        allow=tuple(parse_route_line(a) for a in allow),
        max_calls=max_calls,
        preamble=preamble,
        token=Secret(key),
    )
