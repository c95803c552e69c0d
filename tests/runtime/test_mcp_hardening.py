"""`specgen mcp` under hostile clients, loopback only, bounded in count.

- DNS rebinding: on every loopback spelling we accept, a Host that is not the bound
  address and port is refused (421), and so is any Origin not configured (403).
- A client cannot queue executes without bound: past RUN_SLOTS running and MAX_WAITING
  waiting, an execute is refused at once, while the admitted ones are still running.
- Request bytes held are bounded (413 for one body too large, 503 past the total), and
  so are sessions (a full table frees up as idle sessions expire).
- A JSON-RPC id reused while its request is in flight is refused with a JSON-RPC error,
  over HTTP and stdio, and the first request is still answered.
- A stdin line past the message limit is skipped in bounded memory and answered.
- A stdio server exits when its client closes stdin, even with a run in flight.

The HTTP tests that need runs to stay in flight serve the real SDK app through our
guard on a real socket, in this process, with the grant's run replaced by one that
waits for the test to let it go: what is in flight is then decided, not timed.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from examples.memory_grant.fake import FakeAgentMemory
from examples.memory_grant.runner import CALLER, GRANTS, PROFILE, TOKEN, TOKEN_ENV
from runtime.mcp import guard, server
from runtime.mcp.audit import AuditLog
from runtime.mcp.log_lines import OneLine
from runtime.mcp.runner import Grant, Run, open_grant
from tests.runtime.test_mcp_clients import ROOT, SPEC, SPECGEN, _args

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def fake() -> Iterator[FakeAgentMemory]:
    with FakeAgentMemory(TOKEN) as api:
        yield api


# --- DNS rebinding (the real command) ------------------------------------------------


@contextmanager
def command_server(fake: FakeAgentMemory, address: str, *extra: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [str(SPECGEN), *_args(fake), "--http", address, "--workers", "0", *extra],
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
        found = re.match(r"specgen: MCP server on (http://\S+/mcp)$", line.strip())
        assert found, f"no URL announced: {line!r}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _initialize(url: str, **headers: str) -> int:
    response = httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=30)
    return response.status_code


@pytest.mark.parametrize(
    ("address", "also"),
    [
        ("127.0.0.2:0", None),
        ("[0:0:0:0:0:0:0:1]:0", "[::1]"),
        ("127.0.0.1:0", None),
        ("localhost:0", "resolved"),
    ],
)
def test_a_rebinding_host_or_origin_is_refused_on_every_loopback_spelling(
    fake: FakeAgentMemory, address: str, also: str | None
) -> None:
    with command_server(fake, address) as url:
        authority = url.removeprefix("http://").removesuffix("/mcp")
        port = authority.rsplit(":", 1)[1]
        assert _initialize(url, Host="attacker.example") == 421
        assert _initialize(url, Host=f"attacker.example:{port}") == 421
        assert _initialize(url, Origin="http://attacker.example") == 403
        # another port on the same address is another origin
        assert _initialize(url, Host=authority.replace(f":{port}", ":1")) == 421
        assert _initialize(url, Origin=f"http://{authority}") == 403  # none configured
        assert _initialize(url) == 200
        if also == "resolved":  # the address localhost resolves to here
            found = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)[0][4][0]
            also = f"[{found}]" if ":" in found else found
        if also is not None:  # the address the spelling stands for
            assert _initialize(url, Host=f"{also}:{port}") == 200


def test_a_configured_origin_is_admitted(fake: FakeAgentMemory) -> None:
    with command_server(fake, "127.0.0.2:0", "--allow-origin", "http://localhost:5173") as url:
        assert _initialize(url, Origin="http://localhost:5173") == 200
        assert _initialize(url, Origin="http://localhost:5174") == 403


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--allow-origin", "http://x.example/path"],
            "specgen: --allow-origin 'http://x.example/path' must be scheme://host[:port] "
            "(http or https)",
        ),
        (["--allow-origin", "http://x.example"], "specgen: --allow-origin applies to --http only"),
    ],
)
def test_a_bad_origin_option_is_one_line(
    fake: FakeAgentMemory, extra: list[str], message: str
) -> None:
    args = [str(SPECGEN), *_args(fake), *extra]
    if "/path" in extra[1]:
        args += ["--http", "127.0.0.1:0"]
    proc = subprocess.run(
        args,
        env={**os.environ, TOKEN_ENV: TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (proc.returncode, proc.stderr) == (1, message + "\n")


# --- in flight, decided by the test ------------------------------------------------------


class Held:
    """A grant's run that waits for the test: `entered` counts runs started."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = 0
        self._lock = threading.Lock()

    def __call__(self, code: str, trace_id: str | None = None, caller: str | None = None) -> Run:
        with self._lock:
            self.entered += 1
        assert self.release.wait(60), "the test never let the run go"
        return Run("done\n", "", False, False, 0, False, 0.0, (), 0, 0, audit="{}")


