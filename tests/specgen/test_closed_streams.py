"""A command started without stdin or stdout (`>&-`, `<&-`) says so in one line.

Each command runs as a real process whose descriptor is closed before it starts, as a
shell's `>&-` does; Python then has no stream there at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPECGEN = Path(sys.executable).with_name("specgen")
DOC = ROOT / "examples/memory_grant/agent-memory.openapi.json"
GRANTS = ROOT / "examples/memory_grant/grants.json"


def _without(fd: int, *args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run specgen with descriptor `fd` closed; the other streams captured."""
    return subprocess.run(
        [str(SPECGEN), *map(str, args)],
        stdin=subprocess.DEVNULL if fd != 0 else None,
        stdout=subprocess.PIPE if fd != 1 else None,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(fd),
        text=True,
        timeout=120,
        env={**os.environ, "CLOUDFLARE_API_TOKEN": "closed-streams-key"},
        cwd=cwd,
    )


def test_output_to_a_closed_stdout_is_a_failure_in_one_line() -> None:
    done = _without(1, "emit", "allow", DOC, "-q")
    assert done.returncode == 1
    assert done.stderr == "specgen: stdout is closed\n"


def test_a_command_that_does_not_print_does_not_need_stdout(tmp_path: Path) -> None:
    done = _without(1, "build", DOC, "-o", tmp_path / "out", "-q")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "allow.json").is_file()


def test_reading_a_closed_stdin_is_a_failure_in_one_line(tmp_path: Path) -> None:
    done = _without(0, "build", "-", "-o", tmp_path / "out")
    assert done.returncode == 1
    assert done.stderr == "specgen: stdin: cannot read: stdin is closed\n"


@pytest.mark.parametrize(("fd", "name"), [(0, "stdin"), (1, "stdout")])
def test_an_mcp_server_on_stdio_without_its_stream_is_refused_at_start(fd: int, name: str) -> None:
    done = _without(
        fd, "mcp", "--grants", GRANTS, "--profile", "agent-memory", "--caller",
        "support-agent", "--spec", DOC,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        f"specgen: {name} closed: on stdio the server reads its client's messages on stdin"
        " and answers on stdout (or serve --http)\n"
    )


def test_a_run_with_stdout_closed_still_ends_with_its_audit_line(tmp_path: Path) -> None:
    code = tmp_path / "hello.js"
    code.write_text('print("hi")')
    done = _without(
        1, "run", code, "--grants", GRANTS, "--profile", "agent-memory", "--caller",
        "support-agent",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith('specgen: audit: {"profile":"agent-memory"')


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["build"], "specgen build: Missing argument 'SPEC' (see specgen build -h)"),
        (["nosuch"], "specgen: No such command 'nosuch' (see specgen -h)"),
        (
            ["build", str(DOC), "-q", "-v"],
            "specgen build: --quiet and --verbose go separately (see specgen build -h)",
        ),
        (
            ["emit", "allow", str(DOC), "--global", "\x1b[31mred"],
            "specgen emit: Invalid value for '--global': \"\\x1b[31mred\" is not a JS"
            " identifier ([A-Za-z_$][A-Za-z0-9_$]*) (see specgen emit -h)",
        ),
        (["run"], "specgen run: Missing argument 'CODE.js...' (see specgen run -h)"),
        # click raises an option's missing value with no context of its own
        (
            ["run", "--grants"],
            "specgen run: Option '--grants' requires an argument (see specgen run -h)",
        ),
        (
            ["grant", "init", "--profile"],
            "specgen grant init: Option '--profile' requires an argument"
            " (see specgen grant init -h)",
        ),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    done = subprocess.run(
        [str(SPECGEN), *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == line + "\n"


@pytest.mark.parametrize("group", [[], ["grant"]])
def test_a_group_given_no_command_shows_its_whole_help(group: list[str]) -> None:
    """Not a usage error folded into one line with its line breaks escaped: the help,
    as `-h` prints it, with click's exit 2 for a command line that did nothing."""
    done = subprocess.run([str(SPECGEN), *group], capture_output=True, text=True, timeout=60)
    shown = subprocess.run([str(SPECGEN), *group, "-h"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == shown.stdout
    assert done.stderr.startswith(f"Usage: specgen {' '.join(group)}".rstrip() + " [OPTIONS]")
    assert "\\x0a" not in done.stderr


def test_a_subgroup_lists_its_own_commands_only() -> None:
    """The installed plug-in commands (run, mcp) belong to the top group alone."""
    shown = subprocess.run([str(SPECGEN), "grant", "-h"], capture_output=True, text=True)
    listed = shown.stdout.split("Commands:")[1].split()
    assert "init" in listed and "schema" in listed
    assert "run" not in listed and "mcp" not in listed


def test_help_and_version_still_print_and_exit_0() -> None:
    for args in (["--help"], ["--version"], ["build", "-h"]):
        done = subprocess.run([str(SPECGEN), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout and done.stderr == "", args
