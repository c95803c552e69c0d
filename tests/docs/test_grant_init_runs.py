"""The quick start works as docs/grants.md writes it: `grant init`, then `check --grants`,
then `specgen run` against a loopback API, for three documents nobody wrote for it
(Cloudflare's Agent Memory, Mem0's, GitHub's).

The loopback API records what reached it, so a drafted entry's query parameters, the
path values and the key are checked where they landed, not in the draft.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner, Result

from runtime.cli import run as run_command
from specgen.cli import cli
from tests import conftest as prerequisites
from tests.runtime.loopback import FakeAPI, reply

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("PLIMSOLL_CORPUS_DIR", ROOT / ".cache" / "corpus"))
MEMORY = ROOT / "examples/memory_grant/agent-memory.openapi.json"
MEM0 = ROOT / "examples/mem0_grant/mem0.openapi.json"
GITHUB = CORPUS / "octokit/generated/api.github.com.json"
KEY = "init-run-key-5d1f"


def specgen(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


class Case:
    def __init__(
        self,
        spec: Path,
        global_name: str,
        allow: str,
        code: str,
        path: str,
        query: dict[str, list[str]],
        token_edit: dict[str, str] | None = None,
        auth: str = f"Bearer {KEY}",
    ) -> None:
        self.spec, self.global_name, self.allow, self.code = spec, global_name, allow, code
        self.path, self.query, self.token_edit, self.auth = path, query, token_edit, auth


CASES = {
    "agent-memory": Case(
        MEMORY,
        "memory",
        "GET /client/v4/accounts/42/agent-memory/namespaces/support/profiles/c-7/memories"
        "?per_page&cursor",
        'await memory.agent_memory_memory_list("42", "support", "c-7", {per_page: 20})',
        "/client/v4/accounts/42/agent-memory/namespaces/support/profiles/c-7/memories",
        {"per_page": ["20"]},
    ),
    "mem0": Case(
        MEM0,
        "mem0",
        "GET /v1/memories/?user_id=alice&page&page_size",
        "await mem0.memories_list({page: 2})",
        "/v1/memories/",
        {"user_id": ["alice"], "page": ["2"]},
        # the draft's note: the document states no prefix for its Authorization apiKey
        token_edit={"header": "Authorization", "value": "Token {token}"},
        auth=f"Token {KEY}",
    ),
    "github": Case(
        GITHUB,
        "gh",
        "GET /repos/octo/hello/issues?state&labels&per_page&page",
        '(await gh.$response.issues_list_for_repo("octo", "hello", {state: "open", per_page: 5}))'
        ".body",  # the $response form the description names
        "/repos/octo/hello/issues",
        {"state": ["open"], "per_page": ["5"]},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_init_then_check_then_run_against_a_loopback_api(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    if not case.spec.exists():
        prerequisites.missing(f"GitHub's document ({case.spec})", "make corpus")
    g = case.global_name
    built = specgen("build", case.spec, "-o", tmp_path / "gen", "--global", g, "-q")
    assert built.exit_code == 0, built.output
    grants = tmp_path / "grants.json"
    drafted = specgen(
        "grant", "init", case.spec, "--profile", name, "--caller", "agent", "--global", g,
        "--allow", case.allow, "--base-url-override", "http://127.0.0.1:*",
        "--preamble-file", "gen/preamble.js", "-o", grants,
    )  # fmt: skip
    assert drafted.exit_code == 0, drafted.output

    # the catalog is exactly what emit catalog prints, so check passes as drafted
    doc = json.loads(grants.read_text())
    profile = doc["profiles"][name]
    emitted = specgen("emit", "catalog", case.spec, "--global", g, "-q")
    assert profile["catalog"] == json.loads(emitted.stdout)
    assert profile["allow"] == [case.allow]
    checked = specgen("check", case.spec, "--grants", grants, "--profile", name, "--global", g)
    assert checked.exit_code == 0, checked.output
    assert checked.stderr == "specgen: up to date\n"

    if case.token_edit is not None:
        profile["token"].update(case.token_edit)
        grants.write_text(json.dumps(doc))
    api = FakeAPI(reply(200, b"[]", {"Content-Type": "application/json"}))
    try:
        code = tmp_path / "code.js"
        code.write_text(f"const r = {case.code};\nconsole.log(JSON.stringify(r));\n")
        ran = CliRunner().invoke(
            run_command,
            [str(code), "--grants", str(grants), "--profile", name, "--caller", "agent",
             "--base-url", api.url, "--json"],
            env={profile["token"]["env"]: KEY},
            catch_exceptions=False,
        )  # fmt: skip
    finally:
        api.close()
    record = json.loads(ran.stdout)
    assert record["exit_code"] == 0, record
    assert record["stdout"] == "[]\n"
    [seen] = api.requests
    target = urlsplit(seen.path)
    assert (seen.method, target.path) == ("GET", case.path)
    assert parse_qs(target.query) == case.query
    assert seen.headers["authorization"] == case.auth
    # what the User-Agent note says the broker sends when the profile sets none
    assert seen.headers["user-agent"].startswith("plimsoll-specgen/")


def test_the_notes_say_what_the_entry_does_not_permit_and_where_the_key_may_go() -> None:
    spec = MEM0
    result = specgen(
        "grant", "init", spec, "--profile", "m", "--caller", "a", "--allow", "GET /v1/memories/?user_id=alice"
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    notes = [n for n in result.stderr.splitlines() if n.startswith("specgen: note: ")]
    [unlisted] = [n for n in notes if "permits 1 of the 15 query" in n]
    assert "a call sending agent_id, app_id" in unlisted
    assert (
        '--allow "GET /v1/memories/?user_id=alice&agent_id&app_id&run_id&metadata&categories'
        "&org_id&project_id&fields&keywords&page&page_size&limit&start_date&end_date\")"
    ) in unlisted
    assert any('"base_url_overrides": ["http://127.0.0.1:*"]' in n for n in notes), notes
    assert "base_url_overrides" not in json.loads(result.stdout)["profiles"]["m"]


def test_githubs_draft_notes_its_user_agent() -> None:
    if not GITHUB.exists():
        prerequisites.missing(f"GitHub's document ({GITHUB})", "make corpus")
    result = specgen("grant", "init", GITHUB, "--profile", "gh", "--caller", "a")
    assert result.exit_code == 0, result.output
    [note] = [n for n in result.stderr.splitlines() if "User-Agent" in n]
    assert "plimsoll-specgen/" in note and '"headers" ({"User-Agent": "your-app"})' in note
    # another API's draft says nothing about it
    other = specgen("grant", "init", MEM0, "--profile", "m", "--caller", "a")
    assert "User-Agent" not in other.stderr


# --- the allow-entry language through --allow ------------------------------------------


def _init(spec: Path, *allow: str, extra: tuple[str, ...] = ()) -> Result:
    args: list[str | Path] = ["grant", "init", spec, "--profile", "p", "--caller", "a"]
    for entry in allow:
        args += ["--allow", entry]
    return specgen(*args, *extra)


def test_allow_takes_json_objects_arrays_and_files(tmp_path: Path) -> None:
    entry = {"route": "GET /v1/memories/", "query": ["user_id=alice", "categories"],
             "style": {"categories": "form"}}  # fmt: skip
    listed = tmp_path / "allow.json"
    listed.write_text(json.dumps(["GET /v1/memories/*/", "POST /v1/memories/search/"]))
    result = _init(MEM0, json.dumps(entry), f"@{listed}")
    assert result.exit_code == 0, result.output
    allow = json.loads(result.stdout)["profiles"]["p"]["allow"]
    assert allow == [entry, "GET /v1/memories/*/", "POST /v1/memories/search/"]
    grants = tmp_path / "grants.json"
    grants.write_text(result.stdout)
    checked = specgen("check", MEM0, "--grants", grants, "--profile", "p")
    assert checked.exit_code == 0, checked.output


@pytest.mark.parametrize(
    ("allow", "why"),
    [
        (
            "GET /v1/memories/?colour",
            'specgen: --allow "GET /v1/memories/?colour": allow entry "GET /v1/memories/" names '
            'query parameter "colour", which the document does not declare for that route',
        ),
        (
            "GET /v1/memories/?page=two",
            'specgen: --allow "GET /v1/memories/?page=two": allow entry "GET /v1/memories/" pins '
            'query parameter "page" to "two", which is not an integer',
        ),
        (
            '{"route": "GET /v1/memories/", "query": ["categories"], "style": {"categories": "pipeDelimited"}}',
            "specgen: --allow "
            '"{\\"route\\": \\"GET /v1/memories/\\", \\"query\\": [\\"categories\\"], '
            '\\"style\\": {\\"categories\\": \\"pipeDelimited\\"}}": allow entry '
            '"GET /v1/memories/" sends query parameter "categories" in style "pipeDelimited"; '
            'the document declares "form"',
        ),
        ('{"route": ', 'specgen: --allow "{\\"route\\": ": invalid JSON: '),
        ("@/nonexistent/allow.json", 'specgen: --allow "@/nonexistent/allow.json": cannot read: '),
        (
            "GET /v1/memories/ GET /v1/memories/",
            'specgen: --allow "GET /v1/memories/ GET /v1/memories/" must be "METHOD /path"',
        ),
    ],
)
def test_allow_entries_check_would_refuse_are_refused_in_one_line(allow: str, why: str) -> None:
    result = _init(MEM0, allow)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(why), line


@pytest.mark.parametrize(
    ("flag", "url"),
    [
        ("--base-url", "https://api.example.com"),
        ("--base-url", "https://api.example.com:8443"),
        ("--base-url", "http://127.0.0.2:8080"),
        ("--base-url", "http://[::1]:9"),
        ("--base-url", "ftp://x"),
        ("--base-url", "https://x.example/path"),
        ("--base-url", "https://x.example?q"),
        ("--base-url", "http://api.example.com"),
        ("--base-url", "https://user@x.example"),
        ("--base-url", "https://api.example.com?"),
        ("--base-url", "https://api.example.com#"),
        ("--base-url", "https://api example.com"),
        ("--base-url", "https://api.example.com\t"),
        ("--base-url", "https://xn--a.com"),
        ("--base-url", "https://bücher.example"),
        ("--base-url-override", "https://staging.example.com"),
        ("--base-url-override", "http://localhost:*"),
        ("--base-url-override", "http://staging.example.com"),
        ("--base-url-override", "https://staging.example.com:*"),
        ("--base-url-override", "https://staging.example.com/v2"),
        ("--base-url-override", "http://127.0.0.1::*"),
    ],
)
def test_a_drafted_origin_is_one_the_loader_takes_or_is_refused_in_one_line(
    flag: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`grant init` and the loader agree on each origin: a draft `check` passes never
    fails at the first run for its base_url or an override."""
    from runtime import GrantsError, load_grants

    monkeypatch.setenv("P_TOKEN", KEY)  # the draft's token env, so only the origin decides
    grants = tmp_path / "grants.json"
    result = _init(MEM0, "GET /v1/memories/", extra=(flag, url, "-o", str(grants)))
    loaded: GrantsError | None = None
    if result.exit_code == 0:
        try:
            load_grants(grants)
        except GrantsError as exc:
            loaded = exc
        assert loaded is None, f"the draft passed grant init but not the loader: {loaded}"
    else:
        assert result.exit_code == 1, result.output
        [line] = result.stderr.splitlines()
        assert line.startswith(f"specgen: {flag} "), line
        assert not grants.exists()
        # the loader refuses it too: the same origin written by hand
        body = json.loads(_init(MEM0, "GET /v1/memories/").stdout)
        profile = body["profiles"]["p"]
        if flag == "--base-url":
            profile["base_url"] = url
        else:
            profile["base_url_overrides"] = [url]
        assert profile["token"]["env"] == "P_TOKEN"
        grants.write_text(json.dumps(body))
        with pytest.raises(GrantsError, match=r"BaseURL|base_url|override"):
            load_grants(grants)


