"""The broker's upstream calls leave nothing in the operator's logs.

An `httpx.Client` logs every request's method and URL at INFO on the `httpx` logger,
path values and query included, so an operator who turned INFO on for their own code
would have written each call's values to their log. The broker sends straight to the
transport; this holds it to that with every logger at DEBUG.
"""

from __future__ import annotations

import logging

import httpx
import pytest

from runtime import Broker, HostRequest, Profile, Secret
from runtime.broker.upstream import MAX_RESPONSE_BODY
from specgen.routes import Route

VALUE = "path-value-7f3e9c"
KEY = "sk-live-upstream-logging-5b21"


def test_no_log_record_names_a_path_value_or_the_key(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    profile = Profile(
        name="logs",
        base_url="https://api.example.test",
        global_name="api",
        allowed_callers=("*",),
        allow=(Route("/items/*", "GET"),),
        token=Secret(KEY),
    )
    caplog.set_level(logging.DEBUG)
    with Broker(profile, transport=httpx.MockTransport(answer)) as broker:
        reply = broker(HostRequest("GET", f"/items/{VALUE}", None))
    assert reply.status == 200
    assert [r.url.path for r in seen] == [f"/items/{VALUE}"]  # the call did go out
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert VALUE not in logged
    assert KEY not in logged


@pytest.mark.parametrize(("size", "status"), [(11, 200), (MAX_RESPONSE_BODY + 1, 502)])
def test_a_response_made_from_bytes_is_delivered_under_the_same_cap(size: int, status: int) -> None:
    """httpx.MockTransport hands back responses already read; they were refused as
    malformed whatever their size, and are now held to the cap a streamed one is."""
    body = b"x" * size
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    profile = Profile(
        name="bytes",
        base_url="https://api.example.test",
        global_name="api",
        allowed_callers=("*",),
        allow=(Route("/items/*", "GET"),),
    )
    with Broker(profile, transport=transport) as broker:
        reply = broker(HostRequest("GET", "/items/1", None))
    assert reply.status == status
    assert (reply.body == body) is (status == 200)
