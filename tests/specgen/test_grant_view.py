"""The per-grant description: only what the profile permits, typed, and true about the key."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from specgen.cli import cli
from tests.golden import GRANT_CASES, GRANT_GOLDEN, grant_argv

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "examples/memory_grant/agent-memory.openapi.json"
GRANTS = ROOT / "examples/memory_grant/grants.json"


def _emit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["emit", "description", *args])
    return result.exit_code, result.stdout, result.stderr


def _grants(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(GRANTS.read_text())
    profile = data["profiles"]["agent-memory"]
    for key, value in changes.items():
        if value is None:
            profile.pop(key, None)
        else:
            profile[key] = value
    path = tmp_path / "grants.json"
    path.write_text(json.dumps(data))
    return path


def test_golden_grant_descriptions_are_current() -> None:
    for name, args in GRANT_CASES.items():
        result = CliRunner().invoke(cli, grant_argv(args))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (GRANT_GOLDEN / name).read_text(), (
            f"{name} is stale: python -m tests.golden"
        )


def test_lists_only_the_three_permitted_operations_with_their_types_and_values() -> None:
    code, text, _ = _emit(
        str(DOCUMENT), "--global", "memory", "--grants", str(GRANTS), "--profile", "agent-memory"
    )
    assert code == 0
    methods = sorted(line.split("(")[0] for line in text.splitlines() if line.startswith("memory."))
    assert methods == [
        "memory.agent_memory_memory_get",
        "memory.agent_memory_recall",
        "memory.agent_memory_remember",
    ]
    assert "namespace_delete" not in text
    # the body and the response shape a model needs to write the example's run 1
    assert "body: { content: string; sessionId?: string | null }" in text
    assert "candidates: Array<{ id: string; score: number;" in text
    assert 'account_id = "00000000000000000000000000000042"' in text
    assert "per-run token" not in text
    assert "The broker adds the operator's API key" in text


def test_a_wider_grant_lists_more_and_pins_nothing(tmp_path: Path) -> None:
    wide = _grants(
        tmp_path,
        allow=[
            "GET /client/v4/accounts/*/agent-memory/namespaces",
            "DELETE /client/v4/accounts/*/agent-memory/namespaces/*",
        ],
    )
    code, text, _ = _emit(str(DOCUMENT), "--grants", str(wide), "--profile", "agent-memory")
    assert code == 0
    assert "Only the\n2 operation(s)" in text
    assert "allowed:" not in text


def test_no_token_means_no_claim_of_a_key(tmp_path: Path) -> None:
    bare = _grants(tmp_path, token=None)
    code, text, _ = _emit(str(DOCUMENT), "--grants", str(bare), "--profile", "agent-memory")
    assert code == 0
    assert "API key" not in text
    assert "The grant has no credential" in text


def test_the_credential_sentence_follows_the_token_type(tmp_path: Path) -> None:
    """Each kind the broker can send gets its own true sentence: a per-run token is
    claimed only for a jwt block, a key only where a static key is sent."""
    said = {}
    for kind in ("static", "basic", "jwt"):
        path = _grants(tmp_path, token={"type": kind, "env": "X"})
        code, text, err = _emit(str(DOCUMENT), "--grants", str(path), "--profile", "agent-memory")
        assert code == 0, err
        said[kind] = text
    assert "mints a short-lived token" in said["jwt"] and "API key" not in said["jwt"]
    assert "HTTP basic" in said["basic"] and "mints" not in said["basic"]
    assert "API key" in said["static"] and "mints" not in said["static"]


def test_refusals_are_one_line(tmp_path: Path) -> None:
    code, _, err = _emit(str(DOCUMENT), "--grants", str(GRANTS), "--profile", "nobody")
    assert code == 1 and err == f'specgen: grants {GRANTS}: no profile "nobody"\n'
    odd = _grants(tmp_path, token={"type": "oauth", "env": "X"})
    code, _, err = _emit(str(DOCUMENT), "--grants", str(odd), "--profile", "agent-memory")
    assert code == 1 and 'token type "oauth" is not one the runtime supports' in err
    result = CliRunner().invoke(
        cli, ["emit", "allow", str(DOCUMENT), "--grants", str(GRANTS), "--profile", "agent-memory"]
    )
    assert result.exit_code == 2 and "emit description only" in result.stderr
    result = CliRunner().invoke(
        cli, ["emit", "description", str(DOCUMENT), "--grants", str(GRANTS)]
    )
    assert result.exit_code == 2 and "go together" in result.stderr


def test_names_the_response_headers_the_grant_lets_through(tmp_path: Path) -> None:
    data = json.loads(GRANTS.read_text())
    allow = data["profiles"]["agent-memory"]["allow"]
    first = allow[0] if isinstance(allow[0], dict) else {"route": allow[0]}
    allow[0] = {**first, "response_headers": ["Location", "Link"]}
    path = _grants(tmp_path, response_headers=["Link", "X-RateLimit-*"], allow=allow)
    code, text, err = _emit(str(DOCUMENT), "--grants", str(path), "--profile", "agent-memory")
    assert code == 0, err
    assert (
        "its headers: content-type, link, x-ratelimit-* (on some routes also location)."
        in text.replace("\n", " ")
    )
