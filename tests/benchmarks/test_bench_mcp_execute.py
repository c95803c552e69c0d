"""What an MCP `execute` costs over stdio beside a bare SDK tool: printed, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). Both servers are real processes driven by the
official SDK's stdio client, one session each, their calls interleaved in rounds and
reported as medians, so a loaded box slows both sides alike:

- a bare SDK server (`MCPServer` with one tool returning "1"): the floor the SDK's own
  transport, session and tool dispatch set;
- `specgen mcp` on the Agent Memory example, `execute "console.log(1)"`, on the process
  tier (`--workers 0`) and on the default worker tier: a fresh engine, the grant's
  client, the run's audit line. Target: <= 1.4x the bare tool;
- the same with one call to the loopback fake API (`memory.agent_memory_memory_get`),
  beside a keep-alive GET to that fake (the loopback floor of one HTTP round trip).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from examples.memory_grant.fake import FakeAgentMemory
from examples.memory_grant.runner import TOKEN, TOKEN_ENV
from tests.benchmarks.test_bench_grant_size import _BARE_SERVER as BARE_SERVER
from tests.runtime.test_mcp_clients import ROOT, SPECGEN, _args

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

ROUNDS = 60
ONE_CALL = (
    'const m = await memory.agent_memory_memory_get("00000000000000000000000000000042",'
    ' "support-agent", "customer-42", "m-1").catch(e => e.message); console.log(1);'
)


async def _session(stack: AsyncExitStack, command: str, args: list[str]) -> ClientSession:
    params = StdioServerParameters(
        command=command,
        args=args,
        env={TOKEN_ENV: TOKEN, "PATH": os.environ.get("PATH", "")},
        cwd=str(ROOT),
    )
    errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115  # the stack closes it
    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def _timed(call: Callable[[], Awaitable[object]]) -> float:
    begun = time.perf_counter()
    await call()
    return time.perf_counter() - begun


def _execute(session: ClientSession, code: str) -> Callable[[], Awaitable[object]]:
    async def once() -> object:
        result = await session.call_tool("execute", {"code": code})
        assert not result.is_error, result
        return result

    return once


def test_bench_mcp_execute_beside_a_bare_sdk_tool() -> None:
    with FakeAgentMemory(TOKEN) as fake:
        floor_client = httpx.Client(trust_env=False)
        floor_url = fake.url + "/client/v4/accounts/0/agent-memory/namespaces"

        async def floor() -> object:
            return await anyio.to_thread.run_sync(lambda: floor_client.get(floor_url))

        async def main() -> dict[str, float]:
            async with AsyncExitStack() as stack:
                bare = await _session(stack, sys.executable, ["-c", BARE_SERVER])
                process = await _session(stack, str(SPECGEN), [*_args(fake), "--workers", "0"])
                worker = await _session(stack, str(SPECGEN), [*_args(fake), "--workers", "1"])

                async def tool() -> object:
                    return await bare.call_tool("one", {})

                variants = {
                    "bare tool": tool,
                    "execute, process tier": _execute(process, "console.log(1)"),
                    "execute, worker tier": _execute(worker, "console.log(1)"),
                    "one API call, process tier": _execute(process, ONE_CALL),
                    "one API call, worker tier": _execute(worker, ONE_CALL),
                    "loopback GET (floor)": floor,
                }
                for once in variants.values():  # engines, images and connections warm
                    for _ in range(5):
                        await once()
                seen: dict[str, list[float]] = {name: [] for name in variants}
                for _ in range(ROUNDS):
                    for name, once in variants.items():
                        seen[name].append(await _timed(once))
                return {name: statistics.median(xs) for name, xs in seen.items()}

        t = anyio.run(main)
        floor_client.close()
    base = t["bare tool"]
    print(f"\nMCP over stdio, medians of {ROUNDS} interleaved rounds (load {_load()})")
    print(f"  bare SDK tool round trip       {base * 1e3:7.2f} ms")
    for name in ("execute, process tier", "execute, worker tier"):
        print(f"  {name:30} {t[name] * 1e3:7.2f} ms   {t[name] / base:5.2f}x (target <= 1.4x)")
    print(f"  loopback GET (floor)           {t['loopback GET (floor)'] * 1e3:7.2f} ms")
    for name in ("one API call, process tier", "one API call, worker tier"):
        print(f"  {name:30} {t[name] * 1e3:7.2f} ms   {t[name] / base:5.2f}x the bare tool")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())
