"""The server's log handler: one escaped line per record, installed once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_installed_twice_it_still_writes_each_record_once_escaped() -> None:
    code = (
        "import logging, sys\n"
        "from runtime.mcp.log_lines import log_in_lines\n"
        "log_in_lines(); log_in_lines()\n"
        "sys.stderr = sys.stdout  # a stream replaced after it was installed\n"
        "logging.getLogger('mcp.x').info('not shown: below warnings')\n"
        "logging.getLogger('mcp.x').warning('a\\x1b]0;t\\x07\\nb')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == "specgen: warning: a\\x1b]0;t\\x07\\x0ab\n"
