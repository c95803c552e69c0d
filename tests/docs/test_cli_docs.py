"""docs/cli.md and `--help` agree, and its sample outputs are what a run prints today.

Every command (plugins included) is walked through click: each option it takes must be
named in that command's section of docs/cli.md (or, for the options several commands
share, in the shared section), every choice of a choice-typed argument or option too, and
each command's `--help` must render. The sample blocks marked `<!-- sample: NAME -->` are
compared with a real run of the command the marker names.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from specgen.cli import cli
from tests import conftest as prerequisites

ROOT = Path(__file__).resolve().parents[2]
CLI_MD = (ROOT / "docs/cli.md").read_text()
CORPUS = Path(os.environ.get("PLIMSOLL_CORPUS_DIR", ROOT / ".cache" / "corpus"))
GITHUB = CORPUS / "octokit/generated/api.github.com.json"
SMART = ROOT / "tests/data/smart-home.openapi.json"

#: Sections that document options for several commands at once.
SHARED = ("## Options shared by the generating commands", "## Output: summary")


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            path = f"{prefix} {name}".strip()
            if isinstance(command, click.Group):
                if command.invoke_without_command:  # a command of its own too (`mcp`)
                    out.append((path, command))
                walk(command, path)
            else:
                out.append((path, command))

    walk(cli, "")
    return out


def _section(heading: str) -> str:
    """The text under the `## ` heading that starts with `heading`, to the next `## `."""
    found = re.search(rf"^## {re.escape(heading)}\b.*?(?=^## |\Z)", CLI_MD, re.M | re.S)
    assert found, f"docs/cli.md has no section '## {heading}'"
    return found.group(0)


def _shared() -> str:
    return "".join(_section(h.removeprefix("## ")) for h in SHARED)


COMMANDS = _commands()


def test_every_command_is_walked() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"build", "emit", "check", "validate", "extract", "run", "mcp"} <= names
    assert {"grant init", "grant schema", "mcp schema"} <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_the_commands_section_names_each_option_and_choice(
    name: str, command: click.Command
) -> None:
    heading = (
        "grant init and grant schema"
        if name.startswith("grant ")
        else "mcp"
        if name.startswith("mcp ")
        else name
    )
    section = _section(heading)
    shared = _shared()
    help_text = CliRunner().invoke(cli, [*name.split(), "--help"]).output
    for param in command.params:
        if isinstance(param, click.Option):
            if param.hidden or "--help" in param.opts:
                continue
            longest = max(param.opts, key=len)
            assert longest in help_text, (name, longest)
            assert re.search(rf"{re.escape(longest)}(?![\w-])", section + shared), (
                f"docs/cli.md does not name {name} {longest}"
            )
        if isinstance(param.type, click.Choice):
            for choice in param.type.choices:
                assert re.search(rf"\b{re.escape(str(choice))}\b", section + shared), (
                    f"docs/cli.md does not name {name}'s choice {choice!r} of {param.name}"
                )


def _sample(name: str) -> str:
    found = re.search(rf"<!-- sample: {re.escape(name)} -->\n```\n(.*?)```", CLI_MD, re.S)
    assert found, f"docs/cli.md has no sample block {name!r}"
    return found.group(1)


def test_the_build_summary_sample_is_githubs_build_today() -> None:
    if not GITHUB.exists():
        prerequisites.missing(f"GitHub's document ({GITHUB})", "make corpus")
    result = CliRunner().invoke(cli, ["emit", "allow", str(GITHUB), "--global", "gh"])
    assert result.exit_code == 0, result.output
    assert _sample("github-build") == result.stderr


def test_the_check_grants_sample_is_a_real_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    routes = json.loads(CliRunner().invoke(cli, ["emit", "catalog", str(SMART), "-q"]).stdout)
    catalog = [r for r in routes if r != "PUT /lights/*"] + ["DELETE /scenes/*"]
    profile = {
        "base_url": "https://home.example",
        "allowed_callers": ["me"],
        "allow": ["POST /lights/*"],
        "catalog": catalog,
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"home": profile}}))
    (tmp_path / "api.json").write_bytes(SMART.read_bytes())
    monkeypatch.chdir(tmp_path)  # so the names it prints are the ones the sample shows
    result = CliRunner().invoke(
        cli, ["check", "api.json", "--grants", "grants.json", "--profile", "home"]
    )
    assert result.exit_code == 1
    assert _sample("check-grants") == result.stderr


def test_build_help_and_its_section_name_every_file_build_writes() -> None:
    from specgen.render import FILES

    help_text = " ".join(CliRunner().invoke(cli, ["build", "--help"]).output.split())
    section = _section("build")
    for name in FILES:
        assert name in help_text, name
        assert f"`{name}`" in section, name


def test_the_verbose_rename_line_cli_md_quotes_is_printed() -> None:
    if not GITHUB.exists():
        prerequisites.missing(f"GitHub's document ({GITHUB})", "make corpus")
    found = re.search(r"`(specgen: renamed: [^`]*)`", CLI_MD)
    assert found
    quoted = " ".join(found.group(1).split())
    result = CliRunner().invoke(cli, ["emit", "allow", str(GITHUB), "-v"])
    assert quoted in result.stderr.splitlines()
