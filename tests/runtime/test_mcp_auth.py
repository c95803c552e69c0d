"""`specgen mcp --http --auth`: the caller comes from the token, checked by the server.

Servers are the real command on a loopback port; clients are the official SDK's client
(with an `Authorization` header) or plain httpx for what a client without a token sees.
JWTs are minted here with joserfc from a key pair whose public half is the JWKS file the
server reads; the claims are the ones RFC 9068 / the MCP authorization spec define.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from examples.memory_grant.fake import FakeAgentMemory
from examples.memory_grant.runner import CALLER, GRANTS, PROFILE, TOKEN, TOKEN_ENV
from runtime.mcp.auth import AuthFileError, CallerVerifier, load_auth
from tests.runtime.test_mcp_clients import ROOT, SPEC, SPECGEN

ALLOWED_TOKEN = "tok-allowed-0123456789"
OTHER_TOKEN = "tok-other-0123456789"
ISSUER = "https://idp.example.test"
ISSUER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
STRANGER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
CODE = "console.log(JSON.stringify(Object.keys(memory).length > 0))"


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def fake() -> Iterator[FakeAgentMemory]:
    with FakeAgentMemory(TOKEN) as api:
        yield api


def _auth_file(tmp: Path, audience: str) -> Path:
    (tmp / "jwks.json").write_text(json.dumps({"keys": [ISSUER_KEY.as_dict(private=False)]}))
    path = tmp / "auth.json"
    path.write_text(
        json.dumps(
            {
                "bearer": [
                    {"sha256": _sha(ALLOWED_TOKEN), "caller": CALLER},
                    {"sha256": _sha(OTHER_TOKEN), "caller": "not-in-allowed-callers"},
                ],
                "jwt": {"jwks_file": "jwks.json", "issuer": ISSUER, "audience": audience},
            }
        )
    )
    return path


@contextmanager
def auth_server(
    fake: FakeAgentMemory,
    tmp: Path,
    audit: Path,
    address: str = "127.0.0.1:0",
    *extra: str,
    auth: Path | None = None,
    grants: Path = GRANTS,
) -> Iterator[str]:
    # The audience is the server's public URL (behind a proxy), not the loopback port.
    auth = auth or _auth_file(tmp, AUDIENCE)
    proc = subprocess.Popen(
        [
            str(SPECGEN),
            "mcp",
            "--grants",
            str(grants),
            "--profile",
            PROFILE,
            "--spec",
            str(SPEC),
            "--base-url",
            fake.url,
            "--http",
            address,
            "--workers",
            "0",
            "--auth",
            str(auth),
            "--audit",
            str(audit),
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, TOKEN_ENV: TOKEN},
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.match(r"specgen: MCP server on (http://\S+:\d+/mcp)$", line.strip())
        assert found, f"no URL announced: {line!r}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


AUDIENCE = "https://mcp.example.test/mcp"


def _jwt(key: RSAKey = ISSUER_KEY, alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": CALLER, "iat": now, "exp": now + 300}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": "k1"}, body, key)


def _verified(token: str, tmp: Path) -> str | None:
    """The caller CallerVerifier finds in `token` under the test auth file, or None."""
    verifier = CallerVerifier(load_auth(_auth_file(tmp, AUDIENCE)))
    found = anyio.run(verifier.verify_token, token)
    return found.client_id if found is not None else None


@pytest.mark.parametrize(
    "sub",
    [
        "alice\x1b[2J",  # a terminal escape: clears the screen of whoever reads it
        "alice\nspecgen: approve? ",  # a second line, drawing a fake prompt
        "eve\u202ealice",  # a right-to-left override: reads as another name
        "ali\u200bce",  # a zero-width space: looks like an allowed caller
        " alice",
        "",
        "a" * 257,
        7,
        True,
        ["alice"],
    ],
)
def test_a_caller_claim_that_is_not_a_plain_printable_id_is_refused(
    sub: object, tmp_path: Path
) -> None:
    assert _verified(_jwt(sub=sub), tmp_path) is None


def test_a_plain_caller_claim_and_an_audience_list_holding_ours_are_accepted(
    tmp_path: Path,
) -> None:
    assert _verified(_jwt(), tmp_path) == CALLER
    assert _verified(_jwt(aud=["https://other.test", AUDIENCE]), tmp_path) == CALLER
    assert _verified(_jwt(sub="a" * 256), tmp_path) == "a" * 256


@pytest.mark.parametrize(
    "claims",
    [
        {"nbf": int(time.time()) + 600},  # not yet valid
        {"iat": int(time.time()) + 600},  # issued in the future
        {"exp": True},  # a boolean is no time
        {"exp": str(int(time.time()) + 300)},
        {"aud": AUDIENCE + "/"},
        {"aud": ["https://other.test"]},
        {"iss": [ISSUER]},
    ],
)
def test_jwt_time_audience_and_issuer_tricks_are_refused(
    claims: dict[str, Any], tmp_path: Path
) -> None:
    assert _verified(_jwt(**claims), tmp_path) is None


def test_an_auth_file_caller_with_a_control_character_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"bearer": [{"sha256": _sha("t"), "caller": "ops\x1b[2J"}]}))
    with pytest.raises(AuthFileError, match="printable"):
        load_auth(path)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _part(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value).encode())


def _claims() -> dict[str, Any]:
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": CALLER, "exp": int(time.time()) + 300}


def _unsigned() -> str:
    """alg "none": no signature at all (RFC 7519 section 6)."""
    return f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(_claims())}."


def _hmac_with_public_key() -> str:
    """HS256 keyed with the issuer's public key (PEM), which anyone may hold: the
    algorithm confusion a verifier that trusts the header's alg falls for."""
    signing_input = f"{_part({'alg': 'HS256', 'typ': 'JWT', 'kid': 'k1'})}.{_part(_claims())}"
    secret = ISSUER_KEY.as_pem(private=False)
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


