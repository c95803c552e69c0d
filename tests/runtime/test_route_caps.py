"""Per-route caps (`route_max_calls`, as in the reference): validation texts, charging
against every matching cap all-or-nothing, case-insensitive keys, against a real API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import Broker, GrantsError, HostRequest, Profile
from runtime import load_grants as load
from runtime.broker import MAX_REQUEST_BODY
from tests.runtime.loopback import FakeAPI

CAPPED = (429, b"host api call budget for this route is exhausted\n")
PREFIX = 'grants: profile "p": '


def grant(tmp_path: Path, caps: object, allow: list[str], base_url: str) -> Path:
    profile = {
        "base_url": base_url,
        "allowed_callers": ["agent"],
        "allow": allow,
        "route_max_calls": caps,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": profile}}), "utf-8")
    return path


def loaded(tmp_path: Path, caps: object, allow: list[str], base_url: str) -> Profile:
    return load(grant(tmp_path, caps, allow, base_url), environ={}).profiles[0]


@pytest.mark.parametrize(
    ("caps", "allow", "expected"),
    [
        ({"POST /v1/other": 3}, ["POST /v1/remember"],
         'host-api grant: RouteMaxCalls names POST "/v1/other", which is not an entry of Allow'),
        ({"POST /v1/remember": 0}, ["POST /v1/remember"],
         'host-api grant: RouteMaxCalls for POST "/v1/remember" must be between 1 and 100000'),
        ({"POST /v1/remember": 100001}, ["POST /v1/remember"], "must be between 1 and 100000"),
        ({"POST /v1/remember": True}, ["POST /v1/remember"], "must be between 1 and 100000"),
        ({"POST /v1/remember": "3"}, ["POST /v1/remember"], "must be between 1 and 100000"),
        ({"POST": 3}, ["POST /v1/remember"], 'route_max_calls entry "POST" must be "METHOD /path"'),
        ({"POST v1": 3}, ["POST /v1/remember"], 'route_max_calls entry "POST v1": path must be absolute'),
        ([3], ["POST /v1/remember"], "route_max_calls must be an object"),
        ({"GET /v1/items/ep1": 3}, ["GET /v1/items/ep1", "GET /v1/items/*"],
         'host-api grant: RouteMaxCalls caps GET "/v1/items/ep1", but GET "/v1/items/*" matches '
         'its calls with a "*" in place of a fixed segment'),
        ({"GET /V1/items/ep1": 3}, ["GET /V1/items/ep1", "GET /v1/*/ep1"], 'but GET "/v1/*/ep1"'),
    ],
)  # fmt: skip
def test_validation_texts(tmp_path: Path, caps: object, allow: list[str], expected: str) -> None:
    with pytest.raises(GrantsError) as info:
        load(grant(tmp_path, caps, allow, "https://api.example"), environ={})
    message = str(info.value)
    assert message.startswith(PREFIX) and expected in message, message


def test_wider_route_of_another_method_or_shape_is_fine(tmp_path: Path) -> None:
    allow = ["GET /v1/items/ep1", "POST /v1/items/*", "GET /v1/items/*/x", "GET /v1/*"]
    p = loaded(tmp_path, {"get /v1/items/ep1": 2}, allow, "https://api.example")
    assert [(str(r), n) for r, n in p.route_caps.entries] == [("GET /v1/items/ep1", 2)]


def test_at_most_n_calls_then_429_and_nothing_sent(tmp_path: Path, api: FakeAPI) -> None:
    allow = ["POST /v1/remember", "POST /v1/recall"]
    p = loaded(tmp_path, {"POST /v1/remember": 3}, allow, api.url)
    with Broker(p) as b:
        got = [b(HostRequest("POST", "/v1/remember", b"{}")).status for _ in range(5)]
        other = b(HostRequest("POST", "/v1/recall", b"{}")).status
        out = b(HostRequest("POST", "/v1/remember", b"{}"))
        snap = b.close()
    assert got == [200, 200, 200, 429, 429] and other == 200
    assert (out.status, out.body) == CAPPED
    assert [s.path for s in api.requests].count("/v1/remember") == 3
    assert snap.denied == 3


def test_charged_against_every_matching_cap_all_or_nothing(tmp_path: Path, api: FakeAPI) -> None:
    # "/v1/items/*" capped at 3 and "/v1/items/a" capped at 1 - but a fixed segment
    # under a capped wildcard is exactly what the shadowing check refuses, so the
    # overlap comes from two wildcards in different places instead.
    allow = ["GET /v1/*/a", "GET /v1/items/*"]
    p = loaded(tmp_path, {"GET /v1/*/a": 1, "GET /v1/items/*": 3}, allow, api.url)
    with Broker(p) as b:
        first = b(HostRequest("GET", "/v1/items/a", None)).status  # charges both caps
        second = b(HostRequest("GET", "/v1/items/a", None)).status  # /v1/*/a full: refused
        # the refusal charged nothing: /v1/items/* still has 2 of 3 left
        rest = [b(HostRequest("GET", f"/v1/items/{n}", None)).status for n in ("b", "c", "d")]
    assert (first, second) == (200, 429)
    assert rest == [200, 200, 429]


def test_case_folded_spellings_share_one_counter(tmp_path: Path, api: FakeAPI) -> None:
    allow = ["POST /v1/remember", "POST /v1/Remember"]
    caps = {"POST /v1/remember": 2, "POST /v1/Remember": 1}
    p = loaded(tmp_path, caps, allow, api.url)
    with Broker(p) as b:
        got = [
            b(HostRequest("POST", path, b"{}")).status for path in ("/v1/Remember", "/v1/remember")
        ]
    # one counter with the tighter limit (1): the second spelling is refused
    assert got == [200, 429]
    assert len(api.requests) == 1


def test_each_run_gets_a_fresh_budget(tmp_path: Path, api: FakeAPI) -> None:
    p = loaded(tmp_path, {"POST /v1/remember": 1}, ["POST /v1/remember"], api.url)
    for _ in range(2):
        with Broker(p) as b:
            assert b(HostRequest("POST", "/v1/remember", b"{}")).status == 200
            assert b(HostRequest("POST", "/v1/remember", b"{}")).status == 429


def test_an_oversize_body_still_spends_a_capped_call(tmp_path: Path, api: FakeAPI) -> None:
    """The reference charges the cap before reading the body."""
    p = loaded(tmp_path, {"POST /v1/remember": 1}, ["POST /v1/remember"], api.url)
    with Broker(p) as b:
        assert b(HostRequest("POST", "/v1/remember", b"x" * (MAX_REQUEST_BODY + 1))).status == 413
        assert b(HostRequest("POST", "/v1/remember", b"{}")).status == 429
    assert api.requests == []