# --- profile headers the document fixes -------------------------------------------------


def _doc(headers: dict[str, list[dict[str, object]]], security: bool = False) -> dict[str, object]:
    def op(params: list[dict[str, object]]) -> dict[str, object]:
        return {"parameters": params, "responses": {"200": {"description": "ok"}}}

    doc: dict[str, object] = {
        "openapi": "3.0.3",
        "info": {"title": "h", "version": "1"},
        "servers": [{"url": "https://api.h.example"}],
        "paths": {path: {"get": op(params)} for path, params in headers.items()},
    }
    if security:
        doc["components"] = {
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
        }
        doc["security"] = [{"key": []}]
    return doc


def _header(name: str, values: list[str], required: bool = True) -> dict[str, object]:
    return {"name": name, "in": "header", "required": required,
            "schema": {"type": "string", "enum": values}}  # fmt: skip


def test_a_required_header_with_one_value_becomes_a_profile_header(tmp_path: Path) -> None:
    version = _header("X-Api-Version", ["2024-01-01"])
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(_doc({"/a": [version], "/b": [version]})))
    result = _init(spec, "GET /a")
    assert result.exit_code == 0, result.output
    profile = json.loads(result.stdout)["profiles"]["p"]
    assert profile["headers"] == {"X-Api-Version": "2024-01-01"}
    assert "headers: every call carries X-Api-Version: 2024-01-01" in result.stderr
    # an entry may not list the header the profile fixes
    clash = _init(spec, '{"route": "GET /a", "headers": ["X-Api-Version"]}')
    assert clash.exit_code == 1
    assert 'lists header "x-api-version", which the draft sets on every call' in clash.stderr