@pytest.fixture
def grant(fake: FakeAgentMemory, monkeypatch: pytest.MonkeyPatch) -> Grant:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    return open_grant(GRANTS, PROFILE, CALLER, base_url=fake.url)


@contextmanager
def live(grant: Grant, audit: AuditLog) -> Iterator[str]:
    """The HTTP app `specgen mcp --http` serves, on a real loopback socket."""
    mcp = server.build_server(server.prepare(str(SPEC), grant), audit)
    sock = server.bind("127.0.0.1", 0)
    config = uvicorn.Config(
        server.http_app(mcp, "127.0.0.1", sock),
        log_level="error",
        # A loaded machine may leave a client's connection idle past uvicorn's 5 s;
        # reusing one the server just closed would fail the test for nothing.
        timeout_keep_alive=120,
    )
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if web.started:
                break
            time.sleep(0.02)
        assert web.started
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        web.should_exit = True
        thread.join(timeout=30)


def _data(text: str) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE answer."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    found = [ln[5:].strip() for ln in text.splitlines() if ln.startswith("data:")]
    return json.loads([d for d in found if d][-1])


async def _session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    opened = await client.post(url, json=INIT, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    headers = {
        **ACCEPT,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": _data(opened.text)["result"]["protocolVersion"],
    }
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=note, headers=headers)).status_code == 202
    # The 202 comes before the server has handled the notification; a ping answered on
    # the same session comes after it (a session's messages are handled in order), so a
    # request sent next cannot find the session still initialising (a flake under load).
    ready = {"jsonrpc": "2.0", "id": "session-ready", "method": "ping"}
    assert (await client.post(url, json=ready, headers=headers)).status_code == 200
    return headers


def _execute(request_id: int | str, code: str = "1") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}},
    }


async def _until(predicate: Any) -> None:
    for _ in range(6000):
        if predicate():
            return
        await anyio.sleep(0.01)
    raise AssertionError("never happened")