async def _call(url: str, token: str, tool: str, args: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool(tool, args)


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_no_token_and_bad_tokens_get_401_with_resource_metadata(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    now = int(time.time())
    bad = {
        "none": None,
        "unknown static": "not-a-known-token",
        "expired": _jwt(exp=now - 60, iat=now - 400),
        "wrong audience": _jwt(aud="https://other.example.test/mcp"),
        "wrong issuer": _jwt(iss="https://evil.example.test"),
        "other key": _jwt(key=STRANGER_KEY),
        "unsigned": _unsigned(),
        "no exp": _jwt(exp=None),
        # HS256 keyed with the issuer's public key, which anyone has (algorithm confusion)
        "hmac with the public key": _hmac_with_public_key(),
    }
    with auth_server(fake, tmp_path, tmp_path / "audit.jsonl") as url:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        base = {"Accept": "application/json, text/event-stream"}
        for why, token in bad.items():
            headers = base | ({"Authorization": f"Bearer {token}"} if token else {})
            reply = httpx.post(url, json=init, headers=headers, timeout=30)
            assert reply.status_code == 401, why
            challenge = reply.headers["www-authenticate"]
            assert challenge.startswith("Bearer "), why
            metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge)
            assert metadata_url, why
            assert metadata_url.group(1) == (
                "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
            )
        good = httpx.post(
            url, json=init, headers=base | {"Authorization": f"Bearer {_jwt()}"}, timeout=30
        )
        assert good.status_code == 200
        origin = url.removesuffix("/mcp")
        meta = httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=30)
        assert meta.status_code == 200
        assert meta.json()["resource"] == AUDIENCE
        assert meta.json()["authorization_servers"] == [ISSUER]
    assert not (tmp_path / "audit.jsonl").read_text()  # nothing ran


