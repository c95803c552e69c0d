"""Ctrl-C stops `specgen mcp` on stdio at once, and an execute under way is audited.

The server is the installed `specgen` in a subprocess spoken to in raw JSON-RPC lines,
with stdin left open (as a client that is still connected keeps it), and Ctrl-C is a
real SIGINT, sent once the loopback API has seen the execute's call, so the run is
known to be under way (computing, in a loop only its timeout would end) when it lands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.memory_grant.runner import CALLER, GRANTS, PROFILE, TOKEN, TOKEN_ENV
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_mcp_approvals import SPEC as ITEMS_SPEC

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples/memory_grant/agent-memory.openapi.json"
SPECGEN = Path(sys.executable).with_name("specgen")
ITEM = (
    "/client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/"
    "support-agent/profiles/customer-42/memories/m1"
)
WAIT_S = 20


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _server(api: FakeAPI, workers: str) -> subprocess.Popen[bytes]:
    args = [
        str(SPECGEN), "mcp", "--grants", str(GRANTS), "--profile", PROFILE,
        "--caller", CALLER, "--spec", str(SPEC), "--base-url", api.url,
        "--workers", workers, "--timeout", str(WAIT_S + 5),
    ]  # fmt: skip
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: TOKEN},
    )
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    )
    assert proc.stdout is not None
    assert b'"result"' in proc.stdout.readline()
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc


def _stopped(proc: subprocess.Popen[bytes]) -> tuple[int, float, str]:
    """SIGINT, then (exit status, seconds it took to exit, stderr); stdin stays open."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        status = proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    return status, time.monotonic() - sent, proc.stderr.read().decode()


@pytest.mark.parametrize("workers", ["0", "1"])
def test_ctrl_c_ends_an_execute_under_way_with_its_audit_line_and_exits(
    api: FakeAPI, workers: str
) -> None:
    proc = _server(api, workers)
    code = f'await memory.get("{ITEM}"); while (true) {{}}'
    call = {"name": "execute", "arguments": {"code": code}}
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    waited = time.monotonic() + WAIT_S
    while not api.requests:
        assert proc.poll() is None and time.monotonic() < waited, "the execute never called"
        time.sleep(0.02)
    time.sleep(0.2)  # past the call: the guest is spinning
    status, took, err = _stopped(proc)
    assert status == 130, err
    assert took < 10, "it waited for the run's timeout"
    audits = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    [audit] = audits
    assert audit["isolation"] == ("process" if workers == "0" else "worker")
    assert [row["status"] for row in audit["calls"]] == [200]
    assert err.splitlines()[-1] == (
        "specgen: interrupted (Ctrl-C): the runs under way ended and audited"
    )
    assert "Traceback" not in err


def test_an_idle_server_leaves_on_ctrl_c_though_its_client_keeps_stdin_open(
    api: FakeAPI,
) -> None:
    status, took, err = _stopped(_server(api, "1"))
    assert status == 130
    assert took < 10
    assert "Aborted" not in err and "Traceback" not in err


def test_ctrl_c_ends_a_call_held_on_an_elicitation_the_client_never_answers(
    api: FakeAPI, tmp_path: Path
) -> None:
    """The question is ended unanswered (as at its timeout, which is far away here), so
    the run ends, its held call never sent and on its audit line, and the server exits."""
    profile = {
        "base_url": api.url,
        "allowed_callers": [CALLER],
        "token": {"type": "static", "env": TOKEN_ENV},
        "allow": [{"route": "POST /v1/items", "approve": True}],
        "approval_timeout_s": 600,
    }
    (tmp_path / "spec.json").write_text(json.dumps(ITEMS_SPEC))
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"items": profile}}))
    proc = subprocess.Popen(
        [
            str(SPECGEN), "mcp", "--grants", str(tmp_path / "grants.json"), "--profile",
            "items", "--caller", CALLER, "--spec", str(tmp_path / "spec.json"),
            "--workers", "0", "--timeout", "25",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: TOKEN},
    )  # fmt: skip
    assert proc.stdout is not None
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"},
    }
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
    assert b'"result"' in proc.stdout.readline()
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "execute", "arguments": {"code": 'await host.post("/v1/items", {a: 1});'}}
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    asked = json.loads(proc.stdout.readline())  # the server's question, never answered
    assert asked["method"] == "elicitation/create", asked
    status, took, err = _stopped(proc)
    assert status == 130, err
    assert took < 10, "it waited for the approval timeout"
    [audit] = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    [row] = audit["calls"]
    assert (row["approval"], row["delivered"], row["status"]) == ("timed_out", False, 0)
    assert api.requests == []
    assert "Traceback" not in err
