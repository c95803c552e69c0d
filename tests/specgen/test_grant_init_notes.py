"""What grant init's notes suggest works when taken at its word."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from specgen.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_grant_inits_suggested_entry_permits_every_query_parameter(tmp_path: Path) -> None:
    """The note about undeclared parameters offers an entry; given back to grant init, it
    leaves no query parameter unlisted (it used to name four of thirteen)."""
    spec = ROOT / "examples/github_triage/github-issues.openapi.json"
    route = "GET /repos/acme/widgets/issues"
    first = run("grant", "init", spec, "--profile", "p", "--caller", "c", "--allow", route)
    assert first.exit_code == 0, first.output
    (note,) = [line for line in first.stderr.splitlines() if " permits 0 of " in line]
    suggested = note.split("every query parameter: --allow ")[1].rstrip(")")
    again = run(
        "grant", "init", spec, "--profile", "p", "--caller", "c", "--allow", json.loads(suggested)
    )
    assert again.exit_code == 0, again.output
    assert " permits " not in again.stderr
