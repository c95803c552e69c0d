"""A fake API on loopback: its HTTP server, its request log, its standalone command.

Both examples' fakes (Agent Memory, Mem0) start, stop, read requests and log them the
same way; only `handle`, how they answer, differs. The log holds whether the expected
key came with a request, never the header itself, so a page can show it.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

#: The largest request body a fake reads; a larger one is refused unread.
MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True)
class RecordedRequest:
    """What the fake saw of one request. Holds whether the expected token came with it,
    never the header itself, so the log can be shown on the page without leaking a key."""

    method: str
    path: str  # as received: server prefix included, query string included if any
    carried_token: bool
    status: int
    operation_id: str | None  # None when no operation matched (or auth refused first)


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


Headers = list[tuple[str, str]]


class LoopbackServer:
    """A loopback HTTP server around a fake's `handle`, with its request log.

    A subclass answers in `handle(method, target, headers, body, refusal)`, where
    `headers` are the request's header pairs (a repeated header stays visible) and
    `refusal` is a `Reply` the transport already decided for a body it would not read;
    `transport_refusal` says how the API words such a refusal.
    """

    #: The name of the thread that serves requests, and the Server header.
    thread_name = "fake"
    #: The Authorization scheme the API expects before its key ("Bearer", "Token").
    scheme = "Bearer"
    #: What the API calls its key, in messages ("bearer token", "API key").
    key_word = "bearer token"

    def __init__(
        self,
        token: str,
        host: str,
        port: int,
        on_request: Callable[[RecordedRequest], None] | None = None,
        check_responses: bool = True,
    ) -> None:
        if not token or any(ch.isspace() for ch in token):
            raise ValueError(f"the fake needs a non-empty {self.key_word} without whitespace")
        #: The one Authorization value the fake accepts (compared in constant time).
        self._expected = f"{self.scheme} {token}".encode()
        self._on_request = on_request
        #: Refuse to hand out an answer the document forbids (a bug in the fake).
        self._check_responses = check_responses
        self.host = host
        self.port = port
        self._log: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handle(
        self, method: str, target: str, headers: Headers, body: bytes, refusal: Reply | None
    ) -> Reply:
        raise NotImplementedError

    def transport_refusal(self, status: int, text: str) -> Reply:
        """The reply to a request whose body the server will not read (411, 400, 413)."""
        return Reply(status, text.encode())

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError("the fake is already running")
        self._server = ThreadingHTTPServer((self.host, self.port), self._handler_class)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        # A short poll interval keeps stop() quick; shutdown() waits for the next poll.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Scheme, host and port only: the value a grant's `base_url` takes."""
        if self._server is None:
            raise RuntimeError("the fake is not running; call start() first")
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._log)

    # -- HTTP --------------------------------------------------------------------

    @cached_property
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body leave in one write: split writes meet delayed ACKs and
            # cost ~40 ms per keep-alive request.
            wbufsize = -1
            disable_nagle_algorithm = True
            server_version = fake.thread_name
            sys_version = ""

            def _serve(self) -> None:
                length = self.headers.get("Content-Length", "0")
                refusal = None
                if self.headers.get("Transfer-Encoding"):
                    refusal = fake.transport_refusal(411, "send the body with Content-Length")
                elif not length.isdigit():
                    refusal = fake.transport_refusal(400, "Content-Length is not a number")
                elif int(length) > MAX_BODY_BYTES:
                    refusal = fake.transport_refusal(413, f"body over {MAX_BODY_BYTES} bytes")
                if refusal is not None:
                    # The body was not read, so this connection cannot carry another request.
                    self.close_connection = True
                body = self.rfile.read(int(length)) if refusal is None else b""
                headers = list(self.headers.items())
                reply = fake.handle(self.command, self.path, headers, body, refusal)
                self.send_response(reply.status)
                # JSON unless the fake names the type (GitHub's plain-text 403, a 304
                # with no body at all).
                named = any(name.lower() == "content-type" for name in reply.headers)
                if not named and reply.status != 304:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                if refusal is not None:
                    self.send_header("Connection", "close")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the request log is the record; stderr noise would break golden output

        return RequestHandler


def _port(text: str) -> int:
    """A TCP port for argparse: out of range is a usage error, not OverflowError at bind."""
    port = int(text) if text.isascii() and text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0-65535)")
    return port


def serve(
    argv: list[str] | None,
    *,
    make: type[LoopbackServer],
    prog: str,
    api_name: str,
    default_port: int,
    token_env: str,
    banner_suffix: Callable[[Any], str] = lambda api: "",
) -> int:
    """`python -m examples.NAME.fake`: serve the fake on loopback until interrupted,
    printing one line per request (status, method, path, whether the key came)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=f"Serve the fake {api_name} API on loopback until interrupted."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=default_port, help="port; 0 picks a free one")
    key_word = make.key_word
    parser.add_argument("--token", help=f"the {key_word} to require (default: ${token_env})")
    args = parser.parse_args(argv)
    word = key_word.split()[-1]  # "bearer token" -> token, "API key" -> key
    token = args.token if args.token is not None else os.environ.get(token_env)
    if not token:
        print(f"fake: no {word}: pass --token {word.upper()} or set {token_env}", file=sys.stderr)
        return 2

    def show(record: RecordedRequest) -> None:
        key = word if record.carried_token else f"no {word}"
        print(f"{record.status} {record.method} {record.path} ({key})", flush=True)

    try:
        api = make(token, host=args.host, port=args.port, on_request=show).start()
    except ValueError as error:
        print(f"fake: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"fake: cannot listen on {args.host}:{args.port}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"fake {api_name} API listening on {api.url}{banner_suffix(api)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        api.stop()
    return 0
