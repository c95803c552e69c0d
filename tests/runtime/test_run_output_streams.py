"""`specgen run` ends with its trace and audit whatever its output streams are.

Real subprocesses of the installed `specgen`: a stdout whose encoding cannot carry
what the guest printed (`PYTHONIOENCODING=ascii`, a Latin-1 locale), and a stdout whose
reader stops after one line (`| head -1`, here a pipe closed after one line). Each run
makes a granted call first, so the audit line is the only record of a call that did
reach the API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, grants_file

SPECGEN = Path(sys.executable).with_name("specgen")
PRINTS = 'await memory.items("x");\nconsole.log("5€ and 😀");\nconsole.log("second line");\n'


def _command(tmp_path: Path, api: FakeAPI, *extra: str) -> list[str]:
    grants_file(tmp_path)
    (tmp_path / "code.js").write_text(PRINTS, "utf-8")
    return [
        str(SPECGEN),
        "run",
        str(tmp_path / "code.js"),
        "--grants",
        str(tmp_path / "grants.json"),
        "--profile",
        "agent-memory",
        "--caller",
        "support-agent",
        "--base-url",
        api.url,
        *extra,
    ]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO"))}
    return {**env, "CLOUDFLARE_API_TOKEN": KEY, **extra}


def _audit(stderr: str) -> dict[str, object]:
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("specgen: audit: ")]
    return json.loads(line[len("specgen: audit: ") :])


@pytest.fixture(scope="module")
def latin1_locale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A Latin-1 locale built for the test (`localedef`, glibc's own tool): the machine
    need not have one installed. Its absence is a failure, never a skip."""
    where = tmp_path_factory.mktemp("locale")
    subprocess.run(
        ["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(where / "en_US.ISO-8859-1")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return {"LOCPATH": str(where), "LC_ALL": "en_US.ISO-8859-1"}


#: What a stream with no euro sign shows for the guest's first line.
ESCAPED = "out| 5\\u20ac and \\U0001f600\nout| second line\n"


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        command, env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_an_ascii_stdout_shows_escapes_and_the_audit_follows(tmp_path: Path, api: FakeAPI) -> None:
    proc = _run(_command(tmp_path, api), _env(PYTHONIOENCODING="ascii"))
    stderr = proc.stderr.decode("utf-8")
    assert proc.returncode == 0, stderr
    assert "internal error" not in stderr
    assert proc.stdout.decode("ascii") == ESCAPED
    assert len(api.requests) == 1
    assert [c["route"] for c in _audit(stderr)["calls"]] == ["/v1/items/*"]  # type: ignore[index]


def test_a_latin1_locale_shows_escapes_and_the_audit_follows(
    tmp_path: Path, api: FakeAPI, latin1_locale: dict[str, str]
) -> None:
    proc = _run(_command(tmp_path, api), _env(**latin1_locale))
    stderr = proc.stderr.decode("latin-1")
    assert proc.returncode == 0, stderr
    assert proc.stdout.decode("latin-1") == ESCAPED
    assert len(api.requests) == 1
    assert [c["route"] for c in _audit(stderr)["calls"]] == ["/v1/items/*"]  # type: ignore[index]


def test_json_mode_on_an_ascii_stdout_is_the_same_json(tmp_path: Path, api: FakeAPI) -> None:
    proc = _run(_command(tmp_path, api, "--json"), _env(PYTHONIOENCODING="ascii"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout.decode("ascii"))
    assert record["stdout"] == "5€ and 😀\nsecond line\n"
    assert len(record["audit"]["calls"]) == 1


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_reader_that_is_gone_does_not_lose_the_audit(
    tmp_path: Path, api: FakeAPI, as_json: bool
) -> None:
    """`specgen run ... | head -1` when head has already exited: the read end of stdout
    is closed before the run writes its first line."""
    proc = subprocess.Popen(
        _command(tmp_path, api, *(["--json"] if as_json else [])),
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode("utf-8")
    assert proc.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert len(api.requests) == 1
    assert [c["route"] for c in _audit(stderr)["calls"]] == ["/v1/items/*"]  # type: ignore[index]
