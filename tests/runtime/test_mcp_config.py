"""`specgen mcp --config FILE`: a server of several APIs whose callers come from tokens.

The server is the real command on a loopback port, configured by a TOML file; the
clients are the official SDK's; the APIs are the two examples' fakes, each of which
accepts only its own key in its own scheme (Agent Memory: `Bearer`, Mem0: `Token`), so
a request that reached one with the other's credential would be refused there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema_rs
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from examples.mem0_grant import runner as mem0
from examples.mem0_grant.fake import FakeMem0
from examples.memory_grant import runner as memory
from examples.memory_grant.fake import FakeAgentMemory
from runtime.mcp.config import schema_text
from tests.runtime.test_mcp_clients import ROOT, SPECGEN

BOTH_TOKEN = "tok-both-apis-0123456789"
MEMORY_TOKEN = "tok-memory-only-0123456789"
STRANGER_TOKEN = "tok-no-profile-0123456789"
MEMORY_ONLY = "memory-only-agent"

REMEMBER = (
    'const A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";\n'
    'const m = await memory.agent_memory_remember(A, NS, ME, {content: "Prefers email."});\n'
)
ADD = (
    'const r = await mem0.memories_create({user_id: "alice", '
    'messages: [{role: "user", content: "Alice likes tea."}]});\n'
)


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _grants(tmp: Path) -> Path:
    """Both examples' profiles in one grants file; Agent Memory also for MEMORY_ONLY."""
    profiles: dict[str, Any] = {}
    for example, extra in ((memory, [MEMORY_ONLY]), (mem0, [])):
        doc = json.loads(example.GRANTS.read_text())
        body = doc["profiles"][example.PROFILE]
        preamble = tmp / f"{example.PROFILE}.preamble.js"
        preamble.write_text((example.GRANTS.parent / body["preamble_file"]).read_text())
        body["preamble_file"] = preamble.name
        body["allowed_callers"] = [*body["allowed_callers"], *extra]
        profiles[example.PROFILE] = body
    path = tmp / "grants.json"
    path.write_text(json.dumps({"profiles": profiles}))
    return path


def _config(tmp: Path, memory_url: str, mem0_url: str, workers: int = 0, **extra: str) -> Path:
    _grants(tmp)
    lines = [
        'grants = "grants.json"',
        'listen = "127.0.0.1:0"',
        f"workers = {workers}",
        *(f"{key} = {value}" for key, value in extra.items()),
        "",
        "[[profiles]]",
        f'name = "{memory.PROFILE}"',
        f'spec = "{ROOT / "examples/memory_grant/agent-memory.openapi.json"}"',
        f'base_url = "{memory_url}"',
        "",
        "[[profiles]]",
        f'name = "{mem0.PROFILE}"',
        f'spec = "{ROOT / "examples/mem0_grant/mem0.openapi.json"}"',
        f'base_url = "{mem0_url}"',
        "",
        "[[auth.bearer]]",
        f'sha256 = "{_sha(BOTH_TOKEN)}"',
        f'caller = "{memory.CALLER}"',
        "",
        "[[auth.bearer]]",
        f'sha256 = "{_sha(MEMORY_TOKEN)}"',
        f'caller = "{MEMORY_ONLY}"',
        "",
        "[[auth.bearer]]",
        f'sha256 = "{_sha(STRANGER_TOKEN)}"',
        'caller = "nobody-lists-me"',
        "",
        "[audit]",
        'file = "audit.jsonl"',
    ]
    path = tmp / "server.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def fakes() -> Iterator[tuple[FakeAgentMemory, FakeMem0]]:
    with FakeAgentMemory(memory.TOKEN) as a, FakeMem0(mem0.TOKEN) as b:
        yield a, b