@pytest.mark.parametrize(
    "params",
    [
        {"/a": [_header("X-Mode", ["fast", "slow"])]},  # two values: the code chooses
        {"/a": [_header("X-Mode", ["fast"], required=False)]},  # optional
        {"/a": [_header("Authorization", ["Bearer x"])]},  # the credential's header
    ],
)
def test_headers_the_document_does_not_fix_are_not_drafted(
    params: dict[str, list[dict[str, object]]], tmp_path: Path
) -> None:
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(_doc(params)))
    result = _init(spec, "GET /a")
    assert result.exit_code == 0, result.output
    assert "headers" not in json.loads(result.stdout)["profiles"]["p"]


def test_two_fixed_values_of_one_header_are_noted_not_drafted(tmp_path: Path) -> None:
    spec = tmp_path / "api.json"
    spec.write_text(
        json.dumps(_doc({"/a": [_header("X-V", ["1"])], "/b": [_header("X-V", ["2"])]}))
    )
    result = _init(spec, "GET /a", "GET /b")
    assert "headers" not in json.loads(result.stdout)["profiles"]["p"]
    assert 'header "X-V" is fixed to different values on different routes' in result.stderr
    # granting one of the routes drafts its value
    one = _init(spec, "GET /b")
    assert json.loads(one.stdout)["profiles"]["p"]["headers"] == {"X-V": "2"}


