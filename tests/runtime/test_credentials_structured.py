"""Credentials meet structured calls.

A query key is the broker's: it is appended after the entry's own query, never set or
displaced by the guest or by an allow entry that lists its name. A route cap and the
breaker decide structured calls as they decide raw ones. respx counts what reaches the API.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
import respx

from runtime import Broker, HostRequest, Profile
from runtime.broker.caps import check_caps, parse_cap_lines
from runtime.broker.token_block import QueryKey, Secret
from specgen.allow import parse_entry

KEY = "query-key+/=-structured-5d1e"
ORIGIN = "https://api.internal"
FORBIDDEN = b"forbidden by sandbox capability allowlist\n"


def profile(*entries: Any, caps: dict[str, int] | None = None) -> Profile:
    parsed = tuple(parse_entry(e) for e in entries)
    allow = tuple(e.route for e in parsed)
    secret = Secret(KEY)
    base = Profile(
        name="p",
        base_url=ORIGIN,
        global_name="host",
        allowed_callers=("*",),
        allow=allow,
        entries=parsed,
        token_env="K",
        token=secret,
        credential=QueryKey(env="K", secret=secret, param="api_key"),
    )
    if caps:
        base = replace(base, route_caps=check_caps(parse_cap_lines(caps), allow))
    return base


def call(route: str, values: tuple[str, ...] = (), **query: Any) -> HostRequest:
    return HostRequest("GET", "", None, route=route, values=values, query=tuple(query.items()))


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=ORIGIN, assert_all_called=False) as router:
        router.route().mock(return_value=httpx.Response(200, json={"ok": True}))
        yield router


def test_the_key_follows_the_entrys_query(api: respx.MockRouter) -> None:
    broker = Broker(profile("GET /v1/items/*?state=open&q"))
    reply = broker(call("/v1/items/*", ("a b",), q="x&api_key=guest"))
    assert reply.status == 200
    sent = api.calls.last.request
    assert sent.url.path == "/v1/items/a b"
    assert parse_qsl(sent.url.query.decode()) == [
        ("state", "open"),
        ("q", "x&api_key=guest"),
        ("api_key", KEY),
    ]
    row = broker.close().rows[0]
    assert "api_key" not in row.params and KEY not in repr(row)


@pytest.mark.parametrize("name", ["api_key", "API_KEY", "Api_Key"])
def test_the_guest_cannot_send_the_keys_name(api: respx.MockRouter, name: str) -> None:
    broker = Broker(profile("GET /v1/items?q", f"GET /v1/other?{name}"))
    for request in (call("/v1/items", **{name: "mine"}), call("/v1/other", **{name: "mine"})):
        reply = broker(request)
        # the guest's own name, as a parameter the grant does not let it send
        assert (reply.status, reply.body) == (403, f"parameter not granted: {name}\n".encode())
    assert api.calls.call_count == 0


def test_an_entry_that_pins_the_keys_name_is_refused(api: respx.MockRouter) -> None:
    broker = Broker(profile("GET /v1/items?api_key=operator-pin"))
    reply = broker(call("/v1/items"))
    assert (reply.status, reply.body) == (403, FORBIDDEN)
    assert api.calls.call_count == 0


def test_a_route_cap_counts_structured_calls(api: respx.MockRouter) -> None:
    broker = Broker(profile("GET /v1/items/*?q", caps={"GET /v1/items/*": 2}))
    statuses = [broker(call("/v1/items/*", (str(i),), q="x")).status for i in range(3)]
    assert statuses == [200, 200, 429]
    assert api.calls.call_count == 2
    assert broker.close().denied == 1


@pytest.mark.parametrize(
    ("entry", "route", "values"),
    [
        ("GET /v1/items/*", "/v1/items/*", ("a", "c d", "é", "x@y")),
        ("GET /v1/files/*.json", "/v1/files/*.json", ("a", "b c", "%", "ü")),
    ],
)
def test_a_route_cap_counts_values_that_need_encoding(
    api: respx.MockRouter, entry: str, route: str, values: tuple[str, ...]
) -> None:
    """Found by an adversarial review: the cap matched only canonical paths, so a value
    sent percent-encoded ("c d" as c%20d) went out uncharged, past a cap of 1."""
    broker = Broker(profile(entry, caps={entry: 1}))
    statuses = [broker(call(route, (v,))).status for v in values]
    assert statuses == [200, 429, 429, 429]
    assert api.calls.call_count == 1


def test_a_503_sheds_the_next_structured_call(api: respx.MockRouter) -> None:
    api.routes.clear()
    api.route().mock(return_value=httpx.Response(503, headers={"Retry-After": "5"}))
    now = [100.0]
    broker = Broker(profile("GET /v1/items/*"), clock=lambda: now[0])
    assert broker(call("/v1/items/*", ("a",))).status == 503
    shed = broker(call("/v1/items/*", ("b",)))
    assert shed.body == b"host api is shedding load: upstream reported degraded\n"
    assert api.calls.call_count == 1
    now[0] += 6
    assert broker(call("/v1/items/*", ("c",))).status == 503
    assert api.calls.call_count == 2
    assert broker.close().to_dict()["shed"] == 1
