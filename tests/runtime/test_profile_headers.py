"""A profile's `headers` go on every call, the guest cannot change them, and a grant
that would let them collide with what the broker or the credential sets does not load.

Checked where it matters: on a real loopback API (what arrived), and through the real
loader (what an operator's file gets).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from runtime import Broker, GrantsError, HostRequest, Profile
from runtime import load_grants as load
from tests.runtime.loopback import FakeAPI, Seen, json_ok

KEY = "profile-hdr-key-3b9e5d21"
ENV = {"API_TOKEN": KEY}
GITHUB = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
}


def grant(tmp_path: Path, base_url: str = "https://api.example.com", **fields: Any) -> Profile:
    body: dict[str, Any] = {
        "base_url": base_url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN"},
        "allow": ["GET /v1/items/*", {"route": "GET /v1/search", "headers": ["X-Request-Id"]}],
    }
    body.update(fields)
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}))
    return load(path, environ=ENV).select("p", "agent")


def test_every_call_carries_the_profile_headers_and_a_user_agent(
    tmp_path: Path, api: FakeAPI
) -> None:
    with Broker(grant(tmp_path, api.url, headers=GITHUB)) as b:
        assert b(HostRequest("GET", "/v1/items/1")).status == 200
        structured = HostRequest("GET", "", route="/v1/search", headers=(("X-Request-Id", "r-1"),))
        assert b(structured).status == 200
    for seen in api.requests:
        assert seen.headers["accept"] == "application/vnd.github+json"  # replaced, not added
        assert seen.headers["x-github-api-version"] == "2022-11-28"
        assert seen.headers["user-agent"] == "plimsoll-specgen/" + version("plimsoll-specgen")
        assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert api.requests[1].headers["x-request-id"] == "r-1"


def test_a_profile_user_agent_replaces_the_default(tmp_path: Path, api: FakeAPI) -> None:
    sent: list[list[str]] = []

    def record(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        sent.append(handler.headers.get_all("User-Agent") or [])
        json_ok(handler, seen)

    api.responder = record
    headers = {"User-Agent": "acme-agent/2 (ops@acme.example)"}
    with Broker(grant(tmp_path, api.url, headers=headers)) as b:
        assert b(HostRequest("GET", "/v1/items/1")).status == 200
    assert sent == [["acme-agent/2 (ops@acme.example)"]]  # one, the operator's
    assert api.requests[0].headers["accept"] == "application/json"  # the default stays


@pytest.mark.parametrize("name", ["X-GitHub-Api-Version", "x-github-api-version", "User-Agent"])
def test_the_guest_cannot_change_or_remove_a_profile_header(
    tmp_path: Path, api: FakeAPI, name: str
) -> None:
    with Broker(grant(tmp_path, api.url, headers=GITHUB)) as b:
        call = HostRequest("GET", "", route="/v1/search", headers=((name, "1999-01-01"),))
        reply = b(call)
    assert (reply.status, reply.upstream) == (403, False)
    assert b"1999" not in reply.body  # the refusal never echoes what the guest sent
    assert api.requests == []


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Authorization": "Bearer other"}, 'headers "Authorization" is set by the broker'),
        ({"authorization": "x"}, 'headers "authorization" is set by the broker'),
        ({"Cookie": "a=b"}, 'headers "Cookie" is set by the broker'),
        ({"Host": "evil.example"}, 'headers "Host" is set by the broker'),
        ({"Content-Type": "text/plain"}, 'headers "Content-Type" is set by the broker'),
        ({"Content-Language": "en"}, 'headers "Content-Language" is set by the broker'),
        ({"Transfer-Encoding": "chunked"}, 'headers "Transfer-Encoding" is set by the broker'),
        ({"Connection": "close"}, 'headers "Connection" is set by the broker'),
        ({"Proxy-Authorization": "x"}, 'headers "Proxy-Authorization" is set by the broker'),
        ({"X-Forwarded-For": "1.2.3.4"}, 'headers "X-Forwarded-For" is set by the broker'),
        ({"Accept-Encoding": "gzip"}, 'headers "Accept-Encoding" is set by the broker'),
        ({"X-A": "one\r\nX-B: two"}, 'headers "X-A" value "one\\r\\nX-B: two" must be printable'),
        ({"X-A": "a\nb"}, "must be printable ASCII"),
        ({"X-A": "a\u0000b"}, "must be printable ASCII"),
        ({"X-A": "caf\u00e9"}, "must be printable ASCII"),
        ({"X-A": 5}, 'headers "X-A" must be a string'),
        ({"X-A": None}, 'headers "X-A" must be a string'),
        ({"X-A": ""}, 'headers "X-A" value is empty'),
        ({"X-A": " v"}, "surrounding whitespace"),
        ({"X-A": "v" * 5000}, "longer than 4096 bytes"),
        ({"Bad Name": "v"}, 'headers name "Bad Name" is not an HTTP field name'),
        ({"X\r\nY": "v"}, 'headers name "X\\r\\nY" is not an HTTP field name'),
        ({"X-A": "1", "x-a": "2"}, 'headers "x-a" is given twice'),
        (["X-A: 1"], "headers must be an object"),
    ],
)
def test_a_bad_profile_header_is_refused_in_one_line(
    tmp_path: Path, headers: Any, message: str
) -> None:
    with pytest.raises(GrantsError) as err:
        grant(tmp_path, headers=headers)
    line = str(err.value)
    assert "\n" not in line and "\r" not in line and line.startswith('grants: profile "p": ')
    assert message in line, line


def test_the_token_blocks_own_header_is_refused(tmp_path: Path) -> None:
    token = {"type": "static", "env": "API_TOKEN", "header": "X-API-Key"}
    with pytest.raises(GrantsError, match='headers "x-api-key" is set by the broker'):
        grant(tmp_path, token=token, headers={"x-api-key": "mine"})


def test_an_allow_entry_may_not_list_a_profile_header(tmp_path: Path) -> None:
    allow = [{"route": "GET /v1/search", "headers": ["x-github-api-version"]}]
    with pytest.raises(GrantsError) as err:
        grant(tmp_path, allow=allow, headers=GITHUB)
    assert str(err.value) == (
        'grants: profile "p": allow entry "GET /v1/search" lists header '
        '"x-github-api-version", which the profile\'s headers set for every call'
    )


def test_a_profile_without_headers_still_loads_and_sends_the_defaults(
    tmp_path: Path, api: FakeAPI
) -> None:
    with Broker(grant(tmp_path, api.url)) as b:
        assert b(HostRequest("GET", "/v1/items/1")).status == 200
    seen = api.requests[0].headers
    assert seen["accept"] == "application/json"
    assert seen["user-agent"].startswith("plimsoll-specgen/")