def test_static_token_and_jwt_run_as_their_caller_and_the_audit_names_it(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"

    async def main(url: str) -> None:
        for token in (ALLOWED_TOKEN, _jwt()):
            result = await _call(url, token, "execute", {"code": CODE})
            assert not result.is_error, _text(result)
            assert json.loads(_text(result))["stdout"] == "true\n"

    with auth_server(fake, tmp_path, audit) as url:
        anyio.run(main, url)
    lines = _audit(audit)
    assert [line["caller"] for line in lines] == [CALLER, CALLER]
    assert all(list(line)[:2] == ["profile", "caller"] for line in lines)


def test_a_caller_the_profile_does_not_allow_is_refused(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    stranger_jwt = _jwt(sub="mallory")

    async def main(url: str) -> None:
        for token in (OTHER_TOKEN, stranger_jwt):
            for tool, args in (
                ("execute", {"code": CODE}),
                ("search", {"query": "remember"}),
                ("describe", {"operation": "memory.remember"}),
            ):
                result = await _call(url, token, tool, args)
                assert result.is_error
                assert _text(result) == (
                    f"{tool}: refused: this grant is not available to the authenticated caller"
                )

    with auth_server(fake, tmp_path, audit) as url:
        anyio.run(main, url)
    lines = _audit(audit)
    assert [(line["caller"], line["not_run"]) for line in lines] == [
        ("not-in-allowed-callers", "caller_refused"),
        ("mallory", "caller_refused"),
    ]


def test_static_tokens_only_need_no_issuer_and_publish_no_metadata(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"bearer": [{"sha256": _sha(ALLOWED_TOKEN), "caller": CALLER}]}))
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    base = {"Accept": "application/json, text/event-stream"}
    with auth_server(fake, tmp_path, tmp_path / "a.jsonl", "127.0.0.1:0", auth=path) as url:
        refused = httpx.post(url, json=init, headers=base, timeout=30)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert "resource_metadata" not in refused.headers["www-authenticate"]
        origin = url.removesuffix("/mcp")
        assert httpx.get(f"{origin}/.well-known/oauth-protected-resource/mcp").status_code == 404
        with_token = base | {"Authorization": f"Bearer {ALLOWED_TOKEN}"}
        assert httpx.post(url, json=init, headers=with_token, timeout=30).status_code == 200
        # a JWT is no way in when the file configures none, however well signed
        with_jwt = base | {"Authorization": f"Bearer {_jwt()}"}
        assert httpx.post(url, json=init, headers=with_jwt, timeout=30).status_code == 401


def test_non_loopback_bind_with_auth_checks_host(fake: FakeAgentMemory, tmp_path: Path) -> None:
    """Bound on every address, the Host must be the bound address or an --allow-host."""
    with auth_server(
        fake, tmp_path, tmp_path / "a.jsonl", "0.0.0.0:0", "--allow-host", "mcp.example.test"
    ) as url:
        port = url.rsplit(":", 1)[1].removesuffix("/mcp")
        target = f"http://127.0.0.1:{port}/mcp"
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {ALLOWED_TOKEN}",
        }
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        for host, status in (
            ("mcp.example.test", 200),
            ("evil.example.test", 421),
            (f"127.0.0.1:{port}", 421),  # not the bound address (0.0.0.0) nor allowed
        ):
            reply = httpx.post(target, json=init, headers=headers | {"Host": host}, timeout=30)
            assert reply.status_code == status, host


def _run_cli(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(SPECGEN),
            "mcp",
            "--grants",
            str(GRANTS),
            "--profile",
            PROFILE,
            "--spec",
            str(SPEC),
            *extra,
        ],
        env={**os.environ, TOKEN_ENV: TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"bearer": [], "extra": 1}, "unknown key 'extra'"),
        ({"bearer": [{"sha256": "zz", "caller": "a"}]}, "bearer[0].sha256 must be 64"),
        ({"bearer": [{"sha256": "a" * 64, "caller": "a", "x": 1}]}, "unknown key 'x'"),
        ({}, "names no way in"),
        (
            {"jwt": {"jwks_file": "missing.json", "issuer": ISSUER, "audience": AUDIENCE}},
            "missing.json': No such file or directory",
        ),
        ({"jwt": {"jwks_file": "j", "issuer": ISSUER}}, "'audience' is required"),
    ],
)
def test_bad_auth_file_is_one_line_exit_1(tmp_path: Path, doc: Any, message: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps(doc))
    proc = _run_cli("--http", "127.0.0.1:0", "--auth", str(path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("specgen: --auth ")
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--http", "127.0.0.1:0", "--auth", "a.json", "--caller", CALLER],
            "specgen: --caller and --auth exclude each other: with --auth each token names"
            " its caller",
        ),
        (
            ["--auth", "a.json"],
            "specgen: --auth applies to --http only (stdio has one client, the one that"
            " started it)",
        ),
        (
            ["--http", "127.0.0.1:0"],
            "specgen: --caller is required (or --auth with --http, where each token names it)",
        ),
        (
            ["--http", "0.0.0.0:8080", "--auth", "a.json"],
            "specgen: --http '0.0.0.0:8080': no client sends a wildcard address as its Host;"
            " name the host clients use with --allow-host",
        ),
        (
            ["--http", "127.0.0.1:0", "--auth", "a.json", "--allow-host", "a b"],
            "specgen: --allow-host 'a b' must be HOST or HOST:PORT, as clients send it",
        ),
    ],
)
def test_option_conflicts_are_one_line(extra: list[str], message: str) -> None:
    proc = _run_cli(*extra)
    assert proc.returncode == 1
    assert proc.stderr == message + "\n"


