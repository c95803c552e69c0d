"""Ctrl-C during `specgen run`: the run ends now, and still ends with its audit record.

The CLI is the installed `specgen` command in a subprocess and Ctrl-C is a real SIGINT,
sent once the loopback API has seen the run's first call, so the guest is known to be
running (and computing, in a loop the sandbox would otherwise end only at its timeout)
when it arrives.
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

from tests.runtime.loopback import FakeAPI, stall

SPECGEN = Path(sys.executable).with_name("specgen")
KEY = "cli-interrupt-key-3c9e"
#: Far longer than any test waits: a run that ends is ended by the interrupt.
TIMEOUT_S = 25
CALL_THEN_SPIN = 'await host.get("/v1/items/1"); print("called"); while (true) {}'


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _args(tmp_path: Path, api: FakeAPI, *codes: str) -> list[str]:
    grant = {
        "base_url": api.url,
        "allowed_callers": ["ops"],
        "token": {"type": "static", "env": "API_KEY"},
        "allow": ["GET /v1/items/*"],
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"p": grant}}), "utf-8")
    files = []
    for i, code in enumerate(codes):
        path = tmp_path / f"{i}.js"
        path.write_text(code, "utf-8")
        files.append(str(path))
    return [
        str(SPECGEN), "run", *files, "--grants", str(tmp_path / "grants.json"),
        "--profile", "p", "--caller", "ops", "--timeout", str(TIMEOUT_S),
    ]  # fmt: skip


def _interrupted(
    args: list[str], api: FakeAPI, calls: int = 1, signals: int = 1
) -> tuple[int, float, str, str]:
    """Start `args`, send SIGINT `signals` times once the API has seen `calls` requests;
    (exit status, seconds from the first SIGINT to the exit, stdout, stderr)."""
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "API_KEY": KEY},
    )
    try:
        waited = time.monotonic() + TIMEOUT_S
        while len(api.requests) < calls:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < waited, "the run never made its call"
            time.sleep(0.02)
        time.sleep(0.2)  # past the call: the guest is spinning now
        sent = time.monotonic()
        for _ in range(signals):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
        out, err = proc.communicate(timeout=TIMEOUT_S)
        return proc.returncode, time.monotonic() - sent, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_ctrl_c_ends_a_computing_run_at_once_with_its_record(
    tmp_path: Path, api: FakeAPI, isolation: str
) -> None:
    args = [*_args(tmp_path, api, CALL_THEN_SPIN), "--isolation", isolation, "--json"]
    status, took, out, err = _interrupted(args, api)
    assert status == 130, err
    assert took < 10, "ended by its timeout, not by Ctrl-C"
    record = json.loads(out)
    assert (record["exit_code"], record["interrupted"], record["timed_out"]) == (130, True, False)
    assert record["internal_error"] is None
    # the call the run made before Ctrl-C is on its record
    assert record["audit"]["isolation"] == isolation
    assert [row["route"] for row in record["audit"]["calls"]] == ["/v1/items/*"]
    assert "interrupted: ending the run now" in err


def test_the_text_report_says_it_was_interrupted_and_prints_the_trace(
    tmp_path: Path, api: FakeAPI
) -> None:
    status, _, out, err = _interrupted(_args(tmp_path, api, CALL_THEN_SPIN), api)
    assert status == 130
    assert out == "out| called\n"  # what the guest printed before it is kept
    assert "specgen: the run was interrupted (Ctrl-C) and ended early" in err
    assert "timed out" not in err
    assert "specgen: trace:" in err
    [audit] = [line for line in err.splitlines() if line.startswith("specgen: audit: ")]
    assert json.loads(audit.removeprefix("specgen: audit: "))["calls"][0]["status"] == 200
    assert "Aborted" not in err and "Traceback" not in err


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_batch_reports_the_files_before_and_never_starts_the_ones_after(
    tmp_path: Path, api: FakeAPI, workers: str
) -> None:
    args = _args(tmp_path, api, 'print("first")', CALL_THEN_SPIN, 'await host.get("/v1/items/3")')
    status, took, out, err = _interrupted([*args, "--workers", workers, "--json"], api)
    assert status == 130, err
    assert took < 10
    first, second, third = (json.loads(line) for line in out.splitlines())
    assert (first["exit_code"], first["interrupted"], first["stdout"]) == (0, False, "first\n")
    assert (second["exit_code"], second["interrupted"]) == (130, True)
    assert third == {
        "file": str(tmp_path / "2.js"),
        "exit_code": 130,
        "refused": "interrupted (Ctrl-C) before it started",
    }
    assert len(api.requests) == 1  # the third file's call was never made


def test_a_second_ctrl_c_leaves_at_once_while_a_call_is_on_the_wire(
    tmp_path: Path, api: FakeAPI
) -> None:
    """A call already sent ends within its own timeout; the operator need not wait."""
    api.responder = stall(TIMEOUT_S)
    code = 'await host.get("/v1/items/1")'
    status, took, _, err = _interrupted(_args(tmp_path, api, code), api, signals=2)
    assert status == 130
    assert took < 10
    assert err.splitlines()[-1] == (
        "specgen: interrupted again: leaving without the rest of the record"
    )


def test_ctrl_c_before_any_run_has_started_is_one_line_and_130(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """While the grants load or the pool starts there is nothing to end or record yet."""
    from runtime.cli import _Interrupt
    from specgen.cli import _interrupted

    for handler in (_interrupted, _Interrupt()._handle):
        with pytest.raises(SystemExit) as left:
            handler(signal.SIGINT, None)
        assert left.value.code == 130
        assert capsys.readouterr().err == "specgen: interrupted\n"
