"""The broker's HTTP transport: every socket operation of a call ends at the call's deadline.

Why not httpx's own timeouts: they bound each socket operation, not the call. An API that
drips its status line and headers one byte at a time, each byte just inside the read
timeout, keeps one call (and with it the guest, which is blocked in the host call)
running for hours; epoch interruption cannot preempt Python code. Here every connect,
read, write and TLS handshake is given at most the time left until the deadline the
broker set for the call in progress (`call_deadline`), and one started after it is a
timeout, so a call can never outlive its deadline by more than one socket operation
that has already been clamped to the time left.

Name resolution is bounded the same way. httpcore's sync backend resolves inside
`socket.create_connection`, whose timeout covers the connect but not `getaddrinfo`: a
resolver that does not answer held a call (and the guest) for the system resolver's own
timeouts, past the call's deadline. Here the name is resolved on a daemon thread while
the call waits at most the time left (a hung resolver keeps its thread, never the call),
and the connect goes to the addresses it returned, in order, as create_connection would.
TLS still verifies the certificate against the URL's host name (httpcore passes it to
`start_tls` as server_hostname), not the address.

A run that ends with calls still in flight (the guest exited or threw while its
`Promise.all` waited) must not leave them running until their deadline: `abort()` makes
every later socket operation fail at once and shuts down the sockets of the calls in
progress, which wakes a thread blocked reading one (closing a socket from another thread
does not).

The transport is httpcore's connection pool on its own sync backend, wrapped; it reads
no environment (no proxies, no SSL_CERT_FILE), like the rest of the broker. That includes
SSLKEYLOGFILE, which Python's ssl module honours by itself: with it set, the TLS secrets
of every call (and so the Authorization header on the wire) would be written to a file.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator

import httpcore
import httpx

_CALL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "plimsoll_upstream_call_deadline", default=None
)
#: The off switch of the session whose call is in progress in this context. A pooled
#: connection outlives the run that opened it, so each socket operation answers to the
#: session using the connection now, never to the one that opened it.
_SESSION_ABORTS: contextvars.ContextVar[_Aborts | None] = contextvars.ContextVar(
    "plimsoll_upstream_session_aborts", default=None
)


@contextlib.contextmanager
def call_deadline(deadline: float) -> Iterator[None]:
    """Bound every socket operation in this block (this thread) by `deadline` (monotonic)."""
    token = _CALL_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _CALL_DEADLINE.reset(token)


def _clamp(timeout: float | None, late: type[Exception]) -> float | None:
    deadline = _CALL_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the upstream call's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _Aborts:
    """The transport's off switch: the streams open now, and whether it was thrown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[_Stream] = set()
        self._waiting: set[threading.Event] = set()
        self.aborted = False

    def check(self, late: type[Exception]) -> None:
        if self.aborted:
            raise late("the session ended")

    def add(self, stream: _Stream) -> None:
        with self._lock:
            self._open.add(stream)
            aborted = self.aborted
        if aborted:
            stream.shut()

    def discard(self, stream: _Stream) -> None:
        with self._lock:
            self._open.discard(stream)

    @contextlib.contextmanager
    def waiting(self, done: threading.Event) -> Iterator[None]:
        """While a call waits on `done` (a name being resolved), abort() sets it too."""
        with self._lock:
            self._waiting.add(done)
            if self.aborted:
                done.set()
        try:
            yield
        finally:
            with self._lock:
                self._waiting.discard(done)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            streams = list(self._open)
            waiting = list(self._waiting)
        for stream in streams:
            stream.shut()
        for done in waiting:
            done.set()


def _resolve(host: str, port: int, timeout: float | None, aborts: _Aborts) -> list[str]:
    """The addresses `host` resolves to, waiting at most `timeout` (None: no bound).

    getaddrinfo cannot be interrupted, so it runs on a daemon thread of its own: if the
    resolver never answers, that thread is left waiting and the call is a ConnectTimeout.
    An address literal is returned as it is, without a thread.
    """
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    done = threading.Event()
    answer: list[list[str]] = []
    error: list[OSError] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            answer.append(list(dict.fromkeys(str(info[4][0]) for info in infos)))
        except OSError as exc:
            error.append(exc)
        finally:
            done.set()

    threading.Thread(target=lookup, name="broker-resolve", daemon=True).start()
    with aborts.waiting(done):
        done.wait(timeout)
    aborts.check(httpcore.ConnectError)
    if error:
        raise httpcore.ConnectError("the host name did not resolve")
    if not answer:
        raise httpcore.ConnectTimeout("resolving the host name passed the call's deadline")
    if not answer[0]:
        raise httpcore.ConnectError("the host name resolved to no address")
    return answer[0]


