"""Every `specgen mcp` execute is on the record, with the official SDK client on both
transports: the audit line `specgen run` writes, on stderr and appended to --audit FILE.

The executes cover a run with granted calls, a refused call, a guest that throws, a
run that times out and one refused before any sandbox (code over the limit); each must
leave exactly one line, in order, whose trace id is the one its answer carries.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from examples.memory_grant.fake import FakeAgentMemory
from examples.memory_grant.runner import PROFILE, TOKEN, TOKEN_ENV
from runtime.mcp.server import MAX_CODE_CHARS
from tests.runtime.test_mcp_clients import ROOT, RUN1, RUN4, SPECGEN, _args, _text
from tests.runtime.test_run_cli import ONE_GRANTED_TWO_REFUSED


@pytest.fixture
def fake() -> Iterator[FakeAgentMemory]:
    with FakeAgentMemory(TOKEN) as api:
        yield api


OLD_LINE = '{"written": "before the server started"}\n'
SPIN = "for (;;) {}"


async def _executes(session: ClientSession) -> list[dict[str, Any]]:
    """Five executes; the answers' JSON (or, refused, the trace id we expect)."""
    await session.initialize()
    answers = []
    for code in (RUN1, RUN4, "throw new Error('boom')", SPIN):
        answers.append(json.loads(_text(await session.call_tool("execute", {"code": code}))))
    too_long = await session.call_tool("execute", {"code": "x" * (MAX_CODE_CHARS + 1)})
    assert too_long.is_error and "over" in _text(too_long)
    return answers


def _check(lines: list[str], answers: list[dict[str, Any]]) -> None:
    records = [json.loads(line) for line in lines]
    assert len(records) == 5, lines
    assert all(r["profile"] == PROFILE for r in records)
    ids = [r["trace_id"] for r in records]
    assert ids[:4] == [a["trace_id"] for a in answers]
    prefix = ids[0].rsplit(":", 1)[0]
    assert ids == [f"{prefix}:{n}" for n in range(1, 6)]
    stored, refused, threw, spun, too_long = records
    assert [c["method"] for c in stored["calls"]] == ["POST", "POST", "GET"]
    # RUN4's generated call (the client's gate refuses it, the broker decides it) and its
    # raw call: both refused, both counted, each with its rule
    assert refused["calls"] == [] and refused["denied"] == 2
    assert refused["refused"] == [{"rule": "route_not_granted"}] * 2
    assert threw["calls"] == [] and "not_run" not in threw
    assert answers[3]["timed_out"] is True and "not_run" not in spun
    assert too_long["not_run"] == "code_too_large" and too_long["calls"] == []
    for line in lines:
        assert TOKEN not in line


def _audit_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith('{"profile":')]


def _server_args(fake: FakeAgentMemory, audit: Path, workers: str = "0") -> list[str]:
    return [*_args(fake), "--audit", str(audit), "--timeout", "3", "--workers", workers]


@pytest.mark.parametrize("workers", ["0", "1"], ids=["threads", "worker-process"])
def test_stdio_executes_are_audited_on_stderr_and_in_the_file(
    fake: FakeAgentMemory, tmp_path: Path, workers: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_text(OLD_LINE)
    errlog = (tmp_path / "stderr.txt").open("w+")
    answers: list[dict[str, Any]] = []

    async def main() -> None:
        params = StdioServerParameters(
            command=str(SPECGEN),
            args=_server_args(fake, audit, workers),
            env={TOKEN_ENV: TOKEN, "PATH": os.environ.get("PATH", "")},
            cwd=str(ROOT),
        )
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            answers.extend(await _executes(session))

    anyio.run(main)
    errlog.seek(0)
    on_stderr = _audit_lines(errlog.read())
    written = audit.read_text()
    assert written.startswith(OLD_LINE)  # appended, never truncated
    in_file = written[len(OLD_LINE) :].splitlines()
    assert in_file == on_stderr
    _check(in_file, answers)


def test_http_executes_are_audited_on_stderr_and_in_the_file(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    stderr = (tmp_path / "stderr.txt").open("w+")
    proc = subprocess.Popen(
        [str(SPECGEN), *_server_args(fake, audit), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, TOKEN_ENV: TOKEN},
        cwd=ROOT,
    )
    answers: list[dict[str, Any]] = []
    try:
        url = _announced(tmp_path / "stderr.txt", proc)

        async def main() -> None:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                answers.extend(await _executes(session))

        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600
    in_file = audit.read_text().splitlines()
    assert in_file == _audit_lines((tmp_path / "stderr.txt").read_text())
    _check(in_file, answers)


def _announced(path: Path, proc: subprocess.Popen[bytes]) -> str:
    """The URL the server prints once it listens (its stderr goes to a file here)."""
    prefix = "specgen: MCP server on "
    for _ in range(600):
        for line in path.read_text().splitlines():
            if line.startswith(prefix):
                return line[len(prefix) :]
        assert proc.poll() is None, path.read_text()
        anyio.run(anyio.sleep, 0.05)
    raise AssertionError("the server never said where it listens")


def test_an_audit_file_that_cannot_be_opened_is_refused_before_serving(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [str(SPECGEN), *_args(fake), "--audit", str(tmp_path / "missing" / "audit.jsonl")],
        env={**os.environ, TOKEN_ENV: TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    missing = str(tmp_path / "missing" / "audit.jsonl")
    assert proc.stderr == f"specgen: --audit {missing!r}: No such file or directory\n"


def test_an_execute_with_one_granted_and_two_refused_calls_is_one_line_1_call_2_denied(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    """The calls the injected client would refuse reach the broker, which refuses them
    by rule: the answer's hints name the parameter, the audit line counts both."""
    audit = tmp_path / "audit.jsonl"
    answer: dict[str, Any] = {}

    async def main() -> None:
        params = StdioServerParameters(
            command=str(SPECGEN),
            args=_server_args(fake, audit),
            env={TOKEN_ENV: TOKEN, "PATH": os.environ.get("PATH", "")},
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("execute", {"code": ONE_GRANTED_TWO_REFUSED})
            answer.update(json.loads(_text(result)))

    before = len(fake.requests)
    anyio.run(main)
    assert len(fake.requests) == before + 1  # only the granted call reached the API
    assert "host api 403: parameter not granted: sort" in answer["stdout"], answer
    assert answer["denied"] == 2 and len(answer["calls"]) == 1
    assert any(h.startswith("parameter not granted: sort (1 call);") for h in answer["hints"])
    assert any(h.startswith("route not granted (1 call):") for h in answer["hints"])
    (line,) = audit.read_text().splitlines()
    record = json.loads(line)
    assert record["trace_id"] == answer["trace_id"]
    assert len(record["calls"]) == 1 and record["calls"][0]["status"] == 200
    assert record["denied"] == 2
    assert [r["rule"] for r in record["refused"]] == ["parameter_not_granted", "route_not_granted"]
    assert "newest" not in line and TOKEN not in line
