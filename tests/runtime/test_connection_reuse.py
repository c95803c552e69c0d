"""Runs of one profile in one process share keep-alive connections, and nothing else.

The witness is a real HTTP/1.1 server on 127.0.0.1 that records each request's client
port: one port is one TCP connection the server accepted.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from runtime import Broker, HostRequest, run_profile
from runtime.broker import connections
from tests.runtime.loopback import FakeAPI, Seen, chunked, hang, json_ok, profile

KEY = "connection-reuse-test-key-0123456789"
CALL = HostRequest("GET", "/v1/items/a", None)


@pytest.fixture(autouse=True)
def _no_pools() -> Iterator[None]:
    connections.close_all()
    yield
    connections.close_all()


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _connections(api: FakeAPI) -> int:
    return len({seen.peer for seen in api.requests})


def test_the_second_runs_call_reuses_the_first_runs_connection(api: FakeAPI) -> None:
    grant = profile(api.url, KEY, ("GET /v1/items/*",))
    for _ in range(2):
        outcome = run_profile("await host.get('/v1/items/a'); print('ok')", grant, caller="tests")
        assert outcome.result.stdout == "ok\n", outcome.result.stderr
    assert len(api.requests) == 2
    assert _connections(api) == 1
    # Each request still carries the run's own headers, the key among them.
    assert [s.headers["authorization"] for s in api.requests] == [f"Bearer {KEY}"] * 2


def test_a_reloaded_grant_gets_new_connections(api: FakeAPI) -> None:
    first = profile(api.url, KEY, ("GET /v1/items/*",))
    with Broker(first) as broker:
        assert broker(CALL).status == 200
    reloaded = dataclasses.replace(first, max_calls=first.max_calls + 1)  # same name
    with Broker(reloaded) as broker:
        assert broker(CALL).status == 200
    with Broker(reloaded) as broker:
        assert broker(CALL).status == 200
    assert len(api.requests) == 3
    assert _connections(api) == 2  # the reload closed the first pool; then reuse again


def test_profiles_do_not_share_connections(api: FakeAPI) -> None:
    for name in ("one", "two"):
        with Broker(profile(api.url, KEY, ("GET /v1/items/*",), name=name)) as broker:
            assert broker(CALL).status == 200
    assert _connections(api) == 2


def test_another_base_url_keeps_its_own_pool_beside_the_first() -> None:
    apis = [FakeAPI(), FakeAPI()]
    try:
        grant = profile(apis[0].url, KEY, ("GET /v1/items/*",))
        elsewhere = dataclasses.replace(grant, base_url=apis[1].url)
        for each in (grant, elsewhere, grant, elsewhere):
            with Broker(each) as broker:
                assert broker(CALL).status == 200
        assert [len(a.requests) for a in apis] == [2, 2]
        assert [_connections(a) for a in apis] == [1, 1]
    finally:
        for a in apis:
            a.close()


def test_a_transport_given_by_the_caller_is_used_alone(api: FakeAPI) -> None:
    grant = profile(api.url, KEY, ("GET /v1/items/*",))
    with Broker(grant) as broker:
        assert broker(CALL).status == 200
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={})

    with Broker(grant, transport=httpx.MockTransport(handler)) as broker:
        broker(CALL)
    assert seen == [api.url + "/v1/items/a"] and len(api.requests) == 1


def test_ending_one_run_ends_its_own_calls_only() -> None:
    """Two runs of one profile, a call of each on the wire at once over the shared pool:
    ending the first run cuts its call off and leaves the other's to be answered."""
    events: list[str] = []
    on_the_wire = threading.Barrier(3, timeout=10)
    first_ended = threading.Event()

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        on_the_wire.wait()
        if seen.path == "/v1/items/hang":
            hang(events, seconds=10)(handler, seen)
        else:
            first_ended.wait(10)
            json_ok(handler, seen)

    api = FakeAPI(responder=respond)
    try:
        grant = profile(api.url, KEY, ("GET /v1/items/*",))
        first, second = Broker(grant), Broker(grant)
        replies: dict[str, int] = {}

        def call(name: str, broker: Broker, path: str) -> None:
            replies[name] = broker(HostRequest("GET", path, None)).status

        threads = [
            threading.Thread(target=call, args=("first", first, "/v1/items/hang")),
            threading.Thread(target=call, args=("second", second, "/v1/items/a")),
        ]
        for t in threads:
            t.start()
        on_the_wire.wait()  # both requests reached the server
        first.close()
        first_ended.set()
        for t in threads:
            t.join(10)
        second.close()
        # the first run's call was cut off by its end: 503, as docs/upstream-failures.md says
        assert replies == {"first": 503, "second": 200}
        assert events == ["client left"]
        assert _connections(api) == 2
    finally:
        api.close()


def test_a_forked_child_starts_without_the_parents_connections(api: FakeAPI) -> None:
    import os

    with Broker(profile(api.url, KEY, ("GET /v1/items/*",))) as broker:
        assert broker(CALL).status == 200
    assert connections._pools  # the parent keeps its pool
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.write(write, str(len(connections._pools)).encode())
        os._exit(0)
    os.close(write)
    held = os.read(read, 16)
    os.close(read)
    os.waitpid(child, 0)
    assert held == b"0"


def test_a_reply_not_read_to_its_end_is_not_left_for_the_next_run() -> None:
    big = chunked(5 << 20)  # past the broker's 4 MiB cap: the broker stops reading

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        (big if seen.path == "/v1/items/big" else json_ok)(handler, seen)

    api = FakeAPI(responder=respond)
    try:
        grant = profile(api.url, KEY, ("GET /v1/items/*",))
        with Broker(grant) as broker:
            assert broker(HostRequest("GET", "/v1/items/big", None)).status == 502
        with Broker(grant) as broker:
            assert broker(CALL).status == 200
        assert _connections(api) == 2
    finally:
        api.close()
