"""Everything the model reads is cut to the grant: a parameter the broker would refuse is
not offered, a pin is shown as the literal of its real type, and every signature has the
options argument the permitted parameters travel in.

GitHub's `issues_list_for_repo` declares 13 query parameters; the grant permits 4. The
MCP server's search and describe answers and its instructions (runtime.mcp.server.
prepare, as `specgen mcp` builds them), and `emit description --grants`, must each name
exactly those 4, read back from the text, not from the code that wrote it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from runtime.mcp.runner import open_grant
from runtime.mcp.server import prepare
from specgen.cli import cli
from tests import conftest as prerequisites

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("PLIMSOLL_CORPUS_DIR", ROOT / ".cache" / "corpus"))
GITHUB = CORPUS / "octokit/generated/api.github.com.json"
MEMORY = ROOT / "examples/memory_grant/agent-memory.openapi.json"
PERMITTED = ["state", "labels", "per_page", "page"]
#: The other nine the document declares for the route.
DECLARED_ONLY = [
    "milestone",
    "assignee",
    "type",
    "creator",
    "mentioned",
    "sort",
    "direction",
    "since",
]


def _grants(tmp_path: Path, allow: list[object], spec: Path = GITHUB) -> Path:
    if not spec.exists():
        prerequisites.missing(f"GitHub's document ({spec})", "make corpus")
    grants = tmp_path / "grants.json"
    profile = {"base_url": "https://api.github.com", "global": "gh", "allowed_callers": ["a"],
               "token": {"type": "static", "env": "GH_TOKEN"}, "allow": allow,
               "response_headers": ["x-ratelimit-remaining", "link"]}  # fmt: skip
    grants.write_text(json.dumps({"profiles": {"gh": profile}}))
    return grants


def _prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: list[object]):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GH_TOKEN", "t0k-cut")
    grant = open_grant(_grants(tmp_path, allow), "gh", "a")
    return prepare(str(GITHUB), grant)


def _options(text: str, method: str) -> list[str]:
    """The member names of `method`'s options argument in a signature in `text`."""
    found = re.search(rf"gh\.{method}\([^\n]*options\??: \{{ ([^}}]*) \}}\)", text)
    assert found, text[:2000]
    return [m.split(":")[0].rstrip("?") for m in found.group(1).split("; ")]


def _query_lines(text: str) -> list[str]:
    return re.findall(r'^  query parameter "([^"]+)"', text, re.M)


def test_describe_search_and_the_instructions_name_exactly_the_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(
        tmp_path, monkeypatch, ["GET /repos/octo/hello/issues?state&labels&per_page&page"]
    )
    described = prepared.catalog.describe("gh.issues_list_for_repo")
    assert described is not None
    searched = prepared.catalog.search("list issues for a repository", 5)
    for text in (described, searched, prepared.instructions):
        assert _options(text, "issues_list_for_repo") == PERMITTED
        # signatures and parameter lines, not the response types (an issue has a milestone)
        said = "\n".join(line for line in text.splitlines() if not line.startswith("type "))
        for name in DECLARED_ONLY:
            assert not re.search(rf"\b{name}\??:|\"{name}\"", said), (name, said[:1500])
    assert _query_lines(described) == PERMITTED
    assert 'allowed: owner = "octo", repo = "hello"' in described
    cli_text = _emit(tmp_path)
    assert _options(cli_text, "issues_list_for_repo") == PERMITTED

    # the same text, as the README says, the $response sentence's header names included
    assert "x-ratelimit-remaining" in prepared.instructions
    assert cli_text == prepared.instructions


def _emit(tmp_path: Path) -> str:
    result = CliRunner().invoke(
        cli,
        ["emit", "description", str(GITHUB), "--grants", str(tmp_path / "grants.json"),
         "--profile", "gh", "--global", "gh", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.stdout


def test_pins_are_shown_as_literals_of_their_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(
        tmp_path,
        monkeypatch,
        ["GET /repos/octo/hello/issues/7", "GET /repos/octo/hello/pulls?state=open&per_page=30"],
    )
    issue = prepared.catalog.describe("issues_get") or ""
    # issue_number is a number in the document, so the pin is 7, not "7"
    assert 'allowed: owner = "octo", repo = "hello", issue_number = 7' in issue
    assert "options" not in issue.splitlines()[0]  # the grant permits no query parameter
    pulls = prepared.catalog.describe("pulls_list") or ""
    assert 'options.state = "open", options.per_page = 30' in pulls
    assert _options(pulls, "pulls_list") == ["state", "per_page"]
    assert 'state?: "open"; per_page?: 30' in pulls.splitlines()[0]
    assert "issue_number = 7" in prepared.instructions


def test_a_route_permitting_no_parameter_offers_no_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(tmp_path, monkeypatch, ["GET /repos/octo/hello/issues"])
    described = prepared.catalog.describe("issues_list_for_repo") or ""
    assert _query_lines(described) == []
    # no options argument at all: any member of it would be refused
    assert described.splitlines()[0] == (
        "gh.issues_list_for_repo(owner: string, repo: string): Promise<Array<issue>>"
    )


def test_search_signatures_carry_the_options_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(
        tmp_path,
        monkeypatch,
        ["GET /repos/*/*/issues?state&labels&per_page&page", "POST /repos/*/*/issues"],
    )
    searched = prepared.catalog.search("issues", 5)
    signatures = [line for line in searched.splitlines() if line.startswith("gh.")]
    assert any(
        s.startswith("gh.issues_list_for_repo(owner: string, repo: string, options?: {")
        for s in signatures
    )
    assert any(
        s.startswith("gh.issues_create(owner: string, repo: string, body: ") for s in signatures
    )


def test_the_memory_example_grant_still_lists_its_three_operations() -> None:
    result = CliRunner().invoke(
        cli,
        ["emit", "description", str(MEMORY), "--grants", str(ROOT / "examples/memory_grant/grants.json"),
         "--profile", "agent-memory", "--global", "memory", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Only the\n3 operation(s) below are permitted" in result.stdout


def test_the_text_budget_is_the_servers_instruction_limit() -> None:
    from runtime.mcp import server
    from specgen import grant_view

    # the grant's text keeps within the size the server shows in full
    assert server.MAX_INSTRUCTIONS == grant_view.TEXT_BUDGET


def test_a_long_grant_text_keeps_every_signature_and_cuts_types_first(tmp_path: Path) -> None:
    allow = [
        f"GET /repos/octo/hello/{p}" for p in ("issues", "pulls", "commits", "branches", "releases")
    ]
    _grants(tmp_path, allow)
    text = _emit(tmp_path)
    assert len(text) <= 8000
    for method in (
        "issues_list_for_repo",
        "pulls_list",
        "repos_list_commits",
        "repos_list_branches",
    ):
        assert f"gh.{method}(" in text
    assert re.search(r"\(\d+ more type\(s\) not shown\.\)", text)


def test_entries_permitting_different_options_say_which_path_permits_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = _prepared(
        tmp_path,
        monkeypatch,
        ["GET /repos/octo/hello/issues?state", "GET /repos/octo/world/issues?page&per_page"],
    )
    described = prepared.catalog.describe("issues_list_for_repo") or ""
    assert _options(described, "issues_list_for_repo") == ["state", "per_page", "page"]
    assert (
        "  options by path: /repos/octo/hello/issues: state; /repos/octo/world/issues: per_page, page"
        in described
    )
    assert 'repo = "hello" or "world"' in described
