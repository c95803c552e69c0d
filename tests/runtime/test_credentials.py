"""Credentials in every common form: what the grant declares is exactly
what reaches a real API on loopback, and the key never reaches the guest or the trace.

Each kind is loaded from a grants file (the operator's only way to declare it), sent
through a `Broker` to a `FakeAPI` that records the wire, and checked for reflection:
an upstream that echoes the key in any form the credential sent is not delivered.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from runtime import Broker, GrantsError, HostRequest, Profile
from runtime import load_grants as load
from tests.runtime.loopback import FakeAPI, Seen, reply

KEY = "cred-key-9f3a+/="  # '+', '/' and '=' change under percent-encoding
USER, PASSWORD = "ops-bot", "pässwörd-7c1e"  # non-ASCII: RFC 7617 allows UTF-8


def grant(tmp_path: Path, token: object, base_url: str = "https://api.example") -> Path:
    profile = {
        "base_url": base_url,
        "allowed_callers": ["agent"],
        "allow": ["GET /v1/items/*"],
        "token": token,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": profile}}), "utf-8")
    return path


ENV = {"K": KEY, "U": USER, "P": PASSWORD, "CRLF": "a\r\nX-Evil: 1", "NUL": "a\x00b"}


def loaded(tmp_path: Path, token: object, base_url: str) -> Profile:
    return load(grant(tmp_path, token, base_url), environ=ENV).profiles[0]


def send(profile: Profile, api: FakeAPI) -> tuple[int, bytes, Seen]:
    with Broker(profile) as b:
        out = b(HostRequest("GET", "/v1/items/x", None))
    return out.status, out.body, api.requests[-1]


@pytest.mark.parametrize(
    ("token", "header", "value"),
    [
        ({"type": "static", "env": "K"}, "authorization", f"Bearer {KEY}"),
        ({"env": "K", "header": "Authorization", "value": "Token {token}"}, "authorization",
         f"Token {KEY}"),
        ({"env": "K", "header": "X-API-Key"}, "x-api-key", KEY),
        ({"env": "K", "header": "X-Api-Token", "value": "key={token}"}, "x-api-token",
         f"key={KEY}"),
    ],
)  # fmt: skip
def test_header_credentials_on_the_wire(
    tmp_path: Path, api: FakeAPI, token: object, header: str, value: str
) -> None:
    status, _, seen = send(loaded(tmp_path, token, api.url), api)
    assert status == 200
    assert seen.headers[header] == value
    assert seen.path == "/v1/items/x"  # no query
    # exactly one credential header: a bare key is not also sent as a bearer
    broker_set = ("host", "accept", "accept-encoding", "connection", "user-agent")
    sent = {h for h in seen.headers if h not in broker_set}
    assert sent == {header}


def test_basic_credential_on_the_wire(tmp_path: Path, api: FakeAPI) -> None:
    token = {"type": "basic", "user_env": "U", "password_env": "P"}
    status, _, seen = send(loaded(tmp_path, token, api.url), api)
    assert status == 200
    scheme, blob = seen.headers["authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(blob).decode("utf-8") == f"{USER}:{PASSWORD}"


def test_basic_with_an_empty_password_sends_the_user_and_a_colon(
    tmp_path: Path, api: FakeAPI
) -> None:
    """Stripe's documented form (`curl -u sk_test_...:`): the key is the user, the
    password empty, and the pair keeps its colon."""
    token = {"type": "basic", "user_env": "K", "password": ""}
    status, _, seen = send(loaded(tmp_path, token, api.url), api)
    assert status == 200
    scheme, blob = seen.headers["authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(blob).decode("utf-8") == f"{KEY}:"


def test_query_key_is_added_after_approval_and_encoded(tmp_path: Path, api: FakeAPI) -> None:
    token = {"type": "static", "env": "K", "query": "api_key"}
    profile = loaded(tmp_path, token, api.url)
    with Broker(profile) as b:
        out = b(HostRequest("GET", "/v1/items/x", None))
        # the guest cannot add a query of its own, with or without the key's name
        refused = b(HostRequest("GET", "/v1/items/x?api_key=mine", None))
        snap = b.close()
    assert out.status == 200 and refused.status == 403
    (seen,) = api.requests
    assert seen.path == "/v1/items/x?api_key=cred-key-9f3a%2B%2F%3D"
    assert "authorization" not in seen.headers
    text = json.dumps(snap.to_dict())
    assert KEY not in text and "api_key" not in text and "cred-key" not in text


@pytest.mark.parametrize(
    ("token", "echo"),
    [
        ({"env": "K", "query": "api_key"}, b"you asked for /v1/items/x?api_key=cred-key-9f3a%2B%2F%3D"),
        ({"env": "K", "query": "api_key"}, b'{"key": "' + KEY.encode() + b'"}'),
        ({"env": "K", "header": "X-API-Key"}, b"X-API-Key: " + KEY.encode()),
        ({"type": "basic", "user_env": "U", "password_env": "P"},
         b"Authorization: Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode())),
        ({"type": "basic", "user_env": "U", "password_env": "P"}, PASSWORD.encode()),
        # With an empty password the user is the key: an echo of it alone is a leak.
        ({"type": "basic", "user_env": "K", "password": ""}, b'{"key": "' + KEY.encode() + b'"}'),
        ({"type": "basic", "user_env": "K", "password": ""},
         b"Authorization: Basic " + base64.b64encode(f"{KEY}:".encode())),
    ],
)  # fmt: skip
def test_a_reply_reflecting_the_credential_is_not_delivered(
    tmp_path: Path, token: object, echo: bytes
) -> None:
    api = FakeAPI(responder=reply(200, echo, {"Content-Type": "text/plain"}))
    try:
        status, body, _ = send(loaded(tmp_path, token, api.url), api)
    finally:
        api.close()
    assert (status, body) == (502, b"host api unavailable\n")


def test_a_content_type_reflecting_the_credential_is_not_delivered(tmp_path: Path) -> None:
    """Found by an adversarial review: only the body was searched, so an upstream writing
    the key into its Content-Type handed it to a Python caller of the broker."""
    echo = {"Content-Type": "application/json; echo=" + KEY}
    api = FakeAPI(responder=reply(200, b"{}", echo))
    try:
        with Broker(loaded(tmp_path, {"env": "K", "header": "X-API-Key"}, api.url)) as b:
            out = b(HostRequest("GET", "/v1/items/x", None))
    finally:
        api.close()
    assert (out.status, out.body) == (502, b"host api unavailable\n")
    assert KEY not in out.content_type


def test_no_credential_form_appears_in_a_repr(tmp_path: Path) -> None:
    for token in (
        {"env": "K", "query": "api_key"},
        {"env": "K", "header": "X-API-Key"},
        {"type": "basic", "user_env": "U", "password_env": "P"},
    ):
        profile = loaded(tmp_path, token, "https://api.example")
        assert KEY not in repr(profile) and PASSWORD not in repr(profile)


PREFIX = 'grants: profile "p": '


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ({"env": "K", "header": "Host"}, 'token.header "Host" is set by the broker'),
        ({"env": "K", "header": "content-length"}, 'token.header "content-length" is set by'),
        ({"env": "K", "header": "Transfer-Encoding"}, "frames the request"),
        ({"env": "K", "header": "Connection"}, "frames the request"),
        ({"env": "K", "header": "Content-Type"}, "frames the request"),
        ({"env": "K", "header": "Cookie"}, "frames the request"),
        ({"env": "K", "header": "Proxy-Authorization"}, "frames the request"),
        ({"env": "K", "header": "X-Key\r\nX-Evil"}, "is not an HTTP header name"),
        ({"env": "K", "header": "X-Key\x00"}, "is not an HTTP header name"),
        ({"env": "K", "header": ""}, "is not an HTTP header name"),
        ({"env": "K", "value": "Token {token}\r\nX-Evil: 1"}, "must be printable ASCII"),
        ({"env": "K", "value": "Token"}, "must contain {token} exactly once"),
        ({"env": "K", "value": "{token}{token}"}, "must contain {token} exactly once"),
        ({"env": "K", "value": "{token} {user}"}, "no other braces"),
        ({"env": "CRLF", "header": "X-API-Key"}, 'token env "CRLF" holds a control character'),
        ({"env": "NUL", "query": "k"}, 'token env "NUL" holds a control character'),
        ({"env": "K", "query": "api key"}, 'token.query "api key" must be 1 to 128'),
        ({"env": "K", "query": "a&b=c"}, 'token.query "a&b=c" must be 1 to 128'),
        ({"env": "K", "query": "k", "header": "X-K"}, "set either query or header/value"),
        ({"type": "basic", "user_env": "U"}, "token.user_env and token.password_env are required"),
        ({"type": "basic", "user_env": "U"}, '(or "password": "" for an empty password)'),
        ({"type": "basic", "user_env": "U", "password_env": "P", "password": ""},
         'set either password_env or "password": "", not both'),
        ({"type": "basic", "user_env": "U", "password": "hunter2"},
         'token.password may only be "" (an empty password)'),
        ({"type": "basic", "user_env": "U", "password": 0}, "token.password must be a string"),
        ({"type": "basic", "user_env": "UNSET", "password": ""},
         'token user_env "UNSET" is empty or unset'),
        ({"type": "basic", "user_env": "U", "password_env": "UNSET"},
         'token password_env "UNSET" is empty or unset'),
        ({"type": "basic", "user_env": "CRLF", "password_env": "P"},
         'token user_env "CRLF" holds a control character'),
        ({"type": "basic", "user_env": "U", "password_env": "P", "env": "K"},
         'token: unknown field "env" for a basic token'),
        ({"type": "basic", "user_env": "U", "password_env": "P", "header": "X-K"},
         'unknown field "header"'),
    ],
)  # fmt: skip
def test_token_block_refusals(tmp_path: Path, token: object, expected: str) -> None:
    with pytest.raises(GrantsError) as info:
        load(grant(tmp_path, token), environ={**ENV, "COLON": "a:b"})
    message = str(info.value)
    assert message.startswith(PREFIX) and expected in message, message
    assert "\n" not in message and "\r" not in message
    assert KEY not in message and PASSWORD not in message


def test_basic_user_with_a_colon_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GrantsError, match='token user_env "COLON" must not contain'):
        load(
            grant(tmp_path, {"type": "basic", "user_env": "COLON", "password_env": "P"}),
            environ={**ENV, "COLON": "a:b"},
        )


def test_static_bearer_loads_exactly_as_before(tmp_path: Path) -> None:
    profile = loaded(tmp_path, {"type": "static", "env": "K"}, "https://api.example")
    assert profile.token_env == "K" and profile.token is not None
    assert profile.token.reveal() == KEY


@pytest.mark.parametrize(
    ("scheme", "header", "value", "query"),
    [
        ({"type": "http", "scheme": "bearer"}, "authorization", f"Bearer {KEY}", ""),
        ({"type": "http", "scheme": "basic"}, "authorization",
         "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(), ""),
        ({"type": "apiKey", "in": "header", "name": "X-API-Key"}, "x-api-key", KEY, ""),
        ({"type": "apiKey", "in": "query", "name": "api_key"}, "", "",
         "?api_key=cred-key-9f3a%2B%2F%3D"),
    ],
)  # fmt: skip
def test_specgens_token_proposals_load_and_send_what_they_say(
    tmp_path: Path, api: FakeAPI, scheme: dict[str, str], header: str, value: str, query: str
) -> None:
    """`specgen`'s securitySchemes proposals are token blocks this loader takes as is."""
    from specgen.security import propose_one

    token = propose_one("s", scheme, env="K").token
    assert token is not None
    if token.get("type") == "basic":
        token = {**token, "user_env": "U", "password_env": "P"}
    status, _, seen = send(loaded(tmp_path, token, api.url), api)
    assert status == 200
    assert seen.path == "/v1/items/x" + query
    if header:
        assert seen.headers[header] == value
