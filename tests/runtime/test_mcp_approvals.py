"""Held calls over MCP, with the official SDK client's elicitation callback.

The server is `build_server` over a real grant and the client the SDK's `Client`
connected to it in process (legacy handshake, where the server can send the
elicitation request); the API is a loopback fake, so what was sent is what it saw.
Runs go through every way `specgen mcp` can run them: this process's threads
(`--workers 0`), the pool's worker processes (`--isolation process`), and an engine
process on the isolated tiers (`worker`, the default with workers, and `gvisor`),
where the broker asks in this process and the engine's clock follows its holds.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.client import Client

from runtime.mcp.approval import Decision
from runtime.mcp.audit import AuditLog
from runtime.mcp.runner import open_grant
from runtime.mcp.server import build_server, prepare
from tests.runtime.loopback import FakeAPI

KEY = "mcp-approval-key-90ab"
SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "items", "version": "1"},
    "servers": [{"url": "http://127.0.0.1"}],
    "paths": {
        "/v1/items": {
            "post": {
                "operationId": "createItem",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}
POST = """
const r = await host.post("/v1/items", {note: "hello\\u0007"}).catch(e => e);
console.log(r instanceof Error ? r.message.trim() : JSON.stringify(r));
"""


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _server(
    tmp_path: Path,
    api: FakeAPI,
    workers: int,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    isolation: str | None = None,
    audit: AuditLog | None = None,
    **profile: Any,
) -> Any:
    """A server over the one-route grant; `profile` adds fields to the grant's profile."""
    monkeypatch.setenv("MCP_APPROVAL_KEY", KEY)
    (tmp_path / "spec.json").write_text(json.dumps(SPEC), "utf-8")
    grant = {
        "base_url": api.url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "MCP_APPROVAL_KEY"},
        "allow": [{"route": "POST /v1/items", "approve": True}],
        **profile,
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"p": grant}}), "utf-8")
    opened = open_grant(
        tmp_path / "grants.json", "p", "agent", timeout_s=5.0, workers=workers, isolation=isolation
    )
    pool = opened._pool  # the server runs for the test's length; its workers must not outlive it
    if pool is not None:
        request.addfinalizer(pool.close)
    return build_server(prepare(str(tmp_path / "spec.json"), opened), audit)


