"""`specgen mcp` end to end with the official SDK's clients, over stdio and streamable HTTP.

The server is the installed `specgen mcp` command in a subprocess, the API is the
example's fake Agent Memory on loopback, and every JSON-RPC message the client sends or
receives is recorded, so "no MCP message ever contains the key" is checked on the wire
format the client actually saw, both ways.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from examples.memory_grant.fake import FakeAgentMemory
from examples.memory_grant.runner import CALLER, GRANTS, PROFILE, RUNS, TOKEN, TOKEN_ENV

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples/memory_grant/agent-memory.openapi.json"
SPECGEN = Path(sys.executable).with_name("specgen")
RUN1 = (RUNS / "1-store-recall-read.js").read_text()
RUN4 = (RUNS / "4-route-not-granted.js").read_text()


class Wire:
    """Every message one client session sent and received, as JSON text."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def record(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if message is not None:
            self.messages.append(message.model_dump_json(by_alias=True))

    def wrap(self, read: Any, write: Any) -> tuple[Any, Any]:
        wire = self

        class Read:
            async def receive(self) -> Any:
                item = await read.receive()
                wire.record(item)
                return item

            def __aiter__(self) -> Read:
                return self

            async def __anext__(self) -> Any:
                try:
                    return await self.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    raise StopAsyncIteration from None

            async def aclose(self) -> None:
                await read.aclose()

            async def __aenter__(self) -> Read:
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.aclose()

        class Write:
            async def send(self, item: Any) -> None:
                wire.record(item)
                await write.send(item)

            async def aclose(self) -> None:
                await write.aclose()

            async def __aenter__(self) -> Write:
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.aclose()

        return Read(), Write()


def _args(fake: FakeAgentMemory) -> list[str]:
    return [
        "mcp",
        "--grants",
        str(GRANTS),
        "--profile",
        PROFILE,
        "--caller",
        CALLER,
        "--spec",
        str(SPEC),
        "--base-url",
        fake.url,
    ]


@pytest.fixture
def fake() -> Iterator[FakeAgentMemory]:
    with FakeAgentMemory(TOKEN) as api:
        yield api


@asynccontextmanager
async def stdio_session(fake: FakeAgentMemory, wire: Wire) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=str(SPECGEN), args=_args(fake), env={TOKEN_ENV: TOKEN}, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write):
        read, write = wire.wrap(read, write)
        async with ClientSession(read, write) as session:
            yield session


@contextmanager
def http_server(fake: FakeAgentMemory) -> Iterator[str]:
    env = {**os.environ, TOKEN_ENV: TOKEN}
    proc = subprocess.Popen(
        [str(SPECGEN), *_args(fake), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.match(r"specgen: MCP server on (http://127\.0\.0\.1:\d+/mcp)$", line.strip())
        assert found, f"no URL announced: {line!r}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@asynccontextmanager
async def http_session(url: str, wire: Wire) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write):
        read, write = wire.wrap(read, write)
        async with ClientSession(read, write) as session:
            yield session


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def _the_scenario(session: ClientSession, fake: FakeAgentMemory) -> None:
    init = await session.initialize()
    assert init.server_info.name == "plimsoll-specgen"
    assert init.server_info.version == metadata.version("plimsoll-specgen") != ""
    instructions = init.instructions or ""
    assert "Only the\n3 operation(s)" in instructions
    assert "the key never enters\nthe sandbox" in instructions
    assert "per-run token" not in instructions

    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"execute", "search", "describe"}
    assert "never enters the sandbox" in (tools["execute"].description or "")

    hits = _text(await session.call_tool("search", {"query": "remember something new"}))
    first = hits.split("\n\n")[1]
    assert first.startswith("memory.agent_memory_remember(")
    assert "body: { content: string; sessionId?: string | null }" in first
    assert "namespace_delete" not in hits  # not permitted, so never offered

    described = _text(await session.call_tool("describe", {"operation": "agent_memory_recall"}))
    assert "candidates: Array<{ id: string; score: number;" in described
    missing = await session.call_tool("describe", {"operation": "agent_memory_namespace_delete"})
    assert missing.is_error and "permits no operation" in _text(missing)

    before = len(fake.requests)
    ran = await session.call_tool("execute", {"code": RUN1})
    assert not ran.is_error
    out = json.loads(_text(ran))
    assert out["exit_code"] == 0 and out["truncated"] is False
    assert "recalled: The customer wants replies in Spanish." in out["stdout"]
    assert [(c["method"], c["status"]) for c in out["calls"]] == [
        ("POST", 200),
        ("POST", 200),
        ("GET", 200),
    ]
    assert out["calls"][2]["route"].endswith("/memories/*")  # the grant's template, not the id
    sent = fake.requests[before:]
    assert len(sent) == 3 and all(r.carried_token for r in sent)  # the broker did add the key

    before = len(fake.requests)
    refused = json.loads(_text(await session.call_tool("execute", {"code": RUN4})))
    # the client's gate refused the call and the broker decided it too: both on the record
    assert refused["denied"] == 2 and refused["calls"] == []
    assert any(
        h.startswith("route not granted (2 calls): no allow entry") for h in refused["hints"]
    )
    assert len(fake.requests) == before  # a refused call never reaches the API

    failed = await session.call_tool("execute", {"code": "throw new Error('boom')"})
    assert failed.is_error
    assert "boom" in json.loads(_text(failed))["stderr"]


