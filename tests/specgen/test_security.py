"""Token-block proposals from securitySchemes (specgen/security.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specgen.security import Proposal, propose, propose_one

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("scheme", "token"),
    [
        (
            {"type": "http", "scheme": "bearer"},
            {
                "type": "static",
                "env": "API_TOKEN",
                "header": "Authorization",
                "value": "Bearer {token}",
            },
        ),
        (
            {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT"},
            {
                "type": "static",
                "env": "API_TOKEN",
                "header": "Authorization",
                "value": "Bearer {token}",
            },
        ),
        (
            {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            {"type": "static", "env": "API_TOKEN", "header": "X-API-Key", "value": "{token}"},
        ),
        (
            {"type": "http", "scheme": "basic"},
            {"type": "basic", "user_env": "API_TOKEN_USER", "password_env": "API_TOKEN_PASSWORD"},
        ),
        (
            {"type": "apiKey", "in": "query", "name": "api_key"},
            {"type": "static", "env": "API_TOKEN", "query": "api_key"},
        ),
    ],
)
def test_what_the_document_states_is_proposed_exactly(
    scheme: dict[str, Any], token: dict[str, str]
) -> None:
    proposal = propose_one("s", scheme)
    assert proposal == Proposal("s", token)


@pytest.mark.parametrize(
    ("scheme", "why"),
    [
        ({"type": "apiKey", "in": "header", "name": "authorization"}, "prefix"),
        ({"type": "apiKey", "in": "cookie", "name": "sid"}, "cookie"),
        ({"type": "http", "scheme": "digest"}, "digest"),
        ({"type": "mutualTLS"}, "mutualTLS"),
        ({"type": "apiKey", "in": "header"}, "names no parameter"),
        ("not an object", "not an object"),
    ],
)
def test_what_cannot_be_inferred_is_said(scheme: Any, why: str) -> None:
    proposal = propose_one("s", scheme)
    assert proposal.token is None
    assert why in proposal.note


def test_oauth2_sends_a_bearer_token_and_says_it_runs_no_flow() -> None:
    proposal = propose_one("o", {"type": "oauth2", "flows": {}})
    assert proposal.token is not None and proposal.token["value"] == "Bearer {token}"
    assert "does not run the flow" in proposal.note


def test_mem0s_token_prefix_is_prose_so_no_block_is_proposed() -> None:
    doc = json.loads((ROOT / "examples/mem0_grant/mem0.openapi.json").read_text())
    [proposal] = propose(doc, env="MEM0_API_KEY")
    assert proposal.scheme == "ApiKeyAuth"
    assert proposal.token is None
    assert "Token {token}" in proposal.note


def test_required_schemes_come_first_then_the_rest_by_name() -> None:
    doc = {
        "security": [{"key": []}, {"bearer": [], "key": []}],
        "components": {
            "securitySchemes": {
                "a": {"$ref": "#/components/securitySchemes/bearer"},
                "bearer": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "query", "name": "k"},
                "broken": {"$ref": "#/nowhere"},
            }
        },
    }
    got = propose(doc)
    assert [p.scheme for p in got] == ["key", "bearer", "a", "broken"]
    assert got[2].token == got[1].token  # the $ref is followed
    assert got[3].token is None and "does not resolve" in got[3].note
    assert propose({}) == []