def test_an_api_key_header_is_drafted_as_the_document_states_it(tmp_path: Path) -> None:
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(_doc({"/a": []}, security=True)))
    result = _init(spec, "GET /a")
    token = json.loads(result.stdout)["profiles"]["p"]["token"]
    assert token == {"type": "static", "env": "P_TOKEN", "header": "X-API-Key", "value": "{token}"}
    assert 'securityScheme "key" asks' in result.stderr


def test_a_drafted_profile_header_passes_check_and_goes_on_every_call(tmp_path: Path) -> None:
    version = _header("X-Api-Version", ["2024-01-01"])
    doc = _doc({"/a": [version], "/b/{id}": [version]})
    doc["paths"]["/b/{id}"]["get"]["parameters"].append(  # type: ignore[index]
        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
    )
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(doc))
    grants = tmp_path / "grants.json"
    drafted = _init(
        spec,
        "GET /a",
        "GET /b/7",
        extra=("--base-url-override", "http://127.0.0.1:*", "-o", str(grants)),
    )
    assert drafted.exit_code == 0, drafted.output
    checked = specgen("check", spec, "--grants", grants, "--profile", "p")
    assert checked.exit_code == 0, checked.output
    api = FakeAPI(reply(200, b"{}", {"Content-Type": "application/json"}))
    try:
        code = tmp_path / "code.js"
        code.write_text("await host.get('/a'); await host.get('/b/7');\n")
        ran = CliRunner().invoke(
            run_command,
            [str(code), "--grants", str(grants), "--profile", "p", "--caller", "a",
             "--base-url", api.url, "--json"],
            env={"P_TOKEN": KEY},
            catch_exceptions=False,
        )  # fmt: skip
    finally:
        api.close()
    assert json.loads(ran.stdout)["exit_code"] == 0, ran.stdout
    assert [s.path for s in api.requests] == ["/a", "/b/7"]
    assert all(s.headers["x-api-version"] == "2024-01-01" for s in api.requests)
    assert all(s.headers["user-agent"].startswith("plimsoll-specgen/") for s in api.requests)
