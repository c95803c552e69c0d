"""`specgen run` and held calls: asked on the controlling terminal, never on stdin;
refused without a terminal; answered by `--approve` for scripts.

The CLI is the installed `specgen` command in a subprocess, so "no terminal" is real (a
new session has no controlling terminal) and the terminal case is a real pseudo-terminal
made the child's controlling terminal, while its stdin is a pipe saying the opposite.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.loopback import FakeAPI

SPECGEN = Path(sys.executable).with_name("specgen")
KEY = "cli-approval-key-77a0"
CODE = """
const r = await host.post("/v1/items", {a: 1}).catch(e => e);
console.log(r instanceof Error ? r.message.trim() : JSON.stringify(r));
"""


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _files(tmp_path: Path, api: FakeAPI) -> list[str]:
    grant = {
        "base_url": api.url,
        "allowed_callers": ["ops"],
        "token": {"type": "static", "env": "API_KEY"},
        "allow": [{"route": "POST /v1/items", "approve": True}, "GET /v1/items/*"],
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"p": grant}}), "utf-8")
    (tmp_path / "code.js").write_text(CODE, "utf-8")
    return [
        str(SPECGEN),
        "run",
        str(tmp_path / "code.js"),
        "--grants",
        str(tmp_path / "grants.json"),
        "--profile",
        "p",
        "--caller",
        "ops",
        "--json",
    ]


def _no_terminal(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        args,
        input=stdin,
        capture_output=True,
        env={**os.environ, "API_KEY": KEY},
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
        timeout=120,
        check=False,
    )


def test_without_a_terminal_or_flag_a_held_call_is_refused_even_if_stdin_says_yes(
    tmp_path: Path, api: FakeAPI
) -> None:
    done = _no_terminal(_files(tmp_path, api), stdin=b"y\ny\n")
    record = json.loads(done.stdout)
    assert record["stdout"].startswith("host api 403: approval declined"), done.stderr
    assert api.requests == []
    assert record["audit"]["calls"][0]["approval"] == "unavailable"


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_approve_all_sends_it(tmp_path: Path, api: FakeAPI, isolation: str) -> None:
    # One file on the worker tier runs in an engine process; the flag is still the answer.
    done = _no_terminal([*_files(tmp_path, api), "--approve", "all", "--isolation", isolation])
    record = json.loads(done.stdout)
    assert record["stdout"] == '{"ok":true}\n', done.stderr
    assert [(s.method, s.body) for s in api.requests] == [("POST", b'{"a":1}')]
    row = record["audit"]["calls"][0]
    assert (row["approval"], row["approval_channel"]) == ("approved", "flag")
    assert record["audit"]["isolation"] == isolation


@pytest.mark.parametrize(
    ("values", "sent"),
    [
        (["none"], False),
        (["POST /v1/items"], True),
        (["GET /v1/items/*"], False),
        # an entry as `allow` spells it, its query part too: the route is what is approved
        (["POST /v1/items?tag&dry_run=1"], True),
    ],
)
def test_approve_none_or_a_route_list(
    tmp_path: Path, api: FakeAPI, values: list[str], sent: bool
) -> None:
    flags = [part for value in values for part in ("--approve", value)]
    done = _no_terminal([*_files(tmp_path, api), *flags])
    assert (len(api.requests) == 1) is sent, done.stderr


def test_a_bad_approve_value_is_one_line_and_a_non_zero_exit(tmp_path: Path, api: FakeAPI) -> None:
    done = _no_terminal([*_files(tmp_path, api), "--approve", "all", "--approve", "none"])
    assert done.returncode != 0
    assert done.stderr.decode().strip().count("\n") == 0
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("route", ["POST /v1/item", "DELETE /v1/items/*"])
def test_approving_a_route_no_allow_entry_has_is_refused_before_the_run(
    tmp_path: Path, api: FakeAPI, route: str
) -> None:
    """A typo would otherwise decline, without a word, the call it meant to approve."""
    done = _no_terminal([*_files(tmp_path, api), "--approve", route])
    assert done.returncode == 1, done.stdout
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f'specgen: --approve "{route}": no allow entry of the profile has this route, so no'
        " call of it is ever held to approve\n"
    )
    assert api.requests == []


def _on_a_terminal(args: list[str], typed: bytes, stdin: bytes) -> tuple[bytes, str]:
    """Run with a pseudo-terminal as the controlling terminal and `stdin` a pipe; type
    `typed` on the terminal once the question appears. (what the terminal showed, stdout)"""
    master, slave = pty.openpty()

    def take_terminal() -> None:
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "API_KEY": KEY},
        start_new_session=True,
        preexec_fn=take_terminal,
        pass_fds=(slave,),
    )
    os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    shown = b""
    end = time.monotonic() + 60
    while b"approve? [y]es" not in shown and time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                shown += os.read(master, 4096)
            except OSError:
                break
    os.write(master, typed)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    proc.stderr.read()
    proc.wait(timeout=60)
    os.close(master)
    return shown, out.decode()


def test_the_terminal_is_asked_and_stdin_is_never_read(tmp_path: Path, api: FakeAPI) -> None:
    shown, out = _on_a_terminal(_files(tmp_path, api), typed=b"n\n", stdin=b"y\n")
    assert b"POST /v1/items" in shown and b'{"a":1}' in shown
    assert json.loads(out)["stdout"] == "host api 403: approval declined\n"
    assert api.requests == []


def test_yes_on_the_terminal_sends_it(tmp_path: Path, api: FakeAPI) -> None:
    _, out = _on_a_terminal(_files(tmp_path, api), typed=b"y\n", stdin=b"")
    record = json.loads(out)
    assert record["stdout"] == '{"ok":true}\n'
    assert record["audit"]["calls"][0]["approval_channel"] == "tty"
    assert len(api.requests) == 1