def test_executes_past_the_queue_are_refused_at_once(
    grant: Grant, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    held = Held()
    monkeypatch.setattr(grant, "run", held)
    admitted = server.RUN_SLOTS + server.MAX_WAITING
    extra = 6
    audit = AuditLog(tmp_path / "audit.jsonl", stderr_fd=os.open(os.devnull, os.O_WRONLY))
    answers: dict[int, dict[str, Any]] = {}

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            headers = await _session(client, url)

            async def call(n: int) -> None:
                reply = await client.post(url, json=_execute(n), headers=headers)
                answers[n] = _data(reply.text)

            async with anyio.create_task_group() as tg:
                for n in range(1, admitted + extra + 1):
                    tg.start_soon(call, n)
                # Every refusal arrives while the admitted runs are still held.
                await _until(lambda: len(answers) == extra and held.entered == server.RUN_SLOTS)
                assert not held.release.is_set()
                held.release.set()

    with live(grant, audit) as url:
        anyio.run(main, url)
    busy = [n for n, a in answers.items() if a["result"]["isError"]]
    assert len(busy) == extra and len(answers) == admitted + extra
    for n in busy:
        assert "server busy" in answers[n]["result"]["content"][0]["text"]
    assert held.entered == admitted
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert sum(1 for r in lines if r.get("not_run") == "busy") == extra
    assert len(lines) == admitted + extra


def test_a_run_that_crashes_the_host_is_still_on_the_record(
    grant: Grant, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def crash(code: str, trace_id: str | None = None, caller: str | None = None) -> Run:
        raise RuntimeError("planted fault with a detail the client must not see")

    monkeypatch.setattr(grant, "run", crash)
    audit = AuditLog(tmp_path / "audit.jsonl", stderr_fd=os.open(os.devnull, os.O_WRONLY))
    answers: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)
            reply = await client.post(url, json=_execute(1), headers=headers)
            answers.append(_data(reply.text)["result"])

    with live(grant, audit) as url:
        anyio.run(main, url)
    (answer,) = answers
    assert answer["isError"]
    assert "internal error (RuntimeError)" in answer["content"][0]["text"]
    assert "planted" not in answer["content"][0]["text"]
    (line,) = (tmp_path / "audit.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["internal_error"] == "RuntimeError" and record["profile"] == PROFILE
    assert "not_run" not in record and record["calls"] == []
    assert record["trace_id"].endswith(":1")
    # the operator's log says what it was in one line, with no traceback unless asked
    (logged,) = [r for r in caplog.records if r.name == "runtime.mcp.server"]
    monkeypatch.delenv("SPECGEN_DEBUG", raising=False)
    assert OneLine().format(logged) == (
        "specgen: error: execute failed: internal error: RuntimeError: planted fault with a"
        " detail the client must not see"
    )
    monkeypatch.setenv("SPECGEN_DEBUG", "1")
    shown = OneLine().format(logged).splitlines()
    assert shown[1] == "Traceback (most recent call last):" and "planted" in shown[-1]


class _FailedPool:
    """A stand-in for a RunPool whose every run ends in `fault` on its thread, as a
    worker that raised would hand it back: only the pool is replaced, the server's own
    path from the queued run to its answer and audit line is what runs."""

    def __init__(self, fault: BaseException) -> None:
        self.fault = fault

    def submit(self, *_: Any, **__: Any) -> concurrent.futures.Future[Any]:
        failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
        failed.set_exception(self.fault)
        return failed


@pytest.mark.parametrize(
    "fault",
    [RuntimeError("planted fault with a detail"), StopIteration("planted fault")],
    ids=["RuntimeError", "StopIteration"],
)
def test_a_pooled_run_that_fails_is_on_the_record_and_frees_its_slot(
    grant: Grant, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fault: BaseException
) -> None:
    """One run more than the server has slots: each failed run must still be answered,
    written to the audit and give its slot back. A StopIteration cannot be set on an
    asyncio future; handed on as it is, the loop's future never ended and the execute
    waited for ever, its slot and audit line lost."""
    monkeypatch.setattr(grant, "_pool", _FailedPool(fault))
    audit = AuditLog(tmp_path / "audit.jsonl", stderr_fd=os.open(os.devnull, os.O_WRONLY))
    answers: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)
            with anyio.fail_after(60):
                for i in range(server.RUN_SLOTS + 1):
                    reply = await client.post(url, json=_execute(i), headers=headers)
                    answers.append(_data(reply.text)["result"])

    with live(grant, audit) as url:
        anyio.run(main, url)
    assert len(answers) == server.RUN_SLOTS + 1
    for answer in answers:
        assert answer["isError"]
        assert "internal error (RuntimeError)" in answer["content"][0]["text"]
        assert "planted" not in answer["content"][0]["text"]
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert len(lines) == server.RUN_SLOTS + 1
    assert all(json.loads(line)["internal_error"] == "RuntimeError" for line in lines)


def test_a_reused_id_in_flight_is_refused_and_the_first_is_answered(
    grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held()
    monkeypatch.setattr(grant, "run", held)
    got: dict[str, Any] = {}

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)

            async def first() -> None:
                reply = await client.post(url, json=_execute(7), headers=headers)
                got["first"] = _data(reply.text)

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await _until(lambda: held.entered == 1)
                for reused in (7, "7"):  # the SDK reads both as one id
                    again = await client.post(url, json=_execute(reused), headers=headers)
                    got[repr(reused)] = (again.status_code, _data(again.text))
                held.release.set()
            # once answered, the id is free again
            reply = await client.post(url, json=_execute(7), headers=headers)
            got["after"] = _data(reply.text)

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    for reused in ("7", "'7'"):
        status, error = got[reused]
        assert status == 409
        assert error["error"]["code"] == guard.INVALID_REQUEST
        assert "already in flight" in error["error"]["message"]
    assert got["first"]["id"] == 7 and "done" in got["first"]["result"]["content"][0]["text"]
    assert got["after"]["id"] == 7 and "result" in got["after"]


def test_one_session_cannot_hold_more_than_its_share(
    grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held()
    monkeypatch.setattr(grant, "run", held)
    monkeypatch.setattr(guard, "MAX_IN_FLIGHT", 3)
    statuses: list[int] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)
            async with anyio.create_task_group() as tg:
                for n in range(1, 4):
                    tg.start_soon(partial(client.post, url, json=_execute(n), headers=headers))
                await _until(lambda: held.entered == 3)
                refused = await client.post(url, json=_execute(4), headers=headers)
                statuses.append(refused.status_code)
                assert "3 requests already in flight" in refused.text
                held.release.set()

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    assert statuses == [409]


def test_request_bytes_are_bounded_per_body_and_in_total(
    grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = Held()
    monkeypatch.setattr(grant, "run", held)
    monkeypatch.setattr(guard, "MAX_HELD_BYTES", 3 << 20)
    body = "/" * (1 << 20)  # a 1 MiB comment: a body that is held while its run is
    statuses: list[int] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)
            too_big = await client.post(
                url, json=_execute(1, "/" * guard.MAX_MESSAGE_BYTES), headers=headers
            )
            statuses.append(too_big.status_code)
            async with anyio.create_task_group() as tg:
                for n in range(2, 4):
                    tg.start_soon(
                        partial(client.post, url, json=_execute(n, body), headers=headers)
                    )
                await _until(lambda: held.entered == 2)
                over = await client.post(url, json=_execute(9, body), headers=headers)
                statuses.append(over.status_code)
                held.release.set()
            after = await client.post(url, json=_execute(10, body), headers=headers)
            statuses.append(after.status_code)

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    assert statuses == [413, 503, 200]


def _ping(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "ping"}


def test_an_idle_session_expires(grant: Grant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "SESSION_IDLE_S", 0.3)
    seen: list[int] = []

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await _session(client, url)
            seen.append((await client.post(url, json=_ping(1), headers=headers)).status_code)
            await anyio.sleep(1.5)  # five times the idle limit, no request meanwhile
            seen.append((await client.post(url, json=_ping(2), headers=headers)).status_code)

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    assert seen == [200, 404]


def test_a_full_session_table_ends_the_least_recently_used_idle_session(
    grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New clients are never locked out by sessions nobody uses: the oldest idle one
    makes room; a session with a request in progress is never the one ended."""
    held = Held()
    monkeypatch.setattr(grant, "run", held)
    monkeypatch.setattr(guard, "MAX_SESSIONS", 2)
    seen: dict[str, int] = {}

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            busy = await _session(client, url)  # opened first, so least recently used
            idle = await _session(client, url)
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(client.post, url, json=_execute(1), headers=busy))
                await _until(lambda: held.entered == 1)
                for n in range(3):  # each new client gets in
                    opened = await client.post(url, json=INIT, headers=ACCEPT)
                    seen[f"new {n}"] = opened.status_code
                seen["idle"] = (await client.post(url, json=_ping(2), headers=idle)).status_code
                seen["busy"] = (await client.post(url, json=_ping(3), headers=busy)).status_code
                held.release.set()

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    assert seen == {"new 0": 200, "new 1": 200, "new 2": 200, "idle": 404, "busy": 200}


def test_a_request_the_sdk_refuses_neither_ends_a_session_nor_is_read(
    grant: Grant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard made room for a new session before the SDK checked Host and Origin: a
    web page's cross-origin POST (403) or a rebinding Host (421) each took an idle
    session out of the guard's table (the SDK then refused the DELETE it replayed, so
    the session lived on, uncounted), and enough of them let sessions pile up to the
    SDK's own cap, where new clients get 503. Now such a request is refused first."""
    monkeypatch.setattr(guard, "MAX_SESSIONS", 2)
    seen: dict[str, int] = {}

    async def main(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            oldest = await _session(client, url)
            await _session(client, url)
            for n, bad in enumerate(
                [{"Origin": "http://attacker.example"}, {"Host": "attacker.example"}]
            ):
                hostile = await client.post(url, json=INIT, headers={**ACCEPT, **bad})
                seen[f"hostile {n}"] = hostile.status_code
            seen["new"] = (await client.post(url, json=INIT, headers=ACCEPT)).status_code
            # the table was full: the new client's session ended the oldest idle one
            seen["oldest"] = (await client.post(url, json=_ping(1), headers=oldest)).status_code

    with live(grant, AuditLog(stderr_fd=os.open(os.devnull, os.O_WRONLY))) as url:
        anyio.run(main, url)
    assert seen == {"hostile 0": 403, "hostile 1": 421, "new": 200, "oldest": 404}


# --- stdio (the real command) ------------------------------------------------------


class StdioServer:
    """`specgen mcp` on stdio; its stdout read by a thread, so a reply that never comes
    fails the test after a minute instead of hanging it."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()


@contextmanager
def stdio_server(fake: FakeAgentMemory) -> Iterator[StdioServer]:
    proc = subprocess.Popen(
        [str(SPECGEN), *_args(fake), "--workers", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, TOKEN_ENV: TOKEN},
        cwd=ROOT,
    )
    try:
        yield StdioServer(proc)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _send(proc: StdioServer, message: dict[str, Any]) -> None:
    proc.write(json.dumps(message).encode() + b"\n")


def _receive(proc: StdioServer) -> dict[str, Any]:
    try:
        return json.loads(proc.lines.get(timeout=60))
    except queue.Empty:
        raise AssertionError("no reply from the server within a minute") from None


def _rss_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]


def test_an_overlong_stdin_line_is_skipped_in_bounded_memory_and_answered(
    fake: FakeAgentMemory,
) -> None:
    with stdio_server(fake) as proc:
        _send(proc, INIT)
        assert _receive(proc)["id"] == 0
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert _receive(proc) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        before = _rss_kib(proc.pid, "VmRSS")
        proc.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"code":"')
        chunk = b"x" * (1 << 20)
        for _ in range(96):  # 96 MiB with no newline yet
            proc.write(chunk)
        proc.write(b'"}}\n')
        error = _receive(proc)
        assert error["id"] == 2 and error["error"]["code"] == guard.INVALID_REQUEST
        assert f"message over {guard.MAX_MESSAGE_BYTES} bytes" in error["error"]["message"]
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert _receive(proc)["id"] == 3  # the session goes on
        grew_mib = (_rss_kib(proc.pid, "VmHWM") - before) / 1024
    assert grew_mib < 48, f"the server grew {grew_mib:.0f} MiB reading a 96 MiB line"


def test_a_line_that_is_not_a_message_is_answered_as_json_rpc_says(
    fake: FakeAgentMemory,
) -> None:
    """JSON-RPC 2.0: a parse error for what is not JSON, an invalid request (with the
    request's id when it has one) for JSON that is not a message; a broken response is
    not answered; and the session goes on. The SDK dropped all of them unanswered."""
    with stdio_server(fake) as proc:
        _send(proc, INIT)
        _receive(proc)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        proc.write(b"garbage\n")
        assert _receive(proc) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": guard.PARSE_ERROR, "message": "not JSON"},
        }
        _send(proc, {"jsonrpc": "2.0", "id": 7, "method": 5})
        invalid = _receive(proc)
        assert invalid["id"] == 7 and invalid["error"]["code"] == guard.INVALID_REQUEST
        for method in ({"id": 7}, {"result": 1}):  # an object with an id, or a result, in it
            _send(proc, {"jsonrpc": "2.0", "id": 5, "method": method})
            invalid = _receive(proc)
            assert invalid["id"] == 5 and invalid["error"]["code"] == guard.INVALID_REQUEST
        proc.write(b"\n  \r\n")  # blank lines are no messages: nothing answers them
        big = 123456789012345678901234567890  # an integer id past 64 bits is an id
        _send(proc, {"jsonrpc": "2.0", "id": big, "method": "ping"})
        assert _receive(proc) == {"jsonrpc": "2.0", "id": big, "result": {}}
        proc.write(b"[1, 2]\n")
        invalid = _receive(proc)
        assert invalid["id"] is None and invalid["error"]["code"] == guard.INVALID_REQUEST
        # an id MCP refuses: the SDK read each as a notification and never answered
        for bad in ({"a": 1}, [1], True, 1.5, None):
            _send(proc, {"jsonrpc": "2.0", "id": bad, "method": "ping"})
            invalid = _receive(proc)
            assert invalid["id"] is None and invalid["error"]["code"] == guard.INVALID_REQUEST
        _send(proc, {"jsonrpc": "2.0", "id": True, "error": "x"})  # a broken response
        _send(proc, {"jsonrpc": "2.0", "id": 8, "method": "ping"})
        assert _receive(proc) == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_a_handler_failure_is_logged_in_one_escaped_line(fake: FakeAgentMemory) -> None:
    """The SDK logs a failing handler with its traceback (boxes drawn by Rich), and the
    text can be the client's: an unknown prompt's name wrote escape sequences to the
    operator's terminal and 140 lines to stderr, where the audit lines go."""
    proc = subprocess.Popen(
        [str(SPECGEN), *_args(fake), "--workers", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: TOKEN, "SPECGEN_DEBUG": ""},
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    hostile = "\x1b]0;PWNED\x07\x1b[2J"
    for message in (
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": hostile}},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert lines[1]["id"] == 1 and "error" in lines[1]
    proc.stdin.close()  # the server leaves at its client's EOF
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    (line,) = proc.stderr.read().decode().splitlines()
    assert line == (
        "specgen: error: handler for 'prompts/get' raised: ValueError: Unknown prompt: "
        "\\x1b]0;PWNED\\x07\\x1b[2J"
    )


def test_a_reused_id_on_stdio_is_refused_and_the_first_is_answered(
    fake: FakeAgentMemory,
) -> None:
    sleeper = 'import * as os from "qjs:os"; os.sleep(1500); console.log("slept");'
    with stdio_server(fake) as proc:
        _send(proc, INIT)
        _receive(proc)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, _execute(5, sleeper))
        _send(proc, _execute(5, "console.log('second')"))
        refused = _receive(proc)
        answered = _receive(proc)
    assert refused["id"] == 5 and "already in flight" in refused["error"]["message"]
    assert answered["id"] == 5
    assert json.loads(answered["result"]["content"][0]["text"])["stdout"] == "slept\n"


def test_a_cancelled_request_frees_its_id_on_stdio(fake: FakeAgentMemory) -> None:
    """MCP never answers a cancelled request, so its id must not stay taken."""
    sleeper = 'import * as os from "qjs:os"; os.sleep(1500);'
    with stdio_server(fake) as proc:
        _send(proc, INIT)
        _receive(proc)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, _execute(9, sleeper))
        cancel = {"requestId": 9, "reason": "changed my mind"}
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        _send(proc, _execute(9, "console.log('again')"))
        answered = _receive(proc)
    assert answered["id"] == 9
    assert json.loads(answered["result"]["content"][0]["text"])["stdout"] == "again\n"


def test_an_address_in_use_is_one_line(fake: FakeAgentMemory) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    with taken:
        proc = subprocess.run(
            [str(SPECGEN), *_args(fake), "--http", address],
            env={**os.environ, TOKEN_ENV: TOKEN},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert (proc.returncode, proc.stderr) == (
        1,
        f"specgen: --http {address!r}: Address already in use\n",
    )


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_server_ends_when_its_client_closes_stdin(
    fake: FakeAgentMemory, tmp_path: Path, workers: str
) -> None:
    """At its client's EOF a stdio server exits 0, in-process or with workers, and a run
    still in flight keeps its audit line."""
    sleeper = 'import * as os from "qjs:os"; os.sleep(500);'
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines.append(_execute(1, sleeper))
    audit = tmp_path / "audit.jsonl"
    try:
        done = subprocess.run(
            [str(SPECGEN), *_args(fake), "--workers", workers, "--audit", str(audit)],
            input=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
            capture_output=True,
            env={**os.environ, TOKEN_ENV: TOKEN},
            cwd=ROOT,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("specgen mcp still ran a minute after stdin closed") from None
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.splitlines()[0])["id"] == 0
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [record["trace_id"].rsplit(":", 1)[1] for record in records] == ["1"]