def _execute(server: Any, code: str, callback: Any, mode: str = "legacy") -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with Client(server, elicitation_callback=callback, mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool("execute", {"code": code})
            text = result.content[0].text  # type: ignore[union-attr]
            answer: dict[str, Any] = json.loads(text)
            return answer

    return anyio.run(go)


class Person:
    """An elicitation callback: answers `content` after `delay_s`, records the asks."""

    def __init__(
        self, action: str = "accept", content: dict[str, Any] | None = None, delay_s: float = 0.0
    ):
        self.action = action
        self.content = content
        self.delay_s = delay_s
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        await anyio.sleep(self.delay_s)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


#: (workers, isolation) for each way a run can go: threads here, worker processes,
#: an engine process on each isolated tier.
EVERY_TIER = [(0, "process"), (1, "process"), (1, "worker"), (1, "gvisor")]
POOLED_TIERS = [(1, "process"), (1, "worker")]


@pytest.mark.parametrize(("workers", "isolation"), EVERY_TIER)
def test_an_approved_post_reaches_the_api_with_exactly_the_previewed_body(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
    isolation: str,
    request: pytest.FixtureRequest,
) -> None:
    person = Person(content={"approve": True})
    server = _server(tmp_path, api, workers, monkeypatch, request, isolation)
    answer = _execute(server, POST, person)
    assert answer["stdout"] == '{"ok":true}\n', answer
    [asked] = person.asked
    [seen] = api.requests
    message = asked.message  # type: ignore[union-attr]
    assert f"sha256 {hashlib.sha256(seen.body).hexdigest()}" in message
    assert seen.body.decode() in message  # the preview is the body as sent ("\\u0007" escaped)
    assert "\x07" not in message
    assert KEY not in message
    assert "POST /v1/items" in message and "caller agent" in message
    schema = asked.requested_schema  # type: ignore[union-attr]
    assert set(schema["properties"]) == set(Decision.model_fields) == {"approve", "whole_run"}
    assert answer["calls"] == [
        {"seq": 1, "method": "POST", "route": "/v1/items", "status": 200, "approval": "approved"}
    ]


@pytest.mark.parametrize(("workers", "isolation"), POOLED_TIERS)
def test_one_yes_for_the_whole_run_covers_a_loops_writes(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    workers: int,
    isolation: str,
) -> None:
    person = Person(content={"approve": True, "whole_run": True})
    code = 'for (let i = 0; i < 3; i++) await host.post("/v1/items", {i}); console.log("ok")'
    server = _server(tmp_path, api, workers, monkeypatch, request, isolation)
    answer = _execute(server, code, person)
    assert answer["stdout"] == "ok\n", answer
    assert len(person.asked) == 1
    assert [s.body for s in api.requests] == [b'{"i":0}', b'{"i":1}', b'{"i":2}']


@pytest.mark.parametrize("isolation", ["process", "worker"])
@pytest.mark.parametrize(
    ("action", "content"), [("decline", None), ("cancel", None), ("accept", {"approve": False})]
)
def test_a_declined_post_never_reaches_the_api(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    action: str,
    content: dict[str, Any] | None,
    isolation: str,
) -> None:
    server = _server(tmp_path, api, 1, monkeypatch, request, isolation)
    answer = _execute(server, POST, Person(action, content))
    assert answer["stdout"] == "host api 403: approval declined\n"
    assert api.requests == []
    assert answer["calls"][0]["approval"] == "declined"
    assert any(h.startswith("approval declined") for h in answer["hints"])


@pytest.mark.parametrize(
    "content",
    [
        {"approve": "yes"},  # strings, numbers: not the form's boolean
        {"approve": "true"},
        {"approve": 1},
        {"approve": [True]},
        {"whole_run": True},  # no approve at all
        {"approve": True, "whole_run": "yes"},  # a malformed form is no answer
    ],
)
def test_an_accepted_answer_that_is_not_the_forms_booleans_is_a_no(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    content: dict[str, Any],
) -> None:
    answer = _execute(
        _server(tmp_path, api, 0, monkeypatch, request), POST, Person("accept", content)
    )
    assert answer["stdout"] == "host api 403: approval declined\n", answer
    assert api.requests == []
    assert answer["calls"][0]["approval"] == "declined"


@pytest.mark.parametrize(("workers", "isolation"), POOLED_TIERS)
def test_an_approval_that_waits_10_s_in_a_5_s_run_still_completes(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    workers: int,
    isolation: str,
) -> None:
    server = _server(tmp_path, api, workers, monkeypatch, request, isolation)
    started = time.monotonic()
    person = Person(content={"approve": True}, delay_s=10.0)
    answer = _execute(server, POST, person)
    assert time.monotonic() - started >= 10
    assert (answer["exit_code"], answer["timed_out"]) == (0, False), answer
    assert answer["stdout"] == '{"ok":true}\n'
    assert len(api.requests) == 1


@pytest.mark.parametrize(("workers", "isolation"), POOLED_TIERS)
def test_a_client_without_elicitation_gets_the_call_refused_with_a_hint(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    workers: int,
    isolation: str,
) -> None:
    server = _server(tmp_path, api, workers, monkeypatch, request, isolation)
    answer = _execute(server, POST, None)
    assert answer["stdout"].startswith("host api 403: approval declined")
    assert api.requests == []
    assert answer["calls"][0]["approval"] == "unavailable"
    assert any("form elicitation" in h for h in answer["hints"]), answer["hints"]


def test_a_2026_session_whose_client_cannot_elicit_is_refused_not_hung(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # The 2026-07-28 protocol, and a client that declared no elicitation capability.
    answer = _execute(_server(tmp_path, api, 0, monkeypatch, request), POST, None, mode="auto")
    assert api.requests == []
    assert answer["calls"][0]["approval"] == "unavailable"


def test_over_stdio_the_installed_server_asks_and_sends_exactly_what_it_showed(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # The real `specgen mcp` process, its default pool of worker processes, stdio.
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    _server(tmp_path, api, 0, monkeypatch, request)  # writes spec.json and grants.json
    specgen = Path(sys.executable).with_name("specgen")
    args = ["mcp", "--grants", str(tmp_path / "grants.json"), "--profile", "p"]
    args += ["--caller", "agent", "--spec", str(tmp_path / "spec.json"), "--workers", "1"]
    params = StdioServerParameters(
        command=str(specgen), args=args, env={"MCP_APPROVAL_KEY": KEY}, cwd=str(tmp_path)
    )
    yes, no = Person(content={"approve": True}), Person("decline")
    answers: list[dict[str, Any]] = []

    async def go() -> None:
        for person in (yes, no):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write, elicitation_callback=person) as session,
            ):
                await session.initialize()
                result = await session.call_tool("execute", {"code": POST})
                answers.append(json.loads(result.content[0].text))  # type: ignore[union-attr]

    anyio.run(go)
    assert answers[0]["stdout"] == '{"ok":true}\n', answers[0]
    assert answers[1]["stdout"] == "host api 403: approval declined\n", answers[1]
    [seen] = api.requests
    message = yes.asked[0].message  # type: ignore[union-attr]
    assert f"sha256 {hashlib.sha256(seen.body).hexdigest()}" in message
    assert seen.body.decode() in message
    assert len(no.asked) == 1
