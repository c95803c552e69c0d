"""Held calls on the 2026-07-28 protocol, where the server cannot send a request: the
question rides an `input_required` result and the official SDK client's retry carries
the person's answer (its elicitation callback), while the run waits in the server.

The client is the SDK's `Client` in `auto` mode, which negotiates 2026-07-28 with the
in-process server and drives the retry loop itself; the tests that tamper with the
state drive it by hand with `allow_input_required=True`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from runtime.mcp.audit import AuditLog
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_mcp_approvals import KEY, POST, Person, _execute, _server, api

__all__ = ["api"]  # the fixture, imported for the tests below

RUNS = [(0, "process"), (1, "process"), (1, "worker")]


def _audit(tmp_path: Path) -> tuple[AuditLog, Path]:
    path = tmp_path / "audit.jsonl"
    return AuditLog(path, stderr=False), path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize(("workers", "isolation"), RUNS)
def test_an_approved_post_is_asked_in_input_required_and_sends_what_it_showed(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    workers: int,
    isolation: str,
) -> None:
    audit, path = _audit(tmp_path)
    server = _server(tmp_path, api, workers, monkeypatch, request, isolation, audit)
    person = Person(content={"approve": True})
    answer = _execute(server, POST, person, mode="auto")
    assert answer["stdout"] == '{"ok":true}\n', answer
    [asked] = person.asked
    [seen] = api.requests
    message = asked.message  # type: ignore[union-attr]
    assert f"sha256 {hashlib.sha256(seen.body).hexdigest()}" in message
    assert seen.body.decode() in message
    assert KEY not in message
    assert answer["calls"][0]["approval"] == "approved"
    [line] = _lines(path)
    [call] = line["calls"]
    assert (call["approval"], call["approval_channel"]) == ("approved", "mcp-input-required")


@pytest.mark.parametrize(
    ("action", "content"),
    [("decline", None), ("accept", {"approve": False}), ("accept", {"approve": "yes"})],
)
def test_a_declined_post_never_reaches_the_api(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    action: str,
    content: dict[str, Any] | None,
) -> None:
    server = _server(tmp_path, api, 0, monkeypatch, request)
    answer = _execute(server, POST, Person(action, content), mode="auto")
    assert answer["stdout"] == "host api 403: approval declined\n", answer
    assert api.requests == []
    assert answer["calls"][0]["approval"] == "declined"


@pytest.mark.parametrize(("whole_run", "questions"), [(False, 3), (True, 1)])
def test_each_held_call_of_a_loop_is_a_round_unless_the_first_yes_covers_the_run(
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    whole_run: bool,
    questions: int,
) -> None:
    person = Person(content={"approve": True, "whole_run": whole_run})
    code = 'for (let i = 0; i < 3; i++) await host.post("/v1/items", {i}); console.log("ok")'
    answer = _execute(_server(tmp_path, api, 1, monkeypatch, request), code, person, mode="auto")
    assert answer["stdout"] == "ok\n", answer
    assert len(person.asked) == questions
    assert [s.body for s in api.requests] == [b'{"i":0}', b'{"i":1}', b'{"i":2}']


def test_the_time_a_person_takes_does_not_count_against_the_run(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    server = _server(tmp_path, api, 1, monkeypatch, request, "worker")  # 5 s run timeout
    started = time.monotonic()
    answer = _execute(server, POST, Person(content={"approve": True}, delay_s=6.0), mode="auto")
    assert time.monotonic() - started >= 6
    assert (answer["exit_code"], answer["timed_out"]) == (0, False), answer
    assert len(api.requests) == 1


def _first_round(
    session: Any, code: str = POST
) -> types.InputRequiredResult:  # the question, not yet answered
    async def go() -> types.InputRequiredResult:
        first = await session.call_tool("execute", {"code": code}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        return first

    return go()  # type: ignore[return-value]


YES = types.ElicitResult(action="accept", content={"approve": True})


def test_a_forged_or_moved_state_is_refused_and_the_genuine_one_still_works(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    server = _server(tmp_path, api, 0, monkeypatch, request)
    refusals: list[str] = []

    async def go() -> str:
        async with Client(server, elicitation_callback=Person(), mode="auto") as client:
            first = await _first_round(client.session)
            [key] = first.input_requests or {}
            state = first.request_state or ""
            # Sealed: the handle is not readable, nor forgeable. The JSON key is looked for
            # with its quotes, which base64 never holds: the bare letters `run` turn up
            # in about one random state in 1,800 (a CI run failed on one).
            _, _, body = state.partition(".")
            sealed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            assert '"run"' not in state and body and b'"run"' not in sealed
            forged = [
                ({"code": POST}, json.dumps({"run": "x", "ask": key})),  # a state made up
                ({"code": POST}, state[:-2] + ("AA" if state[-2:] != "AA" else "BB")),
                ({"code": POST + "\n// other code"}, state),  # moved to other arguments
            ]
            for arguments, sent in forged:
                try:
                    await client.session.call_tool(
                        "execute",
                        arguments,
                        input_responses={key: YES},
                        request_state=sent,
                        allow_input_required=True,
                    )
                except MCPError as exc:
                    refusals.append(str(exc))
            assert api.requests == []  # nothing was sent on a forged answer
            final = await client.session.call_tool(
                "execute",
                {"code": POST},
                input_responses={key: YES},
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(final, types.CallToolResult), final
            return final.content[0].text  # type: ignore[union-attr]

    answer = json.loads(anyio.run(go))
    assert len(refusals) == 3, refusals
    assert all("requestState" in r for r in refusals), refusals
    assert answer["stdout"] == '{"ok":true}\n', answer
    assert len(api.requests) == 1


def test_a_client_that_never_comes_back_leaves_a_timed_out_call_on_the_record(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    audit, path = _audit(tmp_path)
    server = _server(tmp_path, api, 0, monkeypatch, request, None, audit, approval_timeout_s=1)

    async def go() -> tuple[types.InputRequiredResult, str]:
        async with Client(server, elicitation_callback=Person(), mode="auto") as client:
            first = await _first_round(client.session)
            deadline = time.monotonic() + 10
            while not path.exists() or not path.read_text("utf-8"):
                assert time.monotonic() < deadline, "the run was never audited"
                await anyio.sleep(0.05)
            [key] = first.input_requests or {}
            late = await client.session.call_tool(
                "execute",
                {"code": POST},
                input_responses={key: YES},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(late, types.CallToolResult), late
            return first, late.content[0].text  # type: ignore[union-attr]

    _, late = anyio.run(go)
    [line] = _lines(path)
    assert line["calls"][0]["approval"] == "timed_out"
    assert api.requests == []  # a yes after the timeout sends nothing
    assert json.loads(late)["calls"][0]["approval"] == "timed_out"


def test_a_parked_run_takes_answers_only_from_the_caller_it_runs_for() -> None:
    from types import SimpleNamespace

    from runtime import Answer, Question
    from runtime.mcp.round_trips import GONE, RoundTrips

    question = Question(
        "p", "alice", "POST", "/v1/items", "/v1/items", (), (), "", 0, "", "", False
    )
    answers: list[Answer | None] = []

    def work(approver: Any) -> str:
        answers.append(approver(question, 5.0))
        return "ran"

    def finish(outcome: object) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(outcome))])

    async def go() -> tuple[Any, Any]:
        trips = RoundTrips()
        parked = trips.open("alice")
        trips.start(parked, work, finish, lambda: None)
        first = await trips.next_answer(parked)
        [key] = first.input_requests
        ctx = SimpleNamespace(request_state=first.request_state, input_responses={key: YES})
        return await trips.resume(ctx, "bob"), await trips.resume(ctx, "alice")  # type: ignore[arg-type]

    bobs, alices = anyio.run(go)
    assert (bobs.is_error, bobs.content[0].text) == (True, GONE)
    assert alices.content[0].text == "ran"
    assert answers == [Answer.YES]


def test_a_run_whose_answer_cannot_be_made_still_frees_its_slot() -> None:
    from runtime.mcp.round_trips import RoundTrips

    released: list[bool] = []

    def finish(outcome: object) -> types.CallToolResult:
        raise OSError("the audit file is gone")

    async def go() -> Any:
        trips = RoundTrips()
        parked = trips.open(None)
        trips.start(parked, lambda approver: "ran", finish, lambda: released.append(True))
        return await trips.next_answer(parked)

    answer = anyio.run(go)
    assert released == [True]
    assert answer.is_error and "internal error (OSError)" in answer.content[0].text
