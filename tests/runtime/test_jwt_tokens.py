"""Per-run short-lived tokens (`jwt`, as in the reference).

The loopback API verifies each token itself with joserfc (signature, audience, expiry)
and answers 401 to one that fails, as a real API would; the broker never sees that
check, so "the token the run sent verifies" is proven where it lands.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey
from joserfc.jwt import JWTClaimsRegistry

from runtime import Broker, GrantsError, HostRequest, Profile, run_profile
from runtime import load_grants as load
from runtime.broker.token_block import JwtKey, Secret
from runtime.broker.tokens import mint
from tests.runtime.loopback import FakeAPI, Seen

SIGNING = "jwt-signing-key-for-tests-0123456789abcdef"  # 42 bytes
AUDIENCE = "memory-api"


class Verifier:
    """A loopback API that accepts only a valid, unexpired token for AUDIENCE."""

    def __init__(self) -> None:
        #: Seconds the API's clock is ahead of ours; `age_after_first` moves it after
        #: the first accepted call, as if the run had lasted that long.
        self.skew = 0
        self.age_after_first = 0
        self.claims: list[dict[str, object]] = []
        self.headers: list[dict[str, object]] = []
        self.refused: list[str] = []

    def __call__(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        auth = seen.headers.get("authorization", "")
        try:
            if not auth.startswith("Bearer "):
                raise JoseError("no bearer token")
            token = jwt.decode(auth[7:], OctKey.import_key(SIGNING.encode()), ["HS256"])
            JWTClaimsRegistry(
                now=int(time.time()) + self.skew,
                aud={"essential": True, "value": AUDIENCE},
                sub={"essential": True},
                exp={"essential": True},
                jti={"essential": True},
            ).validate(token.claims)
        except JoseError as e:
            self.refused.append(type(e).__name__)
            status, body = 401, b'{"error":"invalid token"}'
        else:
            self.claims.append(dict(token.claims))
            self.headers.append(dict(token.header))
            self.skew += self.age_after_first
            status, body = 200, b'{"ok":true}'
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


@pytest.fixture
def verifier() -> Verifier:
    return Verifier()


@pytest.fixture
def api(verifier: Verifier):  # type: ignore[no-untyped-def]
    server = FakeAPI(responder=verifier)
    yield server
    server.close()


def grants_file(tmp_path: Path, base_url: str, **token: object) -> Path:
    profile = {
        "base_url": base_url,
        "global": "memory",
        "allowed_callers": ["support-agent", "other-agent"],
        "allow": ["GET /v1/items/*"],
        "scopes": ["memory:read", "memory:write"],
        "token": {"type": "jwt", "secret_env": "JWT_SECRET", "audience": AUDIENCE, **token},
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": profile}}), "utf-8")
    return path


def loaded(tmp_path: Path, base_url: str, **token: object) -> Profile:
    return load(grants_file(tmp_path, base_url, **token), environ={"JWT_SECRET": SIGNING}).profiles[
        0
    ]


def test_each_run_mints_a_token_bound_to_caller_and_run(
    tmp_path: Path, api: FakeAPI, verifier: Verifier
) -> None:
    p = loaded(tmp_path, api.url, issuer="plimsoll-test", key_id="k1", ttl_sec=600)
    before = int(time.time())
    for caller in ("support-agent", "support-agent", "other-agent"):
        with Broker(p, caller=caller, run_timeout_s=5) as b:
            assert b(HostRequest("GET", "/v1/items/x", None)).status == 200
            assert b(HostRequest("GET", "/v1/items/y", None)).status == 200
    after = int(time.time())
    assert verifier.refused == []
    subs = [c["sub"] for c in verifier.claims]
    assert subs == ["support-agent"] * 4 + ["other-agent"] * 2
    jtis = [c["jti"] for c in verifier.claims]
    assert jtis[0] == jtis[1] and len(set(jtis)) == 3  # one token per run, not per call
    for claims in verifier.claims:
        assert set(claims) == {"aud", "exp", "iat", "iss", "jti", "nbf", "scope", "sub"}
        iat = claims["iat"]
        assert isinstance(iat, int) and before <= iat <= after and claims["nbf"] == iat
        assert claims["exp"] == iat + 5 + 5  # min(ttl 600, run timeout 5 s + 5 s)
        assert claims["scope"] == "memory:read memory:write"
        assert claims["iss"] == "plimsoll-test" and claims["aud"] == AUDIENCE
        assert len(str(claims["jti"])) == 32
    assert verifier.headers[0] == {"alg": "HS256", "typ": "JWT", "kid": "k1"}


def test_ttl_shorter_than_the_run_wins() -> None:
    block = JwtKey(secret_env="S", audience="a", secret=Secret(SIGNING), ttl_s=3)
    token = mint(block, caller="c", run_timeout_s=30, now=1000.0).reveal()
    claims = jwt.decode(token, OctKey.import_key(SIGNING.encode()), ["HS256"]).claims
    assert (claims["iat"], claims["exp"]) == (1000, 1003)
    assert "iss" not in claims and "scope" not in claims


def test_an_expired_token_gets_the_upstreams_401_delivered(
    tmp_path: Path, api: FakeAPI, verifier: Verifier
) -> None:
    """A run outliving its token: the API's clock moves 60 s after the first call (the
    token lives min(60 s, 10 s + 5 s) = 15 s), so the second call carries an expired one."""
    verifier.age_after_first = 60
    p = loaded(tmp_path, api.url)
    code = (
        "async function main() {\n"
        '  const a = await memory.get("/v1/items/a");\n'
        '  try { await memory.get("/v1/items/b"); console.log("second ok"); }\n'
        '  catch (e) { console.log("second " + e.message); }\n'
        '  console.log("first " + JSON.stringify(a));\n'
        "}\n"
        "main();\n"
    )
    outcome = run_profile(code, p, caller="support-agent", timeout_s=10)
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert outcome.result.stdout.splitlines() == [
        'second host api 401: {"error":"invalid token"}',
        'first {"ok":true}',
    ]
    assert [r.status for r in outcome.trace.rows] == [200, 401]
    assert all(r.delivered for r in outcome.trace.rows)
    assert verifier.refused == ["ExpiredTokenError"]
    assert SIGNING not in outcome.audit + outcome.result.stdout + outcome.result.stderr


def test_a_token_expires_on_the_real_clock(
    tmp_path: Path, api: FakeAPI, verifier: Verifier
) -> None:
    # iat is whole seconds (truncated), so a 2 s token may have only just over 1 s left
    # when the first call lands, and is surely expired 3.1 s later.
    p = loaded(tmp_path, api.url, ttl_sec=2)
    with Broker(p, caller="support-agent", run_timeout_s=30) as b:
        assert b(HostRequest("GET", "/v1/items/x", None)).status == 200
        time.sleep(3.1)
        assert b(HostRequest("GET", "/v1/items/x", None)).status == 401
    assert verifier.refused == ["ExpiredTokenError"]


def test_a_token_signed_with_another_key_is_refused_by_the_api(
    tmp_path: Path, api: FakeAPI, verifier: Verifier
) -> None:
    """The control for the test above: the verifier really checks the signature."""
    path = grants_file(tmp_path, api.url)
    p = load(path, environ={"JWT_SECRET": "another-signing-key-of-32-bytes-or-more"}).profiles[0]
    with Broker(p, caller="support-agent", run_timeout_s=5) as b:
        assert b(HostRequest("GET", "/v1/items/x", None)).status == 401
    assert verifier.refused == ["BadSignatureError"]


@pytest.mark.parametrize("caller", [None, "", "*", " support-agent", "agent\n", "a\x00b"])
def test_no_token_without_a_stable_caller(tmp_path: Path, api: FakeAPI, caller: str | None) -> None:
    p = loaded(tmp_path, api.url)
    expected = (
        "grant_profile mints a per-caller credential and requires an authenticated caller"
        if caller is None
        else "host-api grant: subject-bound minter requires a stable authenticated subject"
    )
    with pytest.raises(GrantsError, match=expected):
        Broker(p, caller=caller)
    assert api.requests == []


@pytest.mark.parametrize(
    ("token", "env", "expected"),
    [
        ({}, {"JWT_SECRET": "short"},
         'jwt secret env "JWT_SECRET" must contain at least 32 bytes for HS256'),
        ({}, {}, 'jwt secret env "JWT_SECRET" is empty or unset'),
        ({"audience": "  "}, {"JWT_SECRET": SIGNING}, "jwt audience is required"),
        ({"secret_env": ""}, {"JWT_SECRET": SIGNING}, "token.secret_env is required for a jwt"),
        ({"ttl_sec": "60"}, {"JWT_SECRET": SIGNING}, "token.ttl_sec must be an integer"),
        ({"header": "Host"}, {"JWT_SECRET": SIGNING}, 'token.header "Host" is set by the broker'),
    ],
)  # fmt: skip
def test_jwt_block_refusals(
    tmp_path: Path, token: dict[str, object], env: dict[str, str], expected: str
) -> None:
    with pytest.raises(GrantsError) as info:
        load(grants_file(tmp_path, "https://api.example", **token), environ=env)
    message = str(info.value)
    assert message.startswith('grants: profile "p": ') and expected in message, message
    assert SIGNING not in message


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        (["code:run"], 'forbidden scope "code:run"'),
        (["*"], 'forbidden scope "*"'),
        (["a b"], 'scope "a b" must be one non-empty token without whitespace'),
        ([""], 'scope "" must be one non-empty token'),
    ],
)
def test_scope_validation(tmp_path: Path, scopes: list[str], expected: str) -> None:
    path = grants_file(tmp_path, "https://api.example")
    doc = json.loads(path.read_text())
    doc["profiles"]["p"]["scopes"] = scopes
    path.write_text(json.dumps(doc))
    with pytest.raises(GrantsError, match=expected):
        load(path, environ={"JWT_SECRET": SIGNING})


def test_a_reply_echoing_the_signing_key_is_not_delivered() -> None:
    """Found by an adversarial review: the reply check knew the minted token but not the
    signing key, so an upstream debug page echoing its HS256 secret reached the guest."""
    from runtime.broker.credentials import credential_for
    from runtime.broker.reflection import Reflection

    block = JwtKey(secret_env="S", audience=AUDIENCE, secret=Secret(SIGNING))
    p = Profile(
        name="p",
        base_url="https://api.example",
        global_name="host",
        allowed_callers=("*",),
        allow=(),
        credential=block,
    )
    credential = credential_for(p, caller="agent", run_timeout_s=5.0)
    assert credential is not None
    found = Reflection(credential.secrets()).found
    assert found(b'{"debug": {"hs256_secret": "' + SIGNING.encode() + b'"}}')
    assert not found(b'{"debug": "nothing of the grant here"}')


def test_joserfc_is_imported_by_the_first_mint_not_by_loading_grants() -> None:
    """A process serving static keys (most) never pays joserfc's import (~50 ms)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import runtime.mcp.cli, runtime.mcp.server, runtime.mcp.runner, runtime.cli\n"
        "print('joserfc' in sys.modules)\n"
        "from runtime.broker.tokens import mint\n"
        "from runtime.broker.token_block import JwtKey, Secret\n"
        f"block = JwtKey(secret_env='K', audience='a', secret=Secret({SIGNING!r}))\n"
        "mint(block, caller='c')\n"
        "print('joserfc' in sys.modules)\n"
    )
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert seen.stdout.split() == ["False", "True"], seen.stderr
