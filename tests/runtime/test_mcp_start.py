"""`specgen mcp` starts its engine processes before it imports the MCP SDK, so they
start on the other CPUs while this process imports it (the SDK's import is most of a
server's start), and imports joserfc only for --auth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.runtime.test_run_cli import KEY, grants_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "memory_grant" / "agent-memory.openapi.json"

#: Runs `specgen mcp` until it would serve, noting what was imported when the engine
#: processes were asked for, and when it was ready to serve.
_PROBE = """
import json, os, sys
import anyio
import runtime.mcp.runner as runner
seen = {}
real = runner.open_grants
def open_grants(*args, **kwargs):
    seen["at_engines"] = sorted(m for m in ("mcp", "joserfc") if m in sys.modules)
    return real(*args, **kwargs)
runner.open_grants = open_grants
def run(*args, **kwargs):
    seen["at_serve"] = sorted(m for m in ("mcp", "joserfc") if m in sys.modules)
    print(json.dumps(seen), flush=True)
    os._exit(0)
anyio.run = run
from specgen.cli import main
sys.argv = ["specgen", *sys.argv[1:]]
main()
"""


def test_engines_are_asked_for_before_the_sdk_is_imported(tmp_path: Path) -> None:
    grants = grants_file(tmp_path)
    argv = [sys.executable, "-c", _PROBE, "mcp", "--grants", str(grants)]
    argv += ["--profile", "agent-memory", "--caller", "support-agent", "--spec", str(SPEC)]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env={"CLOUDFLARE_API_TOKEN": KEY, "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen == {"at_engines": [], "at_serve": ["mcp"]}
