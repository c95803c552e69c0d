"""The broker: the only code that decides a guest's host call and the only holder of the key.

One `Broker` is one session, i.e. one run. The sandbox calls it once per guest host call
(it is a `runtime.hostapi.HostHandler`) and blocks the guest until it answers. Each call
goes through the reference's checks in the reference's order, and only a call that
passed all of them is sent, on a request built here from nothing the guest controls
except the approved path and the body bytes: fixed headers, the operator's origin, and
`Authorization: Bearer <key>` added last. Refusals never reach the API.

The key is revealed in exactly one place, `_headers`, after approval. No reply to the
guest, trace row or error text is derived from it, and no exception text from the HTTP
stack (which could name the URL) is ever shown to the guest. An upstream reply that
carries the key back verbatim (an echo endpoint, a debug page reflecting the
Authorization header) is not delivered: the guest gets 502 instead.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import threading
import time
from dataclasses import dataclass

import httpx

from runtime.deadline_transport import DeadlineTransport, call_deadline
from runtime.grants import Profile
from runtime.hostapi import HostReply
from runtime.trace import CallTrace, TraceSnapshot
from specgen.routes import METHODS, Route, first_match

#: Calls that may be in flight at once in one session.
MAX_IN_FLIGHT = 16
#: Largest request body forwarded upstream (bytes).
MAX_REQUEST_BODY = 1 << 20
#: Largest response body returned to the guest (bytes); larger is a 502, never truncated.
MAX_RESPONSE_BODY = 4 << 20
#: Time allowed for one upstream call, headers and body together (seconds).
UPSTREAM_TIMEOUT_S = 60.0
#: How long ending a session waits for calls still in flight (seconds).
END_GRACE_S = 2.0

MSG_ENDED = "host api grant has ended"
MSG_CAPACITY = "host api broker is at capacity"
MSG_BUDGET = "host api call budget for this run is exhausted"
MSG_FORBIDDEN = "forbidden by sandbox capability allowlist"
MSG_TOO_LARGE = "host api request body too large"
MSG_UPSTREAM = "host api unavailable"

_TEXT = "text/plain; charset=utf-8"
_OCTET = "application/octet-stream"


def refusal(status: int, message: str) -> HostReply:
    """A broker-made reply: fixed text plus newline, never upstream bytes."""
    return HostReply(status=status, body=(message + "\n").encode("ascii"), content_type=_TEXT)


@dataclass(frozen=True)
class _Upstream:
    """What came back from one upstream call, before it is turned into a reply."""

    status: int
    body: bytes
    content_type: str


class _Fault(Exception):
    """The upstream call failed; `status` is the upstream status if one arrived, else 0."""

    def __init__(self, status: int = 0) -> None:
        super().__init__(status)
        self.status = status


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing: no upstream Set-Cookie ever goes back as a Cookie."""

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        pass

    def extract_cookies(self, response: object, request: object) -> None:
        pass


