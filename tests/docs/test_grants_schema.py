"""The published grants schema and the runtime's loader agree.

The schema is what editors validate a grants file with while it is written; the loader
is the authority when it runs. A file the schema passes but the loader refuses (or the
other way round) would teach an operator the wrong format, so every rule the schema can
express is checked against the loader on the same input, in both directions.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runtime import GrantsError
from runtime import load_grants as load
from specgen.grant_init import schema_text

ROOT = Path(__file__).resolve().parents[2]
ENV = {"API_TOKEN": "tok-123", "JWT_SECRET": "a-signing-key-of-at-least-32-bytes!"}

SCHEMA = json.loads(schema_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

BASE: dict[str, Any] = {
    "base_url": "https://api.example.com",
    "allowed_callers": ["agent"],
    "allow": ["GET /v1/items/*"],
}


_FORM = "application/x-www-form-urlencoded"


def _with(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is _DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return body


_DROP = object()

# (case id, profile name, profile body, does it load?)
CASES: list[tuple[str, str, Any, bool]] = [
    ("minimal", "p", _with(), True),
    ("lower-case method", "p", _with(allow=["get /v1/items/*"]), True),
    (
        "every field",
        "p.v2_x-y",
        _with(
            **{"global": "memory"},
            token={"type": "static", "env": "API_TOKEN"},
            catalog=["GET /v1/items", "GET /v1/items/*"],
            preamble="host.x = 1;",
            health_check="GET /v1/health",
            max_calls=100000,
            route_max_calls={"GET /v1/items/*": 3},
            scopes=["items:read"],
        ),
        True,
    ),
    (
        "nulls count as absent",
        "p",
        _with(
            catalog=None,
            preamble=None,
            preamble_file=None,
            max_calls=None,
            health_check=None,
            token=None,
            scopes=None,
            route_max_calls=None,
            **{"global": None},
        ),
        True,
    ),
    ("empty allow", "p", _with(allow=[]), False),
    ("null allow", "p", _with(allow=None), False),
    ("no allow", "p", _with(allow=_DROP), False),
    ("loopback override, any port", "p", _with(base_url_overrides=["http://127.0.0.1:*"]), True),
    ("https override", "p", _with(base_url_overrides=["https://mirror.example:8443"]), True),
    ("remote override, any port", "p", _with(base_url_overrides=["https://a.example:*"]), False),
    ("plain http override to a remote host", "p", _with(base_url_overrides=["http://a.b"]), False),
    ("token type defaults to static", "p", _with(token={"env": "API_TOKEN"}), True),
    ("token in X-API-Key", "p", _with(token={"env": "API_TOKEN", "header": "X-API-Key"}), True),
    (
        "token value template",
        "p",
        _with(token={"env": "API_TOKEN", "header": "Authorization", "value": "Token {token}"}),
        True,
    ),
    ("token in the query", "p", _with(token={"env": "API_TOKEN", "query": "api_key"}), True),
    (
        "basic token",
        "p",
        _with(token={"type": "basic", "user_env": "API_TOKEN", "password_env": "API_TOKEN"}),
        True,
    ),
    (
        "jwt token",
        "p",
        _with(token={"type": "jwt", "secret_env": "JWT_SECRET", "audience": "api", "ttl_sec": 30}),
        True,
    ),
    ("loopback http", "p", _with(base_url="http://127.0.0.1:8080"), True),
    ("localhost http", "p", _with(base_url="http://localhost:9"), True),
    ("max_calls 0 is the default", "p", _with(max_calls=0), True),
    ("blank health_check", "p", _with(health_check="  "), True),
    ("wildcard caller", "p", _with(allowed_callers=["*"]), True),
    ("preamble and a null preamble_file", "p", _with(preamble="x", preamble_file=None), True),
    # refused by both
    ("no base_url", "p", _with(base_url=_DROP), False),
    ("no allowed_callers", "p", _with(allowed_callers=_DROP), False),
    ("empty allowed_callers", "p", _with(allowed_callers=[]), False),
    ("blank caller", "p", _with(allowed_callers=[" "]), False),
    ("misspelt field", "p", _with(alow=["GET /a"]), False),
    ("bad profile name", "has space", _with(), False),
    ("profile name too long", "n" * 129, _with(), False),
    ("plain http to a remote host", "p", _with(base_url="http://api.example.com"), False),
    ("ftp base_url", "p", _with(base_url="ftp://api.example.com"), False),
    ("base_url with a path", "p", _with(base_url="https://api.example.com/v1"), False),
    ("base_url with user info", "p", _with(base_url="https://u@api.example.com"), False),
    ("HEAD route", "p", _with(allow=["HEAD /v1"]), True),
    ("TRACE route", "p", _with(allow=["TRACE /v1"]), False),
    ("route with a partial segment", "p", _with(allow=["GET /v1/*.json"]), True),
    (
        "object entry",
        "p",
        _with(
            allow=[{"route": "GET /v1", "query": ["a"], "headers": ["X-A"], "style": {"a": "form"}}]
        ),
        True,
    ),
    (
        "object entry with a body",
        "p",
        _with(allow=[{"route": "POST /v1", "body": ["text/plain"]}]),
        True,
    ),
    (
        "object entry with an unknown key",
        "p",
        _with(allow=[{"route": "GET /v1", "cookies": ["a"]}]),
        False,
    ),
    (
        "object entry with an unknown style",
        "p",
        _with(allow=[{"route": "GET /v1", "query": ["a"], "style": {"a": "matrix"}}]),
        False,
    ),
    (
        "object entry with an XML and an octet-stream body",
        "p",
        _with(
            allow=[{"route": "POST /v1", "body": ["application/xml", "application/octet-stream"]}]
        ),
        True,
    ),
    (
        "object entry with a wildcard body type",
        "p",
        _with(allow=[{"route": "POST /v1", "body": ["image/*"]}]),
        False,
    ),
    (
        "object entry with a body type holding a parameter",
        "p",
        _with(allow=[{"route": "POST /v1", "body": ["text/xml; charset=utf-8"]}]),
        False,
    ),
    (
        "object entry with an upper-case body type",
        "p",
        _with(allow=[{"route": "POST /v1", "body": ["Text/XML"]}]),
        False,
    ),
    ("route without a path", "p", _with(allow=["GET"]), False),
    ("relative route", "p", _with(allow=["GET v1/items"]), False),
    ("route with a query", "p", _with(allow=["GET /v1/items?x=1&y"]), True),
    ("route with a space in the query", "p", _with(allow=["GET /v1/items?x=a b"]), False),
    ("route with a space in the path", "p", _with(allow=["GET /v1/has space"]), False),
    ("route with non-ASCII", "p", _with(allow=["GET /v1/café"]), False),
    ("allow not a list", "p", _with(allow="GET /v1"), False),
    ("bad catalog route", "p", _with(catalog=["TRACE /v1"]), False),
    ("unknown token type", "p", _with(token={"type": "oauth", "env": "API_TOKEN"}), False),
    ("jwt with env", "p", _with(token={"type": "jwt", "env": "API_TOKEN"}), False),
    ("token without env", "p", _with(token={"type": "static"}), False),
    ("token with an extra field", "p", _with(token={"env": "API_TOKEN", "key": "X"}), False),
    ("header name with CRLF", "p", _with(token={"env": "API_TOKEN", "header": "X\r\nY"}), False),
    ("value without {token}", "p", _with(token={"env": "API_TOKEN", "value": "Token"}), False),
    ("value with CRLF", "p", _with(token={"env": "API_TOKEN", "value": "{token}\r\n"}), False),
    (
        "query and header",
        "p",
        _with(token={"env": "API_TOKEN", "query": "k", "header": "X-K"}),
        False,
    ),
    ("query name with &", "p", _with(token={"env": "API_TOKEN", "query": "a&b"}), False),
    ("basic without password", "p", _with(token={"type": "basic", "user_env": "API_TOKEN"}), False),
    (
        "basic with an empty password",
        "p",
        _with(token={"type": "basic", "user_env": "API_TOKEN", "password": ""}),
        True,
    ),
    (
        "basic with a literal password",
        "p",
        _with(token={"type": "basic", "user_env": "API_TOKEN", "password": "hunter2"}),
        False,
    ),
    (
        "basic with an empty password and password_env",
        "p",
        _with(
            token={
                "type": "basic",
                "user_env": "API_TOKEN",
                "password_env": "API_TOKEN",
                "password": "",
            }
        ),
        False,
    ),
    ("jwt without audience", "p", _with(token={"type": "jwt", "secret_env": "JWT_SECRET"}), False),
    ("forbidden scope", "p", _with(scopes=["code:run"]), False),
    ("scope with a space", "p", _with(scopes=["a b"]), False),
    ("route cap of 0", "p", _with(route_max_calls={"GET /v1/items/*": 0}), False),
    ("route cap a string", "p", _with(route_max_calls={"GET /v1/items/*": "3"}), False),
    ("route cap key not a route", "p", _with(route_max_calls={"GET": 3}), False),
    ("max_calls too high", "p", _with(max_calls=100001), False),
    ("max_calls negative", "p", _with(max_calls=-1), False),
    ("max_calls a string", "p", _with(max_calls="10"), False),
    ("max_calls a boolean", "p", _with(max_calls=True), False),
    ("health_check not GET", "p", _with(health_check="POST /v1/health"), False),
    ("health_check with a wildcard", "p", _with(health_check="GET /v1/*"), False),
    ("preamble and preamble_file", "p", _with(preamble="x", preamble_file="p.js"), False),
    ("global not a string", "p", _with(**{"global": 1}), False),
    ("profile not an object", "p", ["GET /a"], False),
    (
        "profile headers",
        "p",
        _with(headers={"X-GitHub-Api-Version": "2022-11-28", "Accept": "application/vnd.x+json"}),
        True,
    ),
    ("profile header not a string", "p", _with(headers={"X-A": 1}), False),
    ("profile header with CR LF", "p", _with(headers={"X-A": "a\r\nX-B: b"}), False),
    ("profile header bad name", "p", _with(headers={"X A": "a"}), False),
    ("profile headers a list", "p", _with(headers=["X-A: a"]), False),
    ("profile header value too long", "p", _with(headers={"X-A": "a" * 4097}), False),
    (
        "response headers",
        "p",
        _with(
            response_headers=["Link", "X-RateLimit-*"],
            allow=[{"route": "GET /v1/items/*", "response_headers": ["ETag"]}],
        ),
        True,
    ),
    (
        "form encoding",
        "p",
        _with(allow=[{"route": "POST /v1/c", "body": [_FORM], "encoding": {"m": "deepObject"}}]),
        True,
    ),
    (
        "form encoding spaceDelimited",
        "p",
        _with(allow=[{"route": "POST /v1/c", "body": [_FORM], "encoding": {"m": "pipeDelimited"}}]),
        False,
    ),
    (
        "form encoding of a bracketed name",
        "p",
        _with(allow=[{"route": "POST /v1/c", "body": [_FORM], "encoding": {"m[a]": "deepObject"}}]),
        False,
    ),
    ("response header Set-Cookie", "p", _with(response_headers=["set-cookie"]), False),
    ("response header bare *", "p", _with(response_headers=["*"]), False),
    ("response header not a string", "p", _with(response_headers=[1]), False),
    (
        "entry response header WWW-Authenticate",
        "p",
        _with(allow=[{"route": "GET /v1/items/*", "response_headers": ["WWW-Authenticate"]}]),
        False,
    ),
]


def _loads(tmp_path: Path, doc: Any) -> bool:
    path = tmp_path / "grants.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    try:
        load(path, environ=ENV)
    except GrantsError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_schema_and_loader_agree(tmp_path: Path, name: str, body: Any, expected: bool) -> None:
    doc = {"profiles": {name: body}}
    assert _loads(tmp_path, doc) is expected
    assert VALIDATOR.is_valid(doc) is expected, list(VALIDATOR.iter_errors(doc))


@pytest.mark.parametrize(
    "doc",
    [{}, {"profiles": []}, {"profiles": {}, "extra": 1}, []],
    ids=["no profiles", "profiles a list", "unknown top-level field", "not an object"],
)
def test_top_level_refused_by_both(tmp_path: Path, doc: Any) -> None:
    assert not _loads(tmp_path, doc)
    assert not VALIDATOR.is_valid(doc)


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def _repo_grants_files() -> list[Path]:
    skip = {".venv", ".cache", "node_modules"}
    return sorted(
        p
        for p in ROOT.rglob("grants*.json")
        if not skip.intersection(p.relative_to(ROOT).parts) and "schema" not in p.name
    )


def test_every_grants_file_in_the_repository_validates() -> None:
    files = _repo_grants_files()
    assert files, "expected at least the example's grants.json"
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        errors = [e.message for e in VALIDATOR.iter_errors(doc)]
        assert not errors, f"{path}: {errors}"