def test_a_session_opened_by_one_caller_is_refused_to_another_callers_token(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    """The session id is no credential: a request carrying caller A's session id and
    caller B's (valid) token is refused, and B's token never runs under A's session."""
    with auth_server(fake, tmp_path, tmp_path / "a.jsonl") as url:
        accept = {"Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        a = {**accept, "Authorization": f"Bearer {ALLOWED_TOKEN}"}
        opened = httpx.post(url, json=init, headers=a, timeout=30)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for token in (OTHER_TOKEN, _jwt(sub="someone-else")):
            b = {**accept, "Authorization": f"Bearer {token}", "mcp-session-id": session}
            stolen = httpx.post(url, json=listing, headers=b, timeout=30)
            assert stolen.status_code in (403, 404), (stolen.status_code, stolen.text[:200])
            assert '"tools"' not in stolen.text
        # The session still works for the caller that opened it.
        notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        own = {**a, "mcp-session-id": session}
        httpx.post(url, json=notified, headers=own, timeout=30)
        mine = httpx.post(url, json=listing, headers=own, timeout=30)
        assert mine.status_code == 200 and '"tools"' in mine.text


class _JwksServer:
    """A loopback identity provider's JWKS endpoint whose key set can be changed."""

    def __init__(self, key: RSAKey) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.keys = [key]
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.fetches += 1
                body = json.dumps({"keys": [k.as_dict(private=False) for k in outer.keys]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_a_jwks_url_is_fetched_at_start_and_again_for_a_rotated_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.mcp import auth as auth_module

    idp = _JwksServer(ISSUER_KEY)
    try:
        block = {"jwt": {"jwks_url": idp.url, "issuer": ISSUER, "audience": AUDIENCE}}
        verifier = CallerVerifier(auth_module.parse_auth(block, "test", tmp_path))
        assert idp.fetches == 1
        assert anyio.run(verifier.verify_token, _jwt()).client_id == CALLER
        rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
        idp.keys = [rotated]
        token = jwt.encode({"alg": "RS256", "kid": "k2"}, _claims(), rotated)
        # Within the refresh interval an unknown key is not fetched for: a flood of bad
        # tokens costs the identity provider nothing.
        assert anyio.run(verifier.verify_token, token) is None
        assert idp.fetches == 1
        monkeypatch.setattr(auth_module, "JWKS_REFRESH_S", 0.0)
        assert anyio.run(verifier.verify_token, token).client_id == CALLER
        assert idp.fetches == 2
    finally:
        idp.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://idp.example.test/jwks.json", "must be https"),
        ("ftp://127.0.0.1/jwks.json", "must be https"),
        ("http://127.0.0.1:9/jwks.json", "ConnectError"),
    ],
)
def test_a_jwks_url_that_is_not_https_or_does_not_answer_is_refused(
    url: str, message: str, tmp_path: Path
) -> None:
    block = {"jwt": {"jwks_url": url, "issuer": ISSUER, "audience": AUDIENCE}}
    with pytest.raises(AuthFileError, match=message):
        from runtime.mcp.auth import parse_auth

        parse_auth(block, "test", tmp_path)


def test_jwks_file_and_url_exclude_each_other(tmp_path: Path) -> None:
    from runtime.mcp.auth import parse_auth

    both = {"jwks_file": "a", "jwks_url": "https://x", "issuer": ISSUER, "audience": AUDIENCE}
    for block in (both, {"issuer": ISSUER, "audience": AUDIENCE}):
        with pytest.raises(AuthFileError, match="one of 'jwks_file' and 'jwks_url'"):
            parse_auth({"jwt": block}, "test", tmp_path)
