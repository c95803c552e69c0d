"""Request-rewrite headers never reach the API, however a profile came to list one.

`X-HTTP-Method-Override: DELETE` on a permitted POST makes many frameworks run a DELETE
(and `X-Original-URL` / `X-Rewrite-URL` another path) behind the broker's allow match.
The grants loader refuses such an entry (tests/runtime/test_grants.py); this holds the
broker to the same list for a Profile built in code, which skips the loader.
"""

from __future__ import annotations

import dataclasses

import pytest

from runtime import Broker, HostRequest
from specgen.allow import AllowEntry, Permit
from specgen.routes import parse_route_line
from tests.runtime.loopback import FakeAPI, profile

KEY = "sk-rewrite-0123456789abcdef"
REWRITE = [
    "X-HTTP-Method-Override",
    "X-HTTP-Method",
    "X-Method-Override",
    "X-Original-URL",
    "X-Rewrite-URL",
]


@pytest.mark.parametrize("header", REWRITE)
@pytest.mark.parametrize("pinned", [True, False])
def test_a_rewrite_header_in_a_hand_built_entry_is_never_sent(
    api: FakeAPI, header: str, pinned: bool
) -> None:
    route = parse_route_line("POST /items")
    permit = Permit(header, "DELETE" if pinned else None)
    granted = dataclasses.replace(
        profile(api.url, KEY, ("POST /items",)), entries=(AllowEntry(route, headers=(permit,)),)
    )
    given = () if pinned else ((header, "DELETE"),)
    broker = Broker(granted)
    try:
        reply = broker(HostRequest("POST", "", b"{}", route="/items", headers=given))
    finally:
        snapshot = broker.close()
    assert reply.status == 403
    assert api.requests == []
    assert snapshot.denied == 1
