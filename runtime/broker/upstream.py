"""Sending one approved request to the grant's origin and reading its reply, bounded.

Why apart from the decision: this module holds the HTTP client and nothing that knows
the grant's rules; it is handed a request the policy built and returns either an
`Upstream` (status, body, sanitised content type, raw headers) or raises `Fault`. No exception text
from the HTTP stack (which could name the URL) ever leaves it, a body is read as it
streams and never past the cap, and a compressed or oddly framed reply is a fault.

A fault carries a `Failure`, one of a fixed set of reasons, so the guest (a status and
a short fixed text) and the operator (the trace row's `failure`) can tell an unreachable
API from a slow one, a TLS failure or a reply over the size cap. The reason is decided
from exception types only, never from their text.
"""

from __future__ import annotations

import contextlib
import enum
import ssl
import time
from dataclasses import dataclass

import httpcore
import httpx

from runtime.broker.transport import DeadlineTransport, call_deadline

#: Largest response body returned to the guest (bytes); larger is a 502, never truncated.
MAX_RESPONSE_BODY = 4 << 20

_OCTET = "application/octet-stream"


@dataclass(frozen=True)
class Upstream:
    """What came back from one upstream call, before it is turned into a reply."""

    status: int
    body: bytes
    content_type: str
    #: The first Retry-After header, for the breaker.
    retry_after: str | None = None
    #: Every response header as received (names as sent, values decoded as Latin-1);
    #: the policy picks the few a grant lets agent code read (Policy.reply_headers).
    headers: tuple[tuple[str, str], ...] = ()


class Failure(enum.StrEnum):
    """Why an upstream call gave the guest nothing (documented in docs/upstream-failures.md)."""

    #: No connection: refused, no route, name not resolved.
    UNREACHABLE = "unreachable"
    #: Connecting, sending or reading passed the call's deadline.
    TIMEOUT = "timeout"
    #: The TLS handshake failed (certificate, protocol).
    TLS = "tls"
    #: The reply body is over MAX_RESPONSE_BODY (declared or read).
    TOO_LARGE = "too_large"
    #: The reply is not one the broker forwards: bad framing, compression, a status
    #: outside 100-599, the connection dropped mid-reply.
    BAD_RESPONSE = "bad_response"
    #: The reply carried the key back (runtime/broker/reflection.py); withheld.
    KEY_REFLECTED = "key_reflected"
    #: The run ended (deadline, throw, exit) while the call was admitted or on the wire;
    #: the broker aborted it and records it with this reason.
    CANCELLED = "cancelled"


class Fault(Exception):
    """The upstream call failed; `status` is the upstream status if one arrived, else 0."""

    def __init__(self, status: int = 0, reason: Failure = Failure.BAD_RESPONSE) -> None:
        super().__init__(status)
        self.status = status
        self.reason = reason


def classify(exc: BaseException) -> Failure:
    """The reason for an exception from the HTTP stack, by type (its text is never read)."""
    seen: set[int] = set()
    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and id(node) not in seen and len(chain) < 16:
        seen.add(id(node))
        chain.append(node)
        node = node.__cause__ or node.__context__
    if any(isinstance(e, ssl.SSLError | ssl.CertificateError) for e in chain):
        return Failure.TLS
    if any(isinstance(e, httpx.TimeoutException | httpcore.TimeoutException) for e in chain):
        return Failure.TIMEOUT
    if any(isinstance(e, TimeoutError) for e in chain):
        return Failure.TIMEOUT
    if any(isinstance(e, httpx.ConnectError | httpcore.ConnectError) for e in chain):
        return Failure.UNREACHABLE
    return Failure.BAD_RESPONSE


class Channel:
    """Sends one session's requests straight to its transport.

    An `httpx.Client` between the two would add only layers the broker turns off:
    redirects are returned, never followed (the Authorization header must never be
    replayed to a Location's origin); no cookie is kept or sent, so no header but the
    policy's goes out; no auth flow, default headers or proxies from the environment.
    Passing through them was a third of a call's cost (every request merged with the
    client's headers and cookies; every response copied into a urllib request to offer
    its Set-Cookie to a jar that drops it), and the client logs each request's URL,
    path values and any credential query parameter included, at INFO. `Policy.build`
    builds each request whole, so the transport gets exactly what was approved.
    """

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self.transport = transport

    def send(self, request: httpx.Request) -> httpx.Response:
        response = self.transport.handle_request(request)
        if not isinstance(response.stream, httpx.SyncByteStream):
            raise TypeError("the transport returned an async stream")
        response.request = request
        return response

    def close(self) -> None:
        self.transport.close()


