"""A very long value in any option or argument: one line of bounded length, never an echo
of the whole value, an internal error or a traceback.

Every refusal quotes what it refuses; before the lines were capped a 10,000-character
`--allow` came back as a 10,000-character line, twice in some messages. Each case runs
the real entry point in its own process, so the printer every command shares is what is
tested.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specgen.quoting import LINE_LIMIT, capped
from tests.runtime.test_run_cli import KEY, grants_file

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples/memory_grant/agent-memory.openapi.json"
#: Far longer than any line a command should print.
LONG = "GET /" + "a" * 10_000 + " x"


def _specgen(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specgen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "SPECGEN_DEBUG": "", "CLOUDFLARE_API_TOKEN": KEY},
    )


def _cases(grants: Path, code: Path) -> dict[str, tuple[list[str | Path], int]]:
    run = ["run", code, "--grants", grants, "--caller", "support-agent"]
    mcp = ["mcp", "--grants", grants, "--caller", "support-agent", "--profile", "agent-memory"]
    return {
        "grant init --allow": (["grant", "init", SPEC, "--profile", "p", "--allow", LONG], 1),
        "run --approve": ([*run, "--profile", "agent-memory", "--approve", LONG], 1),
        "run --profile": ([*run, "--profile", LONG], 1),
        "run --caller": (
            ["run", code, "--grants", grants, "--profile", "agent-memory", "--caller", LONG],
            1,
        ),
        "run --base-url": ([*run, "--profile", "agent-memory", "--base-url", LONG], 1),
        "mcp --spec": ([*mcp, "--spec", LONG], 1),
        "mcp --http": ([*mcp, "--spec", SPEC, "--http", LONG], 1),
        "check OUTDIR": (["check", SPEC, LONG], 1),
        "emit --global": (["emit", "ts", SPEC, "--global", LONG], 2),
        "build SPEC": (["build", LONG], 1),
    }


@pytest.mark.parametrize("case", list(_cases(Path(), Path())))
def test_a_long_value_is_refused_in_one_bounded_line(tmp_path: Path, case: str) -> None:
    code = tmp_path / "a.js"
    code.write_text("print(1)")
    args, status = _cases(grants_file(tmp_path), code)[case]
    proc = _specgen(*args)
    assert proc.returncode == status, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("specgen"), line
    assert "internal error" not in line and "Traceback" not in line
    assert len(line) <= LINE_LIMIT + 40, len(line)
    assert "characters cut" in line  # the value was quoted, and its middle cut


def test_capped_keeps_both_ends_and_says_how_much_went() -> None:
    line = "specgen: --allow " + "b" * 2000 + ' must be "METHOD /path"'
    out = capped(line)
    assert len(out) <= LINE_LIMIT + 40
    assert out.startswith("specgen: --allow bbb")
    assert out.endswith('must be "METHOD /path"')
    head, _, rest = out.partition(" ... (")
    cut = int(rest.split(" characters cut")[0].replace(",", ""))
    assert len(head) + cut + len(rest.split(") ... ", 1)[1]) == len(line)
    assert capped("short") == "short"