def _no_key(wire: Wire) -> None:
    assert len(wire.messages) >= 16  # both directions were recorded
    assert any('"method":"tools/call"' in m for m in wire.messages)
    assert any("recalled: The customer" in m for m in wire.messages)
    for message in wire.messages:
        assert TOKEN not in message


def test_stdio_client_end_to_end(fake: FakeAgentMemory) -> None:
    wire = Wire()

    async def main() -> None:
        async with stdio_session(fake, wire) as session:
            await _the_scenario(session, fake)

    anyio.run(main)
    _no_key(wire)


def test_http_client_end_to_end(fake: FakeAgentMemory) -> None:
    wire = Wire()

    async def main(url: str) -> None:
        async with http_session(url, wire) as session:
            await _the_scenario(session, fake)

    with http_server(fake) as url:
        anyio.run(main, url)
    _no_key(wire)


def test_a_long_run_does_not_block_the_server(fake: FakeAgentMemory) -> None:
    """While one execute spins, search still answers: runs are on worker threads."""
    finished: list[str] = []
    spin = "var t = Date.now(); while (Date.now() - t < 2500) {} console.log('spun');"

    async def main() -> None:
        async with stdio_session(fake, Wire()) as session:
            await session.initialize()

            async def run() -> None:
                result = await session.call_tool("execute", {"code": spin})
                assert json.loads(_text(result))["stdout"] == "spun\n"
                finished.append("execute")

            async def look() -> None:
                await anyio.sleep(0.5)  # let the execute start first
                await session.call_tool("search", {"query": "recall"})
                finished.append("search")

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                tg.start_soon(look)

    anyio.run(main)
    assert finished == ["search", "execute"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # the operator is told which name is wrong, as by `specgen run`
        (
            ["--profile", "nobody"],
            f'specgen: grants: {GRANTS}: no profile "nobody" (profiles: "{PROFILE}")',
        ),
        (
            ["--caller", "bob"],
            f'specgen: grants: profile "{PROFILE}": caller "bob" is not in its allowed_callers',
        ),
        (
            ["--http", "nowhere"],
            "specgen: --http 'nowhere' must be HOST:PORT (PORT 0 picks a free one)",
        ),
        (
            ["--http", "0.0.0.0:8080"],
            "specgen: --http '0.0.0.0:8080': serve on a loopback address (127.0.0.1, ::1, "
            "localhost); without --auth the server does not authenticate its clients",
        ),
        (["--timeout", "99"], "specgen: --timeout 99 must be more than 0 and at most 30 seconds"),
        (
            ["--memory-mb", "1"],  # as `specgen run` says it, not at every execute
            "specgen: --memory-mb 1 must be between 2 (the engine's minimum) and 4096",
        ),
    ],
)
def test_refusals_are_one_line_before_serving(
    fake: FakeAgentMemory, extra: list[str], message: str
) -> None:
    proc = subprocess.run(
        [str(SPECGEN), *_args(fake), *extra],
        env={**os.environ, TOKEN_ENV: TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert proc.stderr == message + "\n"
    assert proc.stdout == ""


def _serve_briefly(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`specgen mcp` on stdio with stdin at its end: it starts, then leaves at the EOF."""
    return subprocess.run(
        [str(SPECGEN), *argv],
        env={**os.environ, TOKEN_ENV: TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_grant_made_for_another_document_is_refused(fake: FakeAgentMemory) -> None:
    """Served, the model would be told nothing is permitted while every call goes out."""
    argv = _args(fake)
    argv[argv.index(str(SPEC))] = str(ROOT / "tests/data/smart-home.openapi.json")
    proc = _serve_briefly([*argv, "--workers", "0"])
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith('specgen: --spec "') and "smart-home.openapi.json" in line
    assert f'none of profile "{PROFILE}"\'s ' in line and "is a route of this document" in line


def test_allow_entries_the_document_lacks_are_served_with_a_note(
    fake: FakeAgentMemory, tmp_path: Path
) -> None:
    grants = json.loads(GRANTS.read_text())
    profile = grants["profiles"][PROFILE]
    profile["allow"].append("GET /v1/not-in-the-document")
    preamble = GRANTS.parent / profile["preamble_file"]
    (tmp_path / profile["preamble_file"]).write_bytes(preamble.read_bytes())
    (tmp_path / "grants.json").write_text(json.dumps(grants))
    argv = _args(fake)
    argv[argv.index(str(GRANTS))] = str(tmp_path / "grants.json")
    proc = _serve_briefly([*argv, "--workers", "0"])
    assert proc.returncode == 0, proc.stderr
    (note,) = proc.stderr.splitlines()
    assert note.startswith(f'specgen: note: 1 of profile "{PROFILE}"\'s ')
    assert '(e.g. "GET /v1/not-in-the-document")' in note


def test_a_document_on_stdin_is_refused_on_stdio_not_waited_for(fake: FakeAgentMemory) -> None:
    """stdin is the transport: a client keeps it open, so reading the document from it
    waited for ever (and a client that closed it had its messages read as the document)."""
    argv = [str(SPECGEN), *_args(fake)]
    argv[argv.index(str(SPEC))] = "-"
    proc = subprocess.Popen(
        argv,
        env={**os.environ, TOKEN_ENV: TOKEN},
        stdin=subprocess.PIPE,  # open, as a client holds it, and never written
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.wait(timeout=60)  # stdin still open: communicate() would close it
    finally:
        proc.kill()
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 1
    assert err == (
        "specgen: --spec -: on stdio, stdin carries the client's messages; "
        "name the document's file\n"
    )
    assert out == ""
