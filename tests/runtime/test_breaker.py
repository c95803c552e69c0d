"""The backpressure breaker and health probe (as in the reference).

Retry-After parsing and the window logic run on an injected clock (no sleeping); the
broker tests run against a real loopback API that answers 429/503 with Retry-After, so
"shed calls never reach the API" is counted where they would have landed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler

import pytest

from runtime import Broker, HostRequest, Profile
from runtime.broker.breaker import (
    DEFAULT_COOLDOWN_S,
    MAX_COOLDOWN_S,
    Breaker,
    cooldown,
)
from specgen.routes import Route
from tests.runtime.loopback import FakeAPI, Seen, profile

NOW = 1_800_000_000.0
SHED = (503, b"host api is shedding load: upstream reported degraded\n")


def wall() -> float:
    return NOW


def http_date(offset_s: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + offset_s, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 1.0),
        ("", 1.0),
        ("5", 5.0),
        ("  7 ", 7.0),
        ("+4", 4.0),
        ("-3", 1.0),
        ("0", 1.0),
        ("30", 30.0),
        ("31", 30.0),
        ("99999999999999999999999999", 30.0),
        ("soon", 1.0),
        ("1.5", 1.0),
        ("٣", 1.0),  # an Arabic-Indic digit is a digit to str.isdigit, not to HTTP
        (http_date(12), 12.0),
        (http_date(-60), 1.0),
        (http_date(3600), 30.0),
        ("Wed, 21 Oct 2015 07:28:00", 1.0),  # no zone: not an HTTP date
    ],
)
def test_retry_after_parsing(header: str | None, seconds: float) -> None:
    assert cooldown(header, wall=wall) == pytest.approx(seconds, abs=0.01)
    assert DEFAULT_COOLDOWN_S <= cooldown(header, wall=wall) <= MAX_COOLDOWN_S


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_closed_until_429_or_503_and_closes_by_itself() -> None:
    clock = Clock()
    b = Breaker(clock=clock, wall=wall)
    for status in (200, 404, 500, 502, 504):
        b.observe(status, "30")
        assert b.admit(None)
    b.observe(503, "3")
    assert not b.admit(None)
    clock.t += 2.9
    assert not b.admit(None)
    clock.t += 0.1
    assert b.admit(None) and not b.is_open


def test_window_end_is_the_later_one() -> None:
    clock = Clock()
    b = Breaker(clock=clock, wall=wall)
    b.observe(503, "10")
    clock.t += 1
    b.observe(503, "2")  # would end earlier: the longer window stands
    clock.t += 8.5
    assert not b.admit(None)
    clock.t += 0.5
    assert b.admit(None)


def test_quota_window_is_never_probed_even_if_a_503_extends_it() -> None:
    clock = Clock()
    probes: list[int] = []

    def probe() -> tuple[int, str | None]:
        probes.append(1)
        return 200, None

    b = Breaker(clock=clock, wall=wall)
    b.observe(429, "5")
    b.observe(503, "8")
    for _ in range(8):
        assert not b.admit(probe)
        clock.t += 1
    assert probes == []
    clock.t += 0.1
    assert b.admit(probe) and probes == []  # lapsed: closed without a probe


def test_probe_2xx_clears_and_the_call_proceeds() -> None:
    clock = Clock()
    b = Breaker(clock=clock, wall=wall)
    b.observe(503, "20")
    assert b.admit(lambda: (204, None))
    assert not b.is_open


def test_failed_probe_reopens_with_its_retry_after_and_waits_a_second() -> None:
    clock = Clock()
    answers = [(503, "6"), (200, None)]
    probes: list[float] = []

    def probe() -> tuple[int, str | None]:
        probes.append(clock.t)
        return answers.pop(0)

    b = Breaker(clock=clock, wall=wall)
    b.observe(503, "2")
    assert not b.admit(probe)  # probe 1: 503, window now ends at +6
    clock.t += 0.5
    assert not b.admit(probe)  # less than 1 s since the last probe: shed, no probe
    assert len(probes) == 1
    clock.t += 0.5
    assert b.admit(probe)  # probe 2: 200
    assert probes == [100.0, 101.0]


def test_a_probe_that_raises_counts_as_no_reply() -> None:
    clock = Clock()
    b = Breaker(clock=clock, wall=wall)
    b.observe(503, None)

    def boom() -> tuple[int, str | None]:
        raise OSError("down")

    assert not b.admit(boom)


# -- the broker against a loopback API ---------------------------------------------------

KEY = "breaker-key-7d21"


class Script:
    """A loopback API whose /v1 routes answer what the test queues; /health likewise."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[int, str | None]] = []
        self.health: list[tuple[int, str | None]] = []

    def __call__(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        with self.lock:
            queue = self.health if seen.path == "/health" else self.calls
            status, retry = queue.pop(0) if queue else (200, None)
        body = b'{"ok":true}'
        handler.send_response(status)
        if retry is not None:
            handler.send_header("Retry-After", retry)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def upstream(script: Script):  # type: ignore[no-untyped-def]
    api = FakeAPI(responder=script)
    yield api
    api.close()


def grant(url: str, health: bool) -> Profile:
    p = profile(url, KEY, ("GET /v1/items/*",))
    if health:
        import dataclasses

        p = dataclasses.replace(p, health_check=Route(path="/health", method="GET"))
    return p


def get(b: Broker) -> tuple[int, bytes]:
    out = b(HostRequest("GET", "/v1/items/x", None))
    return out.status, out.body


@pytest.mark.parametrize("status", [429, 503])
def test_delivered_429_or_503_sheds_the_next_calls(
    upstream: FakeAPI, script: Script, status: int
) -> None:
    clock = Clock()
    script.calls = [(status, "3")]
    b = Broker(grant(upstream.url, health=False), clock=clock)
    assert get(b)[0] == status  # the guest still gets the upstream's reply
    for _ in range(5):
        assert get(b) == SHED
    clock.t += 3
    assert get(b)[0] == 200
    snap = b.close()
    assert len(upstream.requests) == 2  # the five shed calls never left the broker
    assert (snap.shed, snap.denied, len(snap.rows)) == (5, 0, 2)
    assert snap.to_dict()["shed"] == 5


def test_health_probe_recovers_a_503_window(upstream: FakeAPI, script: Script) -> None:
    clock = Clock()
    script.calls = [(503, "30")]
    script.health = [(503, "5"), (200, None)]
    b = Broker(grant(upstream.url, health=True), clock=clock)
    assert get(b)[0] == 503
    assert get(b) == SHED  # probe 1 says 503
    assert get(b) == SHED  # within a second of the probe: no probe, shed
    clock.t += 1
    assert get(b) == (200, b'{"ok":true}')  # probe 2 says 200: this call proceeds
    snap = b.close()
    paths = [s.path for s in upstream.requests]
    assert paths == ["/v1/items/x", "/health", "/health", "/v1/items/x"]
    probe = upstream.requests[1]
    assert probe.method == "GET" and probe.headers["authorization"] == f"Bearer {KEY}"
    assert probe.headers["accept"] == "application/json"
    # probes are neither recorded nor charged
    assert [r.route for r in snap.rows] == ["/v1/items/*", "/v1/items/*"]
    assert snap.shed == 2 and b.calls == 4


def test_quota_429_is_not_probed(upstream: FakeAPI, script: Script) -> None:
    clock = Clock()
    script.calls = [(429, "2")]
    b = Broker(grant(upstream.url, health=True), clock=clock)
    assert get(b)[0] == 429
    for _ in range(3):
        clock.t += 0.6
        assert get(b) == SHED
    b.close()
    assert [s.path for s in upstream.requests] == ["/v1/items/x"]


def test_undelivered_503_does_not_open(upstream: FakeAPI, script: Script) -> None:
    """Only a reply the guest received opens the breaker (a reflected key is a 502)."""
    clock = Clock()

    def reflect(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        body = KEY.encode()
        handler.send_response(503)
        handler.send_header("Retry-After", "30")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    upstream.responder = reflect
    b = Broker(grant(upstream.url, health=False), clock=clock)
    assert get(b)[0] == 502
    upstream.responder = script
    assert get(b)[0] == 200
    b.close()


def test_refused_calls_are_not_shed(upstream: FakeAPI, script: Script) -> None:
    """The allow check comes first: an ungranted call is 403 even while shedding."""
    clock = Clock()
    script.calls = [(503, "10")]
    b = Broker(grant(upstream.url, health=False), clock=clock)
    get(b)
    assert b(HostRequest("GET", "/admin", None)).status == 403
    snap = b.close()
    assert (snap.denied, snap.shed) == (1, 0)