@contextmanager
def config_server(config: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [str(SPECGEN), "mcp", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, memory.TOKEN_ENV: memory.TOKEN, mem0.TOKEN_ENV: mem0.TOKEN},
        cwd="/",  # the config's paths are its own folder's, not the working directory's
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


async def _tools(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [await session.call_tool(tool, args) for tool, args in calls]


def _text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "pooled-worker-tier"])
def test_one_execute_calls_two_apis_each_with_its_own_profiles_key(
    fakes: tuple[FakeAgentMemory, FakeMem0], tmp_path: Path, workers: int
) -> None:
    agent_memory, mem0_api = fakes
    config = _config(tmp_path, agent_memory.url, mem0_api.url, workers)
    code = REMEMBER + ADD + 'console.log(m.success, r[0].status || "ok");'
    with config_server(config) as url:
        (result,) = anyio.run(_tools, url, BOTH_TOKEN, [("execute", {"code": code})])
    answer = json.loads(_text(result))
    assert answer["exit_code"] == 0, answer
    assert [(r.method, r.carried_token, r.status) for r in agent_memory.requests] == [
        ("POST", True, 200)
    ]
    assert [(r.method, r.carried_token, r.status < 300) for r in mem0_api.requests] == [
        ("POST", True, True)
    ]
    (line,) = (tmp_path / "audit.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["profile"] == f"{memory.PROFILE},{mem0.PROFILE}"
    assert record["profiles"] == [memory.PROFILE, mem0.PROFILE]
    assert record["caller"] == memory.CALLER
    assert [row["profile"] for row in record["calls"]] == [memory.PROFILE, mem0.PROFILE]
    assert record["isolation"] == ("process" if workers == 0 else "worker")


def test_a_caller_gets_only_the_profiles_that_allow_it(
    fakes: tuple[FakeAgentMemory, FakeMem0], tmp_path: Path
) -> None:
    agent_memory, mem0_api = fakes
    config = _config(tmp_path, agent_memory.url, mem0_api.url)
    forged = (
        "const raw = await globalThis.__coderunner_host_start(JSON.stringify("
        "{method: 'POST', path: '/v1/memories/', client: 'mem0', body: {user_id: 'alice'}}));\n"
        "console.log(typeof mem0, raw.status);"
    )
    with config_server(config) as url:
        narrow = anyio.run(
            _tools,
            url,
            MEMORY_TOKEN,
            [
                ("execute", {"code": forged}),
                ("search", {"query": "add memories for a user"}),
                ("describe", {"operation": "mem0.memories_create"}),
                ("describe", {"operation": "memory.agent_memory_remember"}),
            ],
        )
        wide = anyio.run(
            _tools,
            url,
            BOTH_TOKEN,
            [
                ("search", {"query": "add memories"}),
                ("describe", {"operation": "mem0.memories_create"}),
            ],
        )
        stranger = anyio.run(_tools, url, STRANGER_TOKEN, [("execute", {"code": "1"})])
        anonymous = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    ran, searched, other, own = narrow
    answer = json.loads(_text(ran))
    assert answer["stdout"].split() == ["undefined", "403"], answer
    assert mem0_api.requests == []  # nothing reached the API the caller was not given
    assert "mem0." not in _text(searched) and "memory." in _text(searched)
    assert other.is_error and not own.is_error
    assert "mem0.memories_create" in _text(wide[0]) and not wide[1].is_error
    assert stranger[0].is_error and "not available" in _text(stranger[0])
    assert anonymous.status_code == 401


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SPECGEN), "mcp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, memory.TOKEN_ENV: memory.TOKEN, mem0.TOKEN_ENV: mem0.TOKEN},
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t + "colour = 1\n", r"Additional properties are not allowed \('colour'"),
        (lambda t: t.replace('grants = "grants.json"', 'grants = "gone.json"'), "is not a file"),
        (
            lambda t: t.replace(f'name = "{mem0.PROFILE}"', 'name = "stripe"'),
            r'profiles: "stripe" is not a profile of',
        ),
        (lambda t: t.replace("workers = 0", "workers = -1"), r"workers: -1 is less than"),
        (lambda t: t.replace("workers = 0", "workers = [0"), r"not TOML"),
        (lambda t: t.replace('listen = "127.0.0.1:0"\n', ""), "auth applies to listen"),
        (
            lambda t: t.replace("[audit]\n", "[audit]\nstdout = true\n").replace(
                'listen = "127.0.0.1:0"\n', ""
            ),
            "stdout is the MCP channel",
        ),
        (
            lambda t: t.replace(
                'spec = "' + str(ROOT / "examples/mem0_grant/mem0.openapi.json"),
                'spec = "missing.json',
            ),
            "missing.json",
        ),
    ],
)
def test_a_bad_config_is_one_line_and_exit_1(change: Any, message: str, tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    config.write_text(change(config.read_text()))
    proc = _run("--config", str(config))
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("specgen: ") and re.search(message, proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr


def test_config_excludes_the_flags(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    proc = _run("--config", str(config), "--timeout", "3")
    assert (proc.returncode, proc.stderr) == (
        1,
        "specgen: --config names everything the server needs; drop --timeout\n",
    )
    proc = _run("--profile", "x")
    assert (proc.returncode, proc.stderr) == (
        1,
        "specgen: --grants is required (or --config FILE)\n",
    )


def test_schema_is_printed_and_the_docs_team_config_follows_it(tmp_path: Path) -> None:
    proc = _run("schema")
    assert proc.returncode == 0 and proc.stdout == schema_text()
    validator = jsonschema_rs.validator_for(json.loads(proc.stdout))
    docs = (ROOT / "docs/mcp.md").read_text()
    block = re.search(r"## A server config for a team.*?```toml\n(.*?)```", docs, re.S)
    assert block, "docs/mcp.md shows no team config"
    team = tomllib.loads(block.group(1))
    assert validator.is_valid(team), list(validator.iter_errors(team))
    assert len(team["profiles"]) == 3 and len(team["auth"]["bearer"]) == 2
    assert team["quota_store"].startswith("redis://") and team["telemetry"]["otlp_endpoint"]
    assert not validator.is_valid({**team, "listen_on": "x"})
    out = tmp_path / "schema.json"
    assert _run("schema", "-o", str(out)).returncode == 0
    assert out.read_text() == schema_text()