class Broker:
    """One run's session: a fresh HTTP client, budget, slots and trace.

    Build it just before the guest starts and `close()` it when the run ends; after
    that every call gets 503 `host api grant has ended`. `deadline` is the run's end on
    the `time.monotonic()` clock: no upstream call outlives it.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        deadline: float | None = None,
        upstream_timeout_s: float = UPSTREAM_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._profile = profile
        self._allow: tuple[Route, ...] = profile.allow
        self._origin = httpx.URL(profile.base_url)
        self._budget = profile.max_calls
        self._deadline = deadline
        self._timeout_s = upstream_timeout_s
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._lock = threading.Lock()
        self._calls = 0
        self._ended = False
        self.trace = CallTrace()
        # Fresh per session: no connection, cookie or header outlives the run.
        # trust_env=False ignores HTTP(S)_PROXY/NETRC; redirects are returned, not followed,
        # so the Authorization header can never be replayed to a Location's origin; the
        # jar keeps no cookie, so no header but ours is sent; the default transport ends
        # every socket operation at the call's deadline (runtime/deadline_transport.py).
        self._client = httpx.Client(
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(upstream_timeout_s),
            transport=transport if transport is not None else DeadlineTransport(MAX_IN_FLIGHT),
            cookies=_NoCookies(),
        )
        # httpx adds its own defaults (Accept: */*, compression, a User-Agent); the
        # request carries only the headers this module sets.
        self._client.headers.clear()

    # -- the HostHandler --------------------------------------------------------------

    def __call__(self, method: str, path: str, body: bytes | None) -> HostReply:
        if self._ended or self._expired():
            self.trace.deny()
            return refusal(503, MSG_ENDED)
        if not self._slots.acquire(blocking=False):
            self.trace.deny()
            return refusal(429, MSG_CAPACITY)
        try:
            return self._decide(method, path, body)
        finally:
            self._slots.release()

    def _decide(self, method: str, path: str, body: bytes | None) -> HostReply:
        with self._lock:
            self._calls += 1
            over_budget = self._calls > self._budget
        if over_budget:
            self.trace.deny()
            return refusal(429, MSG_BUDGET)

        route = self._approve(method, path)
        if route is None:
            self.trace.deny()
            return refusal(403, MSG_FORBIDDEN)

        if body is not None and not isinstance(body, bytes | bytearray | memoryview):
            # Not what the HostHandler contract promises; forwarding a guess would send
            # bytes nobody approved.
            self.trace.deny()
            return refusal(403, MSG_FORBIDDEN)
        payload = bytes(body) if body is not None else b""
        if len(payload) > MAX_REQUEST_BODY:
            self.trace.deny()
            return refusal(413, MSG_TOO_LARGE)

        try:
            request = self._build(route.method, path, payload)
        except Exception:
            request = None
        if request is None:
            self.trace.deny()
            return refusal(403, MSG_FORBIDDEN)

        if self._ended or self._expired():
            self.trace.deny()
            return refusal(503, MSG_ENDED)

        started = time.monotonic()
        up: _Upstream | None
        try:
            up = self._send(request)
            status = up.status
        except _Fault as fault:
            up, status = None, fault.status
        delivered = up is not None and not self._reflects_key(up.body)
        self.trace.record(
            route,
            status=status,
            delivered=delivered,
            bytes_sent=len(payload),
            bytes_back=len(up.body) if up is not None and delivered else 0,
            latency_s=time.monotonic() - started,
        )
        if up is None or not delivered:
            return refusal(502, MSG_UPSTREAM)
        return HostReply(status=up.status, body=up.body, content_type=up.content_type)

    # -- the checks -------------------------------------------------------------------

    def _approve(self, method: object, path: object) -> Route | None:
        """The allow entry admitting this call, or None to refuse it.

        The method must be one of the five verbs in ASCII letters: `str.upper()` maps
        some non-ASCII letters onto ASCII ones (`"poſt".upper() == "POST"`), and a verb
        spelled that way is not one the operator wrote.
        """
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        if not method.isascii() or method.upper() not in METHODS:
            return None
        return first_match(self._allow, method.upper(), path)

    def _build(self, method: str, path: str, payload: bytes) -> httpx.Request | None:
        """The upstream request, or None when its wire form is not what was approved."""
        url = httpx.URL(self._profile.base_url + path)
        if (
            url.raw_path != path.encode("ascii")
            or url.query
            or url.fragment
            or url.scheme != self._origin.scheme
            or url.host != self._origin.host
            or url.port != self._origin.port
            or url.userinfo
        ):
            return None
        request = self._client.build_request(
            method,
            url,
            headers=self._headers(bool(payload)),
            content=payload if payload else None,
            timeout=httpx.Timeout(self._call_timeout()),
        )
        if request.url.raw_path != path.encode("ascii") or request.method != method:
            return None
        return request

    def _headers(self, has_body: bool) -> list[tuple[str, str]]:
        headers = [("Accept", "application/json"), ("Accept-Encoding", "identity")]
        if has_body:
            headers.append(("Content-Type", "application/json"))
        token = self._profile.token
        if token is not None:
            headers.append(("Authorization", "Bearer " + token.reveal()))
        return headers

    def _reflects_key(self, body: bytes) -> bool:
        """Does the reply hold the key as sent, or as a JSON string would escape it?"""
        token = self._profile.token
        if token is None:
            return False
        key = token.reveal()
        escaped = json.dumps(key)[1:-1]
        forms = {key, escaped, escaped.replace("/", "\\/")}
        return any(form.encode("utf-8") in body for form in forms)

    # -- the upstream call ------------------------------------------------------------

    def _send(self, request: httpx.Request) -> _Upstream:
        limit = time.monotonic() + self._call_timeout()
        with call_deadline(limit):
            return self._exchange(request, limit)

    def _exchange(self, request: httpx.Request, limit: float) -> _Upstream:
        try:
            response = self._client.send(request, stream=True)
        except Exception:
            raise _Fault(0) from None
        try:
            status = response.status_code
            if not 100 <= status <= 599:
                raise _Fault(status)
            declared = _declared_length(response)
            if declared is not None and declared > MAX_RESPONSE_BODY:
                raise _Fault(status)
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                # We asked for identity; compressed bytes are not what the guest can use,
                # and decompressing would let a small body grow past the cap.
                raise _Fault(status)
            body = _read_capped(response, limit, status)
            return _Upstream(status=status, body=body, content_type=_content_type(response))
        except _Fault:
            raise
        except Exception:
            raise _Fault(response.status_code) from None
        finally:
            with contextlib.suppress(Exception):
                response.close()

    def _call_timeout(self) -> float:
        if self._deadline is None:
            return self._timeout_s
        return max(0.001, min(self._timeout_s, self._deadline - time.monotonic()))

    def _expired(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> TraceSnapshot:
        """End the session: refuse every later call, let in-flight ones finish briefly."""
        self._ended = True
        waited: list[bool] = []
        stop = time.monotonic() + END_GRACE_S
        for _ in range(MAX_IN_FLIGHT):
            waited.append(self._slots.acquire(timeout=max(0.0, stop - time.monotonic())))
        try:
            self._client.close()
        finally:
            for got in waited:
                if got:
                    self._slots.release()
        return self.trace.snapshot()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def calls(self) -> int:
        """Calls counted against the budget so far (denied ones included)."""
        return self._calls

    def __repr__(self) -> str:
        return f"Broker(profile={self._profile.name!r}, calls={self._calls})"


def _declared_length(response: httpx.Response) -> int | None:
    values = response.headers.get_list("content-length")
    if not values:
        return None
    lengths = {v.strip() for v in values}
    if len(lengths) != 1:
        raise _Fault(response.status_code)
    (text,) = lengths
    if not text.isdigit():
        raise _Fault(response.status_code)
    return int(text)


def _read_capped(response: httpx.Response, limit: float, status: int) -> bytes:
    """The body, read as it streams; never holds more than the cap plus one byte."""
    buf = bytearray()
    for chunk in response.iter_raw():
        room = MAX_RESPONSE_BODY + 1 - len(buf)
        buf += chunk[:room]
        if len(buf) > MAX_RESPONSE_BODY or time.monotonic() > limit:
            raise _Fault(status)
    return bytes(buf)


def _content_type(response: httpx.Response) -> str:
    """The upstream Content-Type if it is one plain printable line, else octet-stream."""
    raw = [v for k, v in response.headers.raw if k.lower() == b"content-type"]
    if len(raw) != 1:
        return _OCTET
    value = raw[0]
    if not value or len(value) > 256 or any(b < 0x20 or b >= 0x7F for b in value):
        return _OCTET
    return value.decode("ascii")
