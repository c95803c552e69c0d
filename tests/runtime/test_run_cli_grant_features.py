"""`specgen run` end to end with the grant features: credential forms,
the backpressure breaker and health probe, route caps and per-run jwt tokens.

Each test writes a grants file, starts a real loopback API and drives the click command
as an operator would; what the API received is checked where it landed.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from click.testing import CliRunner, Result
from joserfc import jwt
from joserfc.jwk import OctKey

from runtime.cli import run
from tests.runtime.loopback import FakeAPI, Seen

KEY = "cli-feature-key-4e8b"
SIGNING = "cli-jwt-signing-key-0123456789abcdef-xyz"
ENV = {"API_KEY": KEY, "API_USER": "bot", "API_PASSWORD": "pw-31c7", "JWT_SECRET": SIGNING}


def invoke(tmp_path: Path, api: FakeAPI, code: str, **profile: object) -> Result:
    grant = {
        "base_url": api.url,
        "allowed_callers": ["support-agent"],
        "allow": ["GET /v1/items/*", "POST /v1/remember"],
        **profile,
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"p": grant}}), "utf-8")
    (tmp_path / "code.js").write_text(code, "utf-8")
    return CliRunner().invoke(
        run,
        [
            str(tmp_path / "code.js"),
            "--grants",
            str(tmp_path / "grants.json"),
            "--profile",
            "p",
            "--caller",
            "support-agent",
            "--json",
        ],
        env=ENV,
        catch_exceptions=False,
    )


def record(result: Result) -> dict[str, object]:
    out: dict[str, object] = json.loads(result.stdout)
    return out


CALLS = """
async function main() {
  for (const [method, path] of %s) {
    try {
      const r = method === "GET" ? await host.get(path) : await host.post(path, {text: "x"});
      console.log("ok " + JSON.stringify(r));
    } catch (e) {
      console.log("refused " + e.message.split("\\n")[0]);
    }
  }
}
main();
"""


def calls(*pairs: tuple[str, str]) -> str:
    return CALLS % json.dumps([list(p) for p in pairs])


def test_credential_forms_through_the_cli(tmp_path: Path, api: FakeAPI) -> None:
    code = calls(("GET", "/v1/items/a"))
    tokens = [
        ({"type": "static", "env": "API_KEY", "header": "X-API-Key"}, "x-api-key", KEY),
        (
            {"env": "API_KEY", "header": "Authorization", "value": "Token {token}"},
            "authorization",
            f"Token {KEY}",
        ),
        (
            {"type": "basic", "user_env": "API_USER", "password_env": "API_PASSWORD"},
            "authorization",
            "Basic Ym90OnB3LTMxYzc=",
        ),
    ]
    for token, header, value in tokens:
        result = invoke(tmp_path, api, code, token=token)
        assert result.exit_code == 0, result.stderr
        assert record(result)["stdout"] == 'ok {"ok":true}\n'
        assert api.requests[-1].headers[header] == value
        assert KEY not in result.stdout + result.stderr


def test_query_key_through_the_cli(tmp_path: Path, api: FakeAPI) -> None:
    result = invoke(
        tmp_path,
        api,
        calls(("GET", "/v1/items/a"), ("GET", "/v1/items/a?api_key=guess")),
        token={"type": "static", "env": "API_KEY", "query": "api_key"},
    )
    assert result.exit_code == 0, result.stderr
    out = record(result)
    lines = str(out["stdout"]).splitlines()
    assert lines[0] == 'ok {"ok":true}' and lines[1].startswith("refused")
    assert [s.path for s in api.requests] == [f"/v1/items/a?api_key={KEY}"]
    assert KEY not in result.stdout + result.stderr  # audit, output, trace


class Degraded:
    """Answers 503 Retry-After: 20 to the first /v1 call, then 200; /health says `health`."""

    def __init__(self, health: int) -> None:
        self.health = health
        self.first = True

    def __call__(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        if seen.path == "/health":
            status = self.health
        else:
            status, self.first = (503 if self.first else 200), False
        body = b'{"ok":true}' if status == 200 else b'{"error":"overloaded"}'
        handler.send_response(status)
        if status == 503:
            handler.send_header("Retry-After", "20")
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def test_breaker_sheds_after_a_503_without_a_health_check(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = Degraded(health=200)
    three = calls(("GET", "/v1/items/a"), ("GET", "/v1/items/b"), ("POST", "/v1/remember"))
    result = invoke(tmp_path, api, three, token={"env": "API_KEY"})
    assert result.exit_code == 0, result.stderr
    out = record(result)
    assert str(out["stdout"]).splitlines() == [
        'refused host api 503: {"error":"overloaded"}',
        "refused host api 503: host api is shedding load: upstream reported degraded",
        "refused host api 503: host api is shedding load: upstream reported degraded",
    ]
    assert [s.path for s in api.requests] == ["/v1/items/a"]  # the cooldown is waited out
    audit = out["audit"]
    assert isinstance(audit, dict)
    assert (audit["shed"], audit["denied"], len(audit["calls"])) == (2, 0, 1)


def test_health_probe_lets_the_next_call_through(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = Degraded(health=200)
    two = calls(("GET", "/v1/items/a"), ("GET", "/v1/items/b"))
    result = invoke(tmp_path, api, two, token={"env": "API_KEY"}, health_check="GET /health")
    assert result.exit_code == 0, result.stderr
    out = record(result)
    assert str(out["stdout"]).splitlines()[1] == 'ok {"ok":true}'
    assert [s.path for s in api.requests] == ["/v1/items/a", "/health", "/v1/items/b"]
    assert api.requests[1].headers["authorization"] == f"Bearer {KEY}"
    audit = out["audit"]
    assert isinstance(audit, dict) and "shed" not in audit and len(audit["calls"]) == 2


def test_route_cap_through_the_cli(tmp_path: Path, api: FakeAPI) -> None:
    five = calls(*[("POST", "/v1/remember")] * 5, ("GET", "/v1/items/a"))
    result = invoke(
        tmp_path, api, five, token={"env": "API_KEY"}, route_max_calls={"POST /v1/remember": 3}
    )
    assert result.exit_code == 0, result.stderr
    out = record(result)
    assert str(out["stdout"]).splitlines() == [
        'ok {"ok":true}',
        'ok {"ok":true}',
        'ok {"ok":true}',
        "refused host api 429: host api call budget for this route is exhausted",
        "refused host api 429: host api call budget for this route is exhausted",
        'ok {"ok":true}',
    ]
    assert [s.path for s in api.requests].count("/v1/remember") == 3
    audit = out["audit"]
    assert isinstance(audit, dict) and audit["denied"] == 2


def test_jwt_token_through_the_cli(tmp_path: Path, api: FakeAPI) -> None:
    token = {"type": "jwt", "secret_env": "JWT_SECRET", "audience": "items", "ttl_sec": 300}
    result = invoke(tmp_path, api, calls(("GET", "/v1/items/a")), token=token, scopes=["items:r"])
    assert result.exit_code == 0, result.stderr
    auth = api.requests[-1].headers["authorization"]
    assert auth.startswith("Bearer ")
    claims = jwt.decode(auth[7:], OctKey.import_key(SIGNING.encode()), ["HS256"]).claims
    assert claims["sub"] == "support-agent" and claims["aud"] == "items"
    assert claims["scope"] == "items:r"
    assert claims["exp"] - claims["iat"] == 5 + 5  # --timeout defaults to 5 s
    assert SIGNING not in result.stdout + result.stderr and auth[7:] not in result.stdout


def test_grant_refusals_are_one_line(tmp_path: Path, api: FakeAPI) -> None:
    bad = [
        ({"token": {"env": "API_KEY", "header": "Host"}}, 'token.header "Host" is set by'),
        ({"route_max_calls": {"POST /v1/nope": 1}}, "which is not an entry of Allow"),
        ({"token": {"type": "jwt", "secret_env": "API_KEY", "audience": "a"}}, "at least 32"),
    ]
    for fields, expected in bad:
        result = invoke(tmp_path, api, "1", **fields)
        assert result.exit_code != 0
        (line,) = result.stderr.splitlines()
        assert line.startswith('specgen: grants: profile "p": ') and expected in line, line
    assert api.requests == []