def new_channel(max_connections: int, transport: httpx.BaseTransport | None) -> Channel:
    """A session's channel: over a shared pool `transport` (runtime/broker/connections.py)
    or a transport of its own that ends every socket operation at the call's deadline
    (runtime/broker/transport.py). Nothing but connections outlives the run."""
    return Channel(transport if transport is not None else DeadlineTransport(max_connections))


def send(channel: Channel, request: httpx.Request, timeout_s: float) -> Upstream:
    """Send `request`; every socket operation ends within `timeout_s` from now."""
    limit = time.monotonic() + timeout_s
    with call_deadline(limit):
        return _exchange(channel, request, limit)


def _exchange(channel: Channel, request: httpx.Request, limit: float) -> Upstream:
    try:
        response = channel.send(request)
    except Exception as exc:
        raise Fault(0, classify(exc)) from None
    try:
        status = response.status_code
        if not 100 <= status <= 599:
            raise Fault(status)
        framing = _Framing(response.headers.raw)
        declared = framing.declared_length(status)
        if declared is not None and declared > MAX_RESPONSE_BODY:
            raise Fault(status, Failure.TOO_LARGE)
        if framing.encoding not in (b"", b"identity"):
            # We asked for identity; compressed bytes are not what the guest can use,
            # and decompressing would let a small body grow past the cap.
            raise Fault(status)
        body = _read_capped(response, limit, status)
        return Upstream(
            status=status,
            body=body,
            content_type=framing.content_type(),
            retry_after=framing.retry_after,
            headers=framing.headers,
        )
    except Fault:
        raise
    except Exception as exc:
        raise Fault(response.status_code, classify(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            response.close()


class _Framing:
    """What the broker reads of a reply's headers, found in one pass over them as
    received (a header lookup by name would scan them again for each name)."""

    __slots__ = ("_lengths", "_types", "encoding", "headers", "retry_after")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._lengths: list[bytes] = []
        self._types: list[bytes] = []
        encodings: list[bytes] = []
        self.retry_after: str | None = None
        decoded = []
        for name, value in raw:
            low = name.lower()
            if low == b"content-length":
                self._lengths.append(value.strip())
            elif low == b"content-type":
                self._types.append(value)
            elif low == b"content-encoding":
                encodings.append(value)
            elif low == b"retry-after" and self.retry_after is None:
                self.retry_after = value.decode("latin-1")
            decoded.append((name.decode("latin-1"), value.decode("latin-1")))
        #: Content-Encoding, its headers joined as one list, lower case ("" for none).
        self.encoding = b", ".join(encodings).strip().lower()
        #: Every header (names as sent, values as Latin-1), in the order received.
        self.headers = tuple(decoded)

    def declared_length(self, status: int) -> int | None:
        """The Content-Length, None when there is none; a Fault when its headers
        disagree or one is not a number."""
        if not self._lengths:
            return None
        lengths = set(self._lengths)
        if len(lengths) != 1:
            raise Fault(status)
        (text,) = lengths
        if not text.isdigit():
            raise Fault(status)
        return int(text)

    def content_type(self) -> str:
        """The upstream Content-Type if it is one plain printable line, "" when there is
        none (the sandbox then hands the body on as text if it is UTF-8), else
        octet-stream."""
        if not self._types:
            return ""
        if len(self._types) != 1:
            return _OCTET
        value = self._types[0]
        if not value or len(value) > 256 or any(b < 0x20 or b >= 0x7F for b in value):
            return _OCTET
        return value.decode("ascii")


def _read_capped(response: httpx.Response, limit: float, status: int) -> bytes:
    """The body, read as it streams; never holds more than the cap plus one byte.

    A response a transport made from bytes it already held (httpx.MockTransport's,
    a test double's) arrives read: its bytes are taken as they are, under the same cap."""
    if response.is_stream_consumed:
        if len(response.content) > MAX_RESPONSE_BODY:
            raise Fault(status, Failure.TOO_LARGE)
        return response.content
    buf = bytearray()
    for chunk in response.iter_raw():
        room = MAX_RESPONSE_BODY + 1 - len(buf)
        buf += chunk[:room]
        if len(buf) > MAX_RESPONSE_BODY:
            raise Fault(status, Failure.TOO_LARGE)
        if time.monotonic() > limit:
            raise Fault(status, Failure.TIMEOUT)
    return bytes(buf)


__all__ = [
    "MAX_RESPONSE_BODY",
    "Channel",
    "Failure",
    "Fault",
    "Upstream",
    "classify",
    "new_channel",
    "send",
]
