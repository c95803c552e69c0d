"""A grant's preamble as the loader will read it, said before a run fails on it.

The loader reads `preamble_file` from the grants file's folder and refuses a generated
preamble built for another global than the profile's. `check --grants` used to say "up
to date" for both, `grant init -o` wrote either without a word, and `check SPEC DIR`
on a folder built with `--global` suggested a build onto the default global.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runtime.broker.grants import load as load_grants
from specgen.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests/data/smart-home.openapi.json"
ROUTE = "GET /lights"


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _grants(folder: Path, **profile: object) -> Path:
    body = {
        "base_url": "https://api.example.com",
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "PREAMBLE_CHECK_TOKEN"},
        "allow": [ROUTE],
        **profile,
    }
    path = folder / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}))
    return path


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A folder specgen built with --global gh, inside the grants file's folder."""
    assert run("build", SPEC, "-o", tmp_path / "gen", "--global", "gh", "-q").exit_code == 0
    return tmp_path / "gen"


def _problems(grants: Path) -> list[str]:
    result = run("check", SPEC, "--grants", grants, "--profile", "p")
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        return []
    assert result.exit_code == 1, result.output
    return [line.strip() for line in result.stderr.splitlines()[1:]]


def _loader_says(grants: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The loader's refusal of the profile, without its `grants: profile "p": `."""
    monkeypatch.setenv("PREAMBLE_CHECK_TOKEN", "t")
    try:
        load_grants(grants)
    except ValueError as exc:
        return str(exc).removeprefix('grants: profile "p": ')
    return None


def test_check_agrees_with_the_loader_on_a_good_preamble(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants = _grants(built.parent, preamble_file="gen/preamble.js", **{"global": "gh"})
    assert _problems(grants) == []
    assert _loader_says(grants, monkeypatch) is None


def _outside(built: Path) -> dict[str, object]:
    """A preamble_file that is a link to a file outside the grants file's folder."""
    outside = built.parent.parent / "outside.js"
    outside.write_text((built / "preamble.js").read_text())
    (built.parent / "link.js").symlink_to(outside)
    return {"preamble_file": "link.js", "global": "gh"}


@pytest.mark.parametrize(
    "case",
    [
        lambda built: {"preamble_file": "gen/nowhere.js", "global": "gh"},
        lambda built: {"preamble_file": "gen/preamble.js"},  # built for gh, global host
        lambda built: {"preamble": (built / "preamble.js").read_text()},
        lambda built: {"preamble_file": "gen/preamble.js", "global": "my-api"},
        lambda built: {"preamble_file": "gen/preamble.js", "preamble": "", "global": "gh"},
        lambda built: {"preamble_file": 5, "global": "gh"},
        lambda built: {"preamble_file": "../x.js", "global": "gh"},
        _outside,
    ],
    ids=[
        "missing", "other global", "inline other global", "bad global", "both", "not a string",
        "escapes", "link out",
    ],
)  # fmt: skip
def test_check_says_what_the_loader_refuses_in_its_words(
    built: Path, monkeypatch: pytest.MonkeyPatch, case: Callable[[Path], dict[str, object]]
) -> None:
    grants = _grants(built.parent, **case(built))
    said = _loader_says(grants, monkeypatch)
    assert said is not None
    assert _problems(grants) == [said]


def test_grant_init_notes_what_check_would_find(built: Path, tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    args = ["grant", "init", SPEC, "--profile", "p", "--caller", "agent", "--allow", ROUTE]
    elsewhere = run(*args, "--global", "gh", "--preamble-file", "gen/preamble.js", "-o",
                    tmp_path / "conf/g.json")  # fmt: skip
    assert elsewhere.exit_code == 0, elsewhere.output
    assert (
        "specgen: note: read preamble_file: No such file or directory: gen/preamble.js"
        in elsewhere.stderr
    )
    other = run(*args, "--preamble-file", "gen/preamble.js", "-o", tmp_path / "g.json")
    assert other.exit_code == 0, other.output
    assert 'global "host" differs from the preamble\'s global "gh"' in other.stderr
    fine = run(*args, "--global", "gh", "--preamble-file", "gen/preamble.js", "-o",
               tmp_path / "fine.json")  # fmt: skip
    assert fine.exit_code == 0 and "preamble" not in fine.stderr


def test_check_of_a_folder_built_with_global_says_which(built: Path) -> None:
    result = run("check", SPEC, built)
    assert result.exit_code == 1
    assert (
        f"specgen: {built}/preamble.js was built with --global gh, and this check builds "
        "with --global host: if gh is meant, check with --global gh"
    ) in result.stderr.splitlines()
    assert run("check", SPEC, built, "--global", "gh").exit_code == 0
