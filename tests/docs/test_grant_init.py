"""`specgen grant init` drafts a grants file the runtime's loader accepts.

specgen never imports the runtime, so the draft is only right if the loader says so:
these tests load every draft with runtime.grants and validate it against the schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from runtime import GrantsError
from runtime import load_grants as load
from specgen.cli import cli
from specgen.grant_init import env_name, schema_text

ROOT = Path(__file__).resolve().parents[2]
SMART = ROOT / "tests/data/smart-home.openapi.json"
MEMORY = ROOT / "examples/memory_grant/agent-memory.openapi.json"
VALIDATOR = jsonschema.Draft202012Validator(json.loads(schema_text()))


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_a_draft_with_callers_and_allow_loads_and_validates(tmp_path: Path) -> None:
    allow = "POST /client/v4/accounts/42/agent-memory/namespaces/n/profiles/p/recall"
    out = tmp_path / "grants.json"
    result = run(
        "grant",
        "init",
        MEMORY,
        "--profile",
        "mem",
        "--caller",
        "agent",
        "--allow",
        allow,
        "--global",
        "memory",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert VALIDATOR.is_valid(doc), list(VALIDATOR.iter_errors(doc))
    profile = load(out, environ={"MEM_TOKEN": "t0k"}).select("mem", "agent")
    assert profile.base_url == "https://api.cloudflare.com"
    assert profile.global_name == "memory"
    assert [str(r) for r in profile.allow] == [allow]
    emitted = run("emit", "catalog", MEMORY, "--global", "memory", "--compat", "reference")
    assert [str(r) for r in profile.catalog] == json.loads(emitted.stdout)
    assert profile.token_env == "MEM_TOKEN"
    # the document's apiKey schemes cannot be sent by the broker: each is named
    notes = [line for line in result.stderr.splitlines() if line.startswith("specgen: note: ")]
    for scheme in ("api_email", "api_key", "user_service_key"):
        assert any(f'securityScheme "{scheme}" is apiKey in header' in n for n in notes), notes
    assert any("api_token (http bearer)" in n for n in notes), notes


def test_the_draft_passes_check_grants(tmp_path: Path) -> None:
    out = tmp_path / "grants.json"
    run(
        "grant",
        "init",
        SMART,
        "--profile",
        "home",
        "--caller",
        "me",
        "--allow",
        "PATCH /lights/kitchen",
        "--base-url",
        "https://home.example",
        "-o",
        out,
    )
    result = run("check", SMART, "--grants", out, "--profile", "home")
    assert result.exit_code == 0, result.output


def test_an_empty_draft_is_refused_by_the_loader_for_its_callers(tmp_path: Path) -> None:
    out = tmp_path / "grants.json"
    result = run(
        "grant", "init", SMART, "--profile", "home", "--base-url", "https://h.example", "-o", out
    )
    assert result.exit_code == 0, result.output
    assert "allowed_callers is empty" in result.stderr
    assert "allow is empty, so the loader refuses the profile" in result.stderr
    with pytest.raises(GrantsError, match="allowed_callers must name at least one"):
        load(out, environ={"HOME_TOKEN": "x"})


def test_a_draft_with_a_preamble_file_runs_through_the_loader(tmp_path: Path) -> None:
    build = run("build", SMART, "-o", tmp_path / "gen", "--global", "home")
    assert build.exit_code == 0, build.output
    out = tmp_path / "grants.json"
    run(
        "grant",
        "init",
        SMART,
        "--profile",
        "home",
        "--caller",
        "me",
        "--global",
        "home",
        "--allow",
        "PATCH /lights/kitchen",
        "--base-url",
        "https://h.example",
        "--preamble-file",
        "gen/preamble.js",
        "-o",
        out,
    )
    profile = load(out, environ={"HOME_TOKEN": "x"}).select("home", "me")
    assert profile.preamble == (tmp_path / "gen/preamble.js").read_text()


@pytest.mark.parametrize(
    ("allow", "why"),
    [
        (
            "GET /nowhere",
            'specgen: --allow "GET /nowhere" is not an instance of any route in the document',
        ),
        ("GET", 'specgen: --allow "GET" must be "METHOD /path"'),
        (
            "HEAD /lights",
            'specgen: --allow "HEAD /lights": route method "HEAD" is not one of GET, PUT, POST, DELETE, PATCH',
        ),
    ],
)
def test_allow_entries_outside_the_document_are_refused(allow: str, why: str) -> None:
    result = run("grant", "init", SMART, "--profile", "home", "--caller", "me", "--allow", allow)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [why]


def test_init_never_overwrites_a_grants_file(tmp_path: Path) -> None:
    out = tmp_path / "grants.json"
    out.write_text("mine")
    result = run("grant", "init", SMART, "--profile", "home", "-o", out)
    assert result.exit_code == 1
    assert out.read_text() == "mine"


#: --preamble-file values the loader refuses as escaping the grants file's folder, and
#: values it lets through that check (the last leaves the folder and comes back in).
ESCAPING = ["../../etc/passwd", "/etc/passwd", "../p.js", "gen/../../p.js"]
INSIDE = ["gen/preamble.js", "./p.js", "gen/../p.js", "../grants/p.js"]


@pytest.mark.parametrize("rel", ESCAPING + INSIDE)
def test_preamble_file_is_refused_where_the_loader_refuses_it(tmp_path: Path, rel: str) -> None:
    folder = tmp_path / "grants"
    folder.mkdir()
    args = [
        *("grant", "init", SMART, "--profile", "home", "--caller", "me", "--global", "home"),
        *("--allow", "PATCH /lights/kitchen", "--base-url", "https://h.example"),
    ]
    probe = json.loads(run(*args).stdout)
    probe["profiles"]["home"]["preamble_file"] = rel
    (folder / "probe.json").write_text(json.dumps(probe))
    with pytest.raises(GrantsError) as loaded:  # INSIDE ones: no such file, so still refused
        load(folder / "probe.json", environ={"HOME_TOKEN": "x"})
    escapes = "escapes the grants directory" in str(loaded.value)
    assert escapes == (rel in ESCAPING)
    out = folder / "grants.json"
    drafted = run(*args, "--preamble-file", rel, "-o", out)
    if not escapes:
        assert drafted.exit_code == 0, drafted.output
        assert json.loads(out.read_text())["profiles"]["home"]["preamble_file"] == rel
        return
    assert drafted.exit_code == 1
    assert drafted.stderr.splitlines() == [
        f'specgen: --preamble-file "{rel}" escapes the folder of the grants file, which the '
        "loader refuses; give a path inside it, relative to the grants file"
    ]
    assert not out.exists()
    assert run(*args, "--preamble-file", rel).exit_code == 1  # on stdout too


def test_preamble_file_on_stdout_may_not_leave_its_start() -> None:
    """Without -o the grants file's folder is unknown, so a `..` that leaves the path's
    own start is refused even where a folder of that name would take it back in."""
    args = ["grant", "init", SMART, "--profile", "home", "-q"]
    assert run(*args, "--preamble-file", "gen/../p.js").exit_code == 0
    refused = run(*args, "--preamble-file", "../grants/p.js")
    assert refused.exit_code == 1
    assert refused.stderr.startswith('specgen: --preamble-file "../grants/p.js" escapes')
    for empty in ("", "a\x00b"):
        assert len(run(*args, "--preamble-file", empty).stderr.splitlines()) == 1


def test_bad_profile_name_is_a_usage_error() -> None:
    result = run("grant", "init", SMART, "--profile", "has space")
    assert result.exit_code == 2
    assert 'Invalid value for --profile: "has space"' in result.stderr


def test_env_name() -> None:
    assert env_name("github-api") == "GITHUB_API_TOKEN"
    assert env_name("9lives") == "API_9LIVES_TOKEN"
    assert env_name("...") == "API_TOKEN"


def test_grant_schema_prints_the_packaged_schema(tmp_path: Path) -> None:
    printed = run("grant", "schema")
    assert printed.exit_code == 0
    assert json.loads(printed.stdout)["title"] == "plimsoll-specgen grants file"
    out = tmp_path / "grants.schema.json"
    assert run("grant", "schema", "-o", out).exit_code == 0
    assert out.read_text() == printed.stdout


def test_check_grants_without_catalog_checks_allow_only(tmp_path: Path) -> None:
    profile = {
        "base_url": "https://h.example",
        "allowed_callers": ["me"],
        "allow": ["GET /lights/kitchen", "GET /garage"],
    }
    g = tmp_path / "grants.json"
    g.write_text(json.dumps({"profiles": {"home": profile}}))
    result = run("check", SMART, "--grants", g, "--profile", "home")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1:] == [
        "  allow: GET /garage is not an instance of any route in the document"
    ]


def test_check_grants_names_a_narrowed_catalog_entry_once(tmp_path: Path) -> None:
    routes = json.loads(run("emit", "catalog", SMART).stdout)
    catalog = ["GET /lights/kitchen" if r == "GET /lights/*" else r for r in routes]
    profile = {"base_url": "https://h.example", "allowed_callers": ["me"], "catalog": catalog}
    g = tmp_path / "grants.json"
    g.write_text(json.dumps({"profiles": {"home": profile}}))
    result = run("check", SMART, "--grants", g, "--profile", "home")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1:] == [
        "  catalog: ~ GET /lights/kitchen (the document has GET /lights/*)"
    ]