#: Stands in for the session's switch outside any session (it is never thrown).
_NO_SESSION = _Aborts()


def _session() -> _Aborts:
    aborts = _SESSION_ABORTS.get()
    return aborts if aborts is not None else _NO_SESSION


class _Stream(httpcore.NetworkStream):
    """A socket whose every operation ends at the call's deadline and is ended by the
    current session's abort(): while an operation runs, the stream is among that
    session's open streams, so abort() can shut it under a blocked reader."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    @contextlib.contextmanager
    def _in_session(self, late: type[Exception]) -> Iterator[None]:
        aborts = _session()
        aborts.check(late)
        aborts.add(self)
        try:
            yield
        finally:
            aborts.discard(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with self._in_session(httpcore.ReadError):
            return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with self._in_session(httpcore.WriteError):
            self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def shut(self) -> None:
        """Wake any thread blocked on this socket: it reads EOF or fails at once."""
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop
            # its SSL object under a reader in another thread.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:  # type: ignore[no-untyped-def]
        with self._in_session(httpcore.ConnectError):
            inner = self._inner.start_tls(
                ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)
            )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> object:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # type: ignore[no-untyped-def]
        aborts = _session()
        aborts.check(httpcore.ConnectError)
        addresses = _resolve(host, port, _clamp(timeout, httpcore.ConnectTimeout), aborts)
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in addresses:  # in the resolver's order, as create_connection tries them
            aborts.check(httpcore.ConnectError)
            try:
                stream = self._inner.connect_tcp(
                    address,
                    port,
                    _clamp(timeout, httpcore.ConnectTimeout),
                    local_address,
                    socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            return _Stream(stream)
        assert failure is not None  # _resolve returns at least one address
        raise failure

    def connect_unix_socket(self, path, timeout=None, socket_options=None):  # type: ignore[no-untyped-def]
        raise httpcore.ConnectError("the broker never connects to a unix socket")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Body(httpx.SyncByteStream):
    """A response body read (and closed) as part of the session that sent the call."""

    def __init__(self, stream: Iterable[bytes], aborts: _Aborts) -> None:
        self._stream = stream
        self._aborts = aborts

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._stream)
        while True:
            token = _SESSION_ABORTS.set(self._aborts)
            try:
                chunk = next(chunks, None)
            finally:
                _SESSION_ABORTS.reset(token)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            token = _SESSION_ABORTS.set(self._aborts)
            try:
                close()
            finally:
                _SESSION_ABORTS.reset(token)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for the process, shared by every run's transport.

    Loading the certificate bundle costs about 60 ms, and each broker (one per run) built
    its own: most of a short run's time. An SSLContext is safe to share between threads
    and holds no per-connection state; nothing here changes it after it is made.
    """
    tls = httpx.create_ssl_context(trust_env=False)
    tls.keylog_filename = None  # type: ignore[assignment]
    return tls


def connection_pool(
    max_connections: int = 16, keepalive_s: float | None = None
) -> httpcore.ConnectionPool:
    """HTTP/1.1 connections on the deadline-bound backend; `keepalive_s` None keeps an
    idle connection as long as the pool lives."""
    return httpcore.ConnectionPool(
        ssl_context=_tls_context(),
        max_connections=max_connections,
        keepalive_expiry=keepalive_s,
        http1=True,
        http2=False,
        retries=0,
        network_backend=_Backend(),
    )


class DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 to the grant's origin, each socket operation clamped to `call_deadline`.

    One session's transport: abort() ends this session's calls only. Its connections
    come from `pool` when given (shared by the runs of one profile, see
    runtime/broker/connections.py; close() then leaves the pool open), else from a pool
    of its own that close() closes.
    """

    def __init__(
        self, max_connections: int = 16, pool: httpcore.ConnectionPool | None = None
    ) -> None:
        self._aborts = _Aborts()
        self._owned = pool is None
        self._pool = pool if pool is not None else connection_pool(max_connections)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        token = _SESSION_ABORTS.set(self._aborts)
        try:
            resp = self._pool.handle_request(core)
        finally:
            _SESSION_ABORTS.reset(token)
        assert isinstance(resp.stream, Iterable)
        return httpx.Response(
            status_code=resp.status,
            headers=resp.headers,
            stream=_Body(resp.stream, self._aborts),
            extensions=resp.extensions,
        )

    def abort(self) -> None:
        """End every call in progress now and refuse any later one (the session ended)."""
        self._aborts.abort()

    def close(self) -> None:
        if self._owned:
            self._pool.close()


__all__ = ["DeadlineTransport", "call_deadline", "connection_pool"]
