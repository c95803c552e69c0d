"""Response headers reach agent code only as the grant lists them, end to end.

A real loopback API answers with the headers a real one sends (GitHub's `Link`, `ETag`,
`X-RateLimit-*`), the ones no grant may forward (`Set-Cookie`, `WWW-Authenticate`), and
one that echoes the key back; the grant is loaded by the real loader from a file, the
guest runs in the sandbox with the generated client, and what it prints is what it got.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from runtime import GrantsError, Profile, run_with_grant
from runtime import load_grants as load
from tests.runtime.loopback import FakeAPI, Seen

KEY = "resp-hdr-key-7c41d2e9a0b35f68"
ENV = {"API_TOKEN": KEY}
PREAMBLE = (
    'host.getItem = (id) => host.call({method: "GET", route: "/v1/items/*"}, [id]);\n'
    'host.makeItem = (body) => host.call({method: "POST", route: "/v1/items"}, [], body);\n'
)


def upstream(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    status = {"/v1/items/missing": 404, "/v1/items/broken": 503}.get(seen.path, 200)
    if seen.method == "POST":
        status = 201
    body = json.dumps({"path": seen.path}).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Link", '<https://api.example/v1/items?page=2>; rel="next"')
    handler.send_header("ETag", '"abc123"')
    handler.send_header("X-RateLimit-Remaining", "41")
    handler.send_header("X-RateLimit-Reset", "1700000000")
    handler.send_header("X-Internal", "not listed")
    handler.send_header("Set-Cookie", "session=upstream-secret")
    handler.send_header("WWW-Authenticate", 'Bearer realm="api"')
    handler.send_header("X-Echo", "you sent " + seen.headers.get("authorization", ""))
    if status == 201:
        handler.send_header("Location", "/v1/items/9")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def grant(tmp_path: Path, base_url: str, **fields: Any) -> Profile:
    body: dict[str, Any] = {
        "base_url": base_url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN"},
        "allow": [
            {"route": "GET /v1/items/*", "response_headers": ["Link", "ETag"]},
            {"route": "POST /v1/items", "response_headers": ["Location"]},
        ],
        "response_headers": ["X-RateLimit-*", "X-Echo"],
        "preamble": PREAMBLE,
    }
    body.update(fields)
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}))
    return load(path, environ=ENV).select("p", "agent")


def run(code: str, profile: Profile) -> list[Any]:
    out = run_with_grant(code, profile, caller="agent")
    assert (out.result.exit_code, out.result.stderr) == (0, ""), out.result
    return [json.loads(line) for line in out.result.stdout.splitlines()]


def test_the_guest_sees_exactly_the_headers_the_grant_lists(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = upstream
    code = """
      const r = await host.$response.getItem("1");
      console.log(JSON.stringify(r));
      console.log(JSON.stringify(await host.getItem("1")));
      const raw = await host.$response.get("/v1/items/2");
      console.log(JSON.stringify(Object.keys(raw.headers)));
      const made = await host.$response.makeItem({name: "x"});
      console.log(JSON.stringify([made.status, made.headers.location, made.headers.link]));
    """
    first, body, raw_names, made = run(code, grant(tmp_path, api.url))
    assert first == {
        "status": 200,
        "headers": {
            "content-type": "application/json",
            "link": '<https://api.example/v1/items?page=2>; rel="next"',
            "etag": '"abc123"',
            "x-ratelimit-remaining": "41",
            "x-ratelimit-reset": "1700000000",
        },
        "body": {"path": "/v1/items/1"},
    }
    # the body form is unchanged: the parsed body only
    assert body == {"path": "/v1/items/1"}
    # the raw client method has the same second form
    assert raw_names == [
        "content-type",
        "link",
        "etag",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ]
    # the POST entry lists Location, not Link: each route reads its own list
    assert made == [201, "/v1/items/9", None]
    # the echo header really carried the key upstream sent back: it was dropped, not missing
    assert all(KEY in s.headers["authorization"] for s in api.requests)


def test_every_status_the_api_answered_resolves(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = upstream
    code = """
      for (const id of ["missing", "broken"]) {
        const r = await host.$response.getItem(id);
        console.log(JSON.stringify([r.status, r.headers.etag, r.body]));
        try { await host.getItem(id); } catch (e) { console.log(JSON.stringify(String(e.message).slice(0, 12))); }
      }
    """
    lines = run(code, grant(tmp_path, api.url))
    assert lines == [
        [404, '"abc123"', {"path": "/v1/items/missing"}],
        "host api 404",
        [503, '"abc123"', {"path": "/v1/items/broken"}],
        "host api 503",
    ]


def test_refusals_reject_in_the_response_form_too(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = upstream
    code = """
      const tries = [
        () => host.$response.get("/v1/other"),
        () => host.$response.call({method: "GET", route: "/v1/items/*", headers: ["X-Echo"]},
                                  ["1"], undefined, {"X-Echo": "x"}),
        () => host.$response.call({method: "DELETE", route: "/v1/items/*"}, ["1"]),
      ];
      for (const t of tries) {
        try { const r = await t(); console.log(JSON.stringify(["resolved", r.status])); }
        catch (e) { console.log(JSON.stringify(String(e.message))); }
      }
      const r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/1",
                                                       response_headers: ["Set-Cookie"]}));
      console.log(JSON.stringify([r.status, r.body, "headers" in r]));
    """
    lines = run(code, grant(tmp_path, api.url))
    assert lines == [
        "host api call not permitted by sandbox capability: GET /v1/other",
        "host api 403: parameter not granted: x-echo",
        "host api call not permitted by sandbox capability: DELETE /v1/items/1",
        [400, "invalid host api request envelope\n", False],
    ]
    assert api.requests == []


def test_a_listed_header_holding_the_key_is_dropped(tmp_path: Path, api: FakeAPI) -> None:
    """X-Echo is in the grant's list, and it carries `Bearer <key>` back: withheld, while
    the rest of the reply (body, other headers) is delivered."""
    api.responder = upstream
    code = 'console.log(JSON.stringify(await host.$response.getItem("1")));'
    (reply,) = run(code, grant(tmp_path, api.url))
    assert "x-echo" not in reply["headers"]
    assert reply["headers"]["etag"] == '"abc123"'
    assert KEY not in json.dumps(reply)


def test_a_listed_header_without_the_key_is_delivered(tmp_path: Path, api: FakeAPI) -> None:
    """The same grant against an API whose echo holds no key: the header arrives, so the
    test above fails if the key check were not what removed it."""

    def harmless(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        seen.headers.pop("authorization", None)
        upstream(handler, seen)

    api.responder = harmless
    code = 'console.log(JSON.stringify(await host.$response.getItem("1")));'
    (reply,) = run(code, grant(tmp_path, api.url))
    assert reply["headers"]["x-echo"] == "you sent"


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        (["Set-Cookie"], 'response_headers item "Set-Cookie" is never forwarded'),
        (["www-authenticate"], 'response_headers item "www-authenticate" is never forwarded'),
        (["Proxy-Authenticate"], 'response_headers item "Proxy-Authenticate" is never forwarded'),
        (["*"], 'response_headers item "*" names every header'),
        (["Bad Name"], 'response_headers item "Bad Name" is not an HTTP field name'),
        (["ETag", "etag"], 'response_headers item "etag" is listed twice'),
        ("ETag", "response_headers must be a list of header names"),
    ],
)
def test_a_grant_listing_a_forbidden_response_header_is_refused_at_load(
    tmp_path: Path, listed: Any, message: str
) -> None:
    for where in ("profile", "entry"):
        fields: dict[str, Any] = {"response_headers": listed}
        if where == "entry":
            fields = {"allow": [{"route": "GET /v1/items/*", "response_headers": listed}]}
        with pytest.raises(GrantsError) as err:
            grant(tmp_path, "https://api.example.com", **fields)
        line = str(err.value)
        assert "\n" not in line and line.startswith('grants: profile "p": ')
        assert message in line, (where, line)


def _headers_reply(pairs: list[tuple[str, str]]) -> Any:
    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        handler.send_response(200)
        for name, value in pairs:
            handler.send_header(name, value)
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"{}")

    return respond


def test_the_broker_filters_headers_by_the_grant_not_by_what_arrived(
    tmp_path: Path, api: FakeAPI
) -> None:
    """At the broker (HostReply.headers): a prefix that covers Set-Cookie still never
    forwards it; the key in base64 or hex is caught as in bodies; repeats are joined;
    a value that is not printable ASCII is dropped; an unlisted name is dropped."""
    import base64

    from runtime import Broker, HostRequest

    api.responder = _headers_reply(
        [
            ("Content-Type", "application/json"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie2", "b=2"),
            ("Set-Mode", "fast"),
            ("Link", '<a>; rel="next"'),
            ("Link", '<b>; rel="last"'),
            ("X-Token-B64", base64.b64encode(KEY.encode()).decode()),
            ("X-Token-Hex", KEY.encode().hex().upper()),
            ("X-Latin", "caf\u00e9"),
            ("X-Unlisted", "1"),
        ]
    )
    profile = grant(
        tmp_path,
        api.url,
        response_headers=["Set-*", "Link", "X-Token-*", "X-Latin"],
        allow=["GET /v1/items/*"],
    )
    with Broker(profile) as b:
        reply = b(HostRequest("GET", "/v1/items/1"))
    assert reply.upstream is True
    assert reply.headers == (
        ("content-type", "application/json"),
        ("set-mode", "fast"),
        ("link", '<a>; rel="next", <b>; rel="last"'),
    )


def test_only_content_type_by_default(tmp_path: Path, api: FakeAPI) -> None:
    from runtime import Broker, HostRequest

    api.responder = upstream
    profile = grant(tmp_path, api.url, response_headers=None, allow=["GET /v1/items/*"])
    with Broker(profile) as b:
        reply = b(HostRequest("GET", "/v1/items/1"))
        refused = b(HostRequest("GET", "/v1/other"))
    assert reply.headers == (("content-type", "application/json"),)
    assert (refused.status, refused.upstream, refused.headers) == (403, False, ())


def test_no_content_type_is_made_up_for_a_reply_without_one(tmp_path: Path, api: FakeAPI) -> None:
    from runtime import Broker, HostRequest

    api.responder = _headers_reply([("ETag", '"e1"')])
    profile = grant(tmp_path, api.url, response_headers=["ETag"], allow=["GET /v1/items/*"])
    with Broker(profile) as b:
        reply = b(HostRequest("GET", "/v1/items/1"))
    assert reply.headers == (("etag", '"e1"'),)


def test_a_key_in_a_header_name_or_split_over_repeats_is_dropped(
    tmp_path: Path, api: FakeAPI
) -> None:
    """A prefix pattern admits names the upstream chooses: one spelling the key (mixed
    case, which the lower-cased name would hide) is dropped, and so is a header whose
    repeats each hold half the key, which only their joined value reveals."""
    from runtime import Broker, HostRequest

    mixed = "Resp-Hdr-Key-7C41D2E9A0B35F68"
    half = len(mixed) // 2
    api.responder = _headers_reply(
        [
            ("X-RateLimit-" + mixed, "1"),
            ("X-Split", mixed[:half]),
            ("X-Split", mixed[half:]),
            ("X-RateLimit-Limit", "60"),
        ]
    )
    body = {
        "base_url": api.url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN", "header": "X-Api-Key"},
        "allow": ["GET /v1/items/*"],
        "response_headers": ["X-RateLimit-*", "X-Split"],
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}))
    profile = load(path, environ={"API_TOKEN": mixed}).select("p", "agent")
    with Broker(profile) as b:
        reply = b(HostRequest("GET", "/v1/items/1"))
    # the split key is in no one header: every listed header goes, content-type stays
    assert reply.headers == ()
    api.responder = _headers_reply(
        [("Content-Type", "text/plain"), ("X-RateLimit-" + mixed, "1"), ("X-RateLimit-Limit", "60")]
    )
    with Broker(profile) as b:
        reply = b(HostRequest("GET", "/v1/items/1"))
    # the key in a name only: that header goes, the others are delivered
    assert reply.headers == (("content-type", "text/plain"), ("x-ratelimit-limit", "60"))
